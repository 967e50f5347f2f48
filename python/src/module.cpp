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
    throw nb::value_error((std::string(name) + ": the last dim must be contiguous (stride 1)").c_str());
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

// A host buffer over a dense 1-D float32 tensor (run-time frequencies and their gradient).
Halide::Buffer<float> float_vector(const Tensor& t, const char* name) {
  if (t.dtype() != nb::dtype<float>() || t.ndim() != 1 || t.stride(0) != 1)
    throw nb::value_error((std::string(name) + " must be a contiguous 1-D float32 tensor").c_str());
  return Halide::Buffer<float>(static_cast<float*>(t.data()), static_cast<int>(t.shape(0)));
}

class Kernel {
 public:
  Kernel(RopeSpec spec, std::string target) : spec_(std::move(spec)), target_(std::move(target)) {}

  // Rope: q (, k) -> out_q (, out_k), forward or backward. Other encodings:
  // their tensor x as q -> out_q.
  void call(Tensor q, std::optional<Tensor> k, std::optional<Tensor> positions, int64_t offset,
            std::optional<int64_t> seq_len, Tensor out_q, std::optional<Tensor> out_k, std::optional<Tensor> cu_seqlens,
            bool backward, std::optional<Tensor> table, std::optional<Tensor> freqs, std::optional<Tensor> saved_q,
            std::optional<Tensor> saved_k, std::optional<Tensor> d_freqs) {
    const bool rope = spec_.encoding == Encoding::Rope;
    const char* q_name = rope ? "q" : "x";
    check_dtype(spec_, q, q_name);
    check_dtype(spec_, out_q, "out");
    if (k.has_value() != out_k.has_value()) throw nb::value_error("k and out_k go together");
    if (k) check_dtype(spec_, *k, "k"), check_dtype(spec_, *out_k, "out_k");
    if (shape_of(out_q) != shape_of(q) || strides_of(out_q) != strides_of(q) ||
        (k && (shape_of(*out_k) != shape_of(*k) || strides_of(*out_k) != strides_of(*k))))
      throw nb::value_error("outputs must have the shape and strides of their inputs");
    for (auto [t, name] : {std::pair{&table, "table"}, std::pair{&saved_q, "saved_q"}, std::pair{&saved_k, "saved_k"}})
      if (*t) check_dtype(spec_, **t, name);

    runtime::ApplyRequest request;  // shapes and ids only: the tensors stay where they are
    request.q = {q_name, shape_of(q), {}};
    if (k) request.k = runtime::HostTensor{"k", shape_of(*k), {}};
    if (table) request.table = runtime::HostTensor{"table", shape_of(*table), {}};
    if (freqs) request.freqs = runtime::HostTensor{"freqs", shape_of(*freqs), {}};
    if (saved_q) request.saved_q = runtime::HostTensor{"saved_q", shape_of(*saved_q), {}};
    if (saved_k) request.saved_k = runtime::HostTensor{"saved_k", shape_of(*saved_k), {}};
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
    if (table && (table->stride(1) != 1 || table->stride(0) != static_cast<int64_t>(table->shape(1))))
      throw nb::value_error("table must be a dense [max_len, dim] tensor");

    std::shared_ptr<runtime::Kernel> kernel = value_or_raise(Runtime::process().get(spec_, variant, target_));
    const Halide::Type type = lowering::storage_type(spec_.dtype);
    const Layout layout = lowering::tensor_layout(spec_);
    runtime::RopeCall call;
    call.q = runtime::logical_tensor(q.data(), type, layout, shape_of(q), strides_of(q));
    call.out_q = runtime::logical_tensor(out_q.data(), type, layout, shape_of(q), strides_of(q));
    if (k) {
      call.k = runtime::logical_tensor(k->data(), type, layout, shape_of(*k), strides_of(*k));
      call.out_k = runtime::logical_tensor(out_k->data(), type, layout, shape_of(*k), strides_of(*k));
    }
    if (saved_q) call.saved_q = runtime::logical_tensor(saved_q->data(), type, layout, shape_of(*saved_q), strides_of(*saved_q));
    if (saved_k) call.saved_k = runtime::logical_tensor(saved_k->data(), type, layout, shape_of(*saved_k), strides_of(*saved_k));
    if (table) call.table = Halide::Buffer<>(type, table->data(), {static_cast<int>(table->shape(1)), static_cast<int>(table->shape(0))});
    if (freqs) call.freqs = float_vector(*freqs, "freqs");
    if (d_freqs) call.d_freqs = float_vector(*d_freqs, "d_freqs");
    if (request.positions) {
      void* data = nullptr;
      if (request.positions->is_int64) ids64 = request.positions->values, data = ids64.data();
      else ids32.assign(request.positions->values.begin(), request.positions->values.end()), data = ids32.data();
      const auto& qs = request.q.shape;
      const Layout heads = lowering::with_heads(layout);
      const int64_t batch = heads == Layout::THD ? 1 : heads == Layout::SBHD ? qs[1] : qs[0];
      call.positions = runtime::logical_positions(data, variant.position_type, layout, request.positions->shape, batch,
                                                  spec_.axes.count());
    }
    const bool packed = layout == Layout::THD || layout == Layout::TD;
    std::vector<int64_t> cu = request.cu_seqlens.value_or(std::vector<int64_t>{0, packed ? request.q.shape[0] : 0});
    cu32.assign(cu.begin(), cu.end());
    call.cu_seqlens = Halide::Buffer<int32_t>(cu32.data(), static_cast<int>(cu32.size()));
    call.offset = offset;
    call.seq_len = seq_len.value_or(runtime::default_seq_len(spec_, request));
    nb::gil_scoped_release release;  // the kernel runs on its own threads
    kernel->run(call);
  }

  std::string spec_yaml() const { return to_yaml(spec_); }
  std::string encoding() const { return to_string(spec_.encoding); }

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
           nb::arg("cu_seqlens").none(), nb::arg("backward"), nb::arg("table").none(), nb::arg("freqs").none(),
           nb::arg("saved_q").none(), nb::arg("saved_k").none(), nb::arg("d_freqs").none())
      .def_prop_ro("spec", &Kernel::spec_yaml)
      .def_prop_ro("encoding", &Kernel::encoding);
  m.def("compile", [](const std::string& text, const std::string& source, const std::string& target) {
    return Kernel(parse(text, source), target);
  });
  m.def("freqs", [](const std::string& text, const std::string& source, std::optional<int64_t> seq_len) {
    const RopeFrequencies f = compute_frequencies(parse(text, source), seq_len);
    return std::make_tuple(f.inv_freq, f.attention_factor);
  });
  m.def("normalise", [](const std::string& text, const std::string& source) { return to_yaml(parse(text, source)); });
}
