// ropegen._ropegen: compile a spec (through ropegen::Runtime, so kernels are
// cached in memory and on disk) and run it on DLPack tensors (numpy, torch
// CPU) without copies; errors are ValueErrors with the CLI's messages.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "ropegen/rope_math.h"
#include "ropegen/runtime.h"
#include "ropegen/spec_io.h"
#include "runtime/host_apply.h"
#include "runtime/tensor_view.h"

namespace nb = nanobind;
using namespace ropegen;

namespace {

using Tensor = nb::ndarray<nb::device::cpu>;

template <typename T>
T value_or_raise(Result<T> r) {
  if (!r) throw nb::value_error(format(r.errors()).c_str());
  return std::move(r).value();
}

RopeSpec parse(const std::string& text, const std::string& source) { return value_or_raise(parse_spec(text, source)); }

std::vector<int64_t> shape_of(const Tensor& t) {
  std::vector<int64_t> s(t.ndim());
  for (size_t i = 0; i < t.ndim(); ++i) s[i] = static_cast<int64_t>(t.shape(i));
  return s;
}
std::vector<int64_t> strides_of(const Tensor& t) {
  std::vector<int64_t> s(t.ndim());
  for (size_t i = 0; i < t.ndim(); ++i) s[i] = t.stride(i);
  return s;
}

void check_dtype(const RopeSpec& spec, const Tensor& t, const char* name) {
  const nb::dlpack::dtype want = spec.dtype == DType::F32 ? nb::dtype<float>()
                                 : spec.dtype == DType::F16 ? nb::dlpack::dtype{uint8_t(nb::dlpack::dtype_code::Float), 16, 1}
                                                            : nb::dlpack::dtype{uint8_t(nb::dlpack::dtype_code::Bfloat), 16, 1};
  if (t.dtype() != want)
    throw nb::value_error((std::string(name) + ": the spec's dtype is " + to_string(spec.dtype) +
                           "; pass a tensor of that dtype (float32, float16 or bfloat16)").c_str());
  if (t.ndim() > 0 && t.stride(t.ndim() - 1) != 1)
    throw nb::value_error((std::string(name) + ": the head dim (last) must be contiguous (stride 1)").c_str());
}

std::vector<int64_t> ids_of(const Tensor& t, bool* is_int64) {
  *is_int64 = t.dtype() == nb::dtype<int64_t>();
  if (!*is_int64 && t.dtype() != nb::dtype<int32_t>()) throw nb::value_error("positions must be int32 or int64");
  std::vector<int64_t> out;
  const int64_t n = static_cast<int64_t>(t.size());
  // Ids are small: read them through their strides into a dense copy.
  std::vector<int64_t> shape = shape_of(t), strides = strides_of(t);
  for (int64_t i = 0; i < n; ++i) {
    int64_t offset = 0, rest = i;
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) offset += (rest % shape[d]) * strides[d], rest /= shape[d];
    out.push_back(*is_int64 ? static_cast<const int64_t*>(t.data())[offset] : static_cast<const int32_t*>(t.data())[offset]);
  }
  return out;
}

class Kernel {
 public:
  Kernel(RopeSpec spec, std::string target) : spec_(std::move(spec)), target_(std::move(target)) {}

  void call(Tensor q, std::optional<Tensor> k, std::optional<Tensor> positions, int64_t offset,
            std::optional<int64_t> seq_len, Tensor out_q, std::optional<Tensor> out_k, std::optional<Tensor> cu_seqlens,
            bool backward) {
    check_dtype(spec_, q, "q");
    check_dtype(spec_, out_q, "out_q");
    if (k.has_value() != out_k.has_value()) throw nb::value_error("k and out_k go together");
    if (k) check_dtype(spec_, *k, "k"), check_dtype(spec_, *out_k, "out_k");
    if (shape_of(out_q) != shape_of(q) || strides_of(out_q) != strides_of(q) ||
        (k && (shape_of(*out_k) != shape_of(*k) || strides_of(*out_k) != strides_of(*k))))
      throw nb::value_error("out_q / out_k must have the shape and strides of q / k");

    runtime::ApplyRequest request;  // shapes and ids only: the tensors stay where they are
    request.q = {"q", shape_of(q), {}};
    if (k) request.k = runtime::HostTensor{"k", shape_of(*k), {}};
    std::vector<int32_t> ids32;
    std::vector<int64_t> ids64;
    lowering::KernelVariant variant;
    variant.with_k = k.has_value();
    variant.backward = request.backward = backward;
    if (positions) {
      runtime::HostPositions p{"positions", shape_of(*positions), {}, false};
      p.values = ids_of(*positions, &p.is_int64);
      variant.position_type = p.is_int64 ? Halide::Int(64) : Halide::Int(32);
      request.positions = p;
    }
    std::vector<int32_t> cu32;
    if (cu_seqlens) {
      bool wide = false;
      request.cu_seqlens = ids_of(*cu_seqlens, &wide);
    }
    request.offset = offset;
    request.seq_len = seq_len;
    if (std::vector<Diagnostic> errors = runtime::check_call(spec_, request); !errors.empty())
      throw nb::value_error(format(errors).c_str());

    std::shared_ptr<runtime::Kernel> kernel = value_or_raise(Runtime::process().get(spec_, variant, target_));
    const Halide::Type type = lowering::storage_type(spec_.dtype);
    runtime::RopeCall call;
    call.q = runtime::logical_tensor(q.data(), type, spec_.layout, shape_of(q), strides_of(q));
    call.out_q = runtime::logical_tensor(out_q.data(), type, spec_.layout, shape_of(q), strides_of(q));
    if (k) {
      call.k = runtime::logical_tensor(k->data(), type, spec_.layout, shape_of(*k), strides_of(*k));
      call.out_k = runtime::logical_tensor(out_k->data(), type, spec_.layout, shape_of(*k), strides_of(*k));
    }
    if (request.positions) {
      void* data = nullptr;
      if (request.positions->is_int64) ids64 = request.positions->values, data = ids64.data();
      else ids32.assign(request.positions->values.begin(), request.positions->values.end()), data = ids32.data();
      const auto& qs = request.q.shape;
      const int64_t batch = spec_.layout == Layout::THD ? 1 : spec_.layout == Layout::SBHD ? qs[1] : qs[0];
      call.positions = runtime::logical_positions(data, variant.position_type, spec_.layout, request.positions->shape, batch,
                                                  spec_.axes.count());
    }
    const int64_t tokens = spec_.layout == Layout::THD ? request.q.shape[0] : 0;
    std::vector<int64_t> cu = request.cu_seqlens.value_or(std::vector<int64_t>{0, tokens});
    cu32.assign(cu.begin(), cu.end());
    call.cu_seqlens = Halide::Buffer<int32_t>(cu32.data(), static_cast<int>(cu32.size()));
    call.offset = offset;
    call.seq_len = seq_len.value_or(runtime::default_seq_len(spec_, request));
    nb::gil_scoped_release release;  // the kernel runs on its own threads
    kernel->run(call);
  }

  std::string spec_yaml() const { return to_yaml(spec_); }

 private:
  RopeSpec spec_;
  std::string target_;
};

}  // namespace

NB_MODULE(_ropegen, m) {
  m.doc() = "rope-gen kernels; use the `ropegen` package rather than this module";
  nb::class_<Kernel>(m, "Kernel")
      .def("__call__", &Kernel::call, nb::arg("q"), nb::arg("k").none(), nb::arg("positions").none(),
           nb::arg("offset"), nb::arg("seq_len").none(), nb::arg("out_q"), nb::arg("out_k").none(),
           nb::arg("cu_seqlens").none(), nb::arg("backward"))
      .def_prop_ro("spec", &Kernel::spec_yaml);
  m.def("compile", [](const std::string& text, const std::string& source, const std::string& target) {
    RopeSpec spec = parse(text, source);
    // The binding passes q and k only; the other encodings' tensors and
    // run-time frequencies go through `rope-gen apply` or ropegen::Runtime (C++).
    if (spec.encoding != Encoding::Rope || spec.frequency.scheme == FrequencyScheme::Runtime)
      throw nb::value_error((source + ": the Python binding runs rope specs with static frequencies; use `rope-gen "
                             "apply` or ropegen::Runtime (C++) for encoding " + to_string(spec.encoding) +
                             (spec.encoding == Encoding::Rope ? " with frequency scheme runtime" : ""))
                                .c_str());
    return Kernel(std::move(spec), target);
  });
  m.def("freqs", [](const std::string& text, const std::string& source, std::optional<int64_t> seq_len) {
    const RopeFrequencies f = compute_frequencies(parse(text, source), seq_len);
    return std::make_tuple(f.inv_freq, f.attention_factor);
  });
  m.def("normalise", [](const std::string& text, const std::string& source) { return to_yaml(parse(text, source)); });
}
