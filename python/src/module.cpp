// ropegen._ropegen: compile a spec (through ropegen::Runtime, so kernels are
// cached in memory and on disk) and run it on DLPack tensors (numpy, torch
// CPU) without copies; errors are ValueErrors (TypeErrors for what is not a
// tensor) with the library's messages.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "ropegen/rope_math.h"
#include "ropegen/runtime.h"
#include "ropegen/spec_io.h"
#include "runtime/call_parts.h"
#include "runtime/host_apply.h"
#include "runtime/tensor_view.h"
#include "tensor_args.h"

namespace nb = nanobind;
using namespace ropegen;

namespace ropegen::python {
void bind_from_hf(nb::module_& m);  // from_hf_binding.cpp
}

namespace {

using python::Input;
using python::Output;
using python::shape_of;
using python::strides_of;

template <typename T>
T value_or_raise(Result<T> r) {
  if (!r) throw nb::value_error(format(r.errors()).c_str());
  return std::move(r).value();
}

RopeSpec parse(const std::string& text, const std::string& source) { return value_or_raise(parse_spec(text, source)); }

// Ids are small: read through their strides into a dense copy.
std::vector<int64_t> ids_of(const Input& t, const char* name, bool* is_int64) {
  *is_int64 = t.dtype() == nb::dtype<int64_t>();
  if (!*is_int64 && t.dtype() != nb::dtype<int32_t>())
    throw nb::value_error((std::string(name) + " has dtype " + python::dtype_name(t.dtype()) + ": ids must be int32 or int64").c_str());
  std::vector<int64_t> out;
  const int64_t n = static_cast<int64_t>(t.size());
  std::vector<int64_t> shape = shape_of(t), strides = strides_of(t);
  for (int64_t i = 0; i < n; ++i) {
    int64_t offset = 0, rest = i;
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) offset += (rest % shape[d]) * strides[d], rest /= shape[d];
    out.push_back(*is_int64 ? static_cast<const int64_t*>(t.data())[offset] : static_cast<const int32_t*>(t.data())[offset]);
  }
  return out;
}

// A host buffer over a dense 1-D float32 tensor (run-time frequencies and their gradient).
template <typename T>
Halide::Buffer<float> float_vector(const T& t, const char* name) {
  if (t.dtype() != nb::dtype<float>() || t.ndim() != 1 || (t.shape(0) > 1 && t.stride(0) != 1))
    throw nb::value_error((std::string(name) + " must be a contiguous 1-D float32 tensor").c_str());
  return Halide::Buffer<float>(static_cast<float*>(const_cast<void*>(static_cast<const void*>(t.data()))),
                               static_cast<int>(t.shape(0)));
}

class Kernel {
 public:
  Kernel(RopeSpec spec, std::string target) : spec_(std::move(spec)), target_(std::move(target)) {}

  // Rope: q (, k) -> out_q (, out_k), forward or backward. Other encodings:
  // their tensor x as q -> out_q. Tensors arrive as Python objects so that
  // a wrong one is named (tensor_args.h).
  void call(nb::handle q_arg, nb::handle k_arg, nb::handle positions_arg, nb::handle offset_arg, nb::handle seq_len_arg,
            nb::handle out_q_arg, nb::handle out_k_arg, nb::handle cu_seqlens_arg, bool backward, nb::handle table_arg,
            nb::handle freqs_arg, nb::handle saved_q_arg, nb::handle saved_k_arg, nb::handle d_freqs_arg) {
    const bool rope = spec_.encoding == Encoding::Rope;
    const char* q_name = rope ? "q" : "x";
    const char* out_name = rope ? "out_q" : "out";
    const Input q = python::input(q_arg, q_name);
    const std::optional<Input> k = python::optional_input(k_arg, "k");
    const std::optional<Input> positions = python::optional_input(positions_arg, "positions");
    const std::optional<Input> cu_seqlens = python::optional_input(cu_seqlens_arg, "cu_seqlens");
    const std::optional<Input> table = python::optional_input(table_arg, "table");
    const std::optional<Input> freqs = python::optional_input(freqs_arg, "freqs");
    const std::optional<Input> saved_q = python::optional_input(saved_q_arg, "saved_q");
    const std::optional<Input> saved_k = python::optional_input(saved_k_arg, "saved_k");
    const Output out_q = python::output(out_q_arg, out_name);
    const std::optional<Output> out_k = python::optional_output(out_k_arg, "out_k");
    const std::optional<Output> d_freqs = python::optional_output(d_freqs_arg, "d_freqs");
    const int64_t offset = python::integer(offset_arg, "offset");
    const std::optional<int64_t> seq_len =
        seq_len_arg.is_none() ? std::nullopt : std::optional<int64_t>(python::integer(seq_len_arg, "seq_len"));

    python::check_dtype(spec_, q.dtype(), q_name);
    python::check_dtype(spec_, out_q.dtype(), out_name);
    if (k.has_value() != out_k.has_value()) throw nb::value_error("k and out_k go together");
    if (k) python::check_dtype(spec_, k->dtype(), "k"), python::check_dtype(spec_, out_k->dtype(), "out_k");
    if (shape_of(out_q) != shape_of(q) || (k && shape_of(*out_k) != shape_of(*k)))
      throw nb::value_error("outputs must have the shape of their inputs (out_q of q, out_k of k)");
    for (auto [t, name] : {std::pair{&table, "table"}, std::pair{&saved_q, "saved_q"}, std::pair{&saved_k, "saved_k"}})
      if (*t) python::check_dtype(spec_, (*t)->dtype(), name);

    runtime::ApplyRequest request;  // shapes and ids only: the tensors stay where they are
    request.q = {q_name, shape_of(q), {}};
    if (k) request.k = runtime::HostTensor{"k", shape_of(*k), {}};
    if (table) request.table = runtime::HostTensor{"table", shape_of(*table), {}};
    if (freqs) request.freqs = runtime::HostTensor{"freqs", shape_of(*freqs), {}};
    if (saved_q) request.saved_q = runtime::HostTensor{"saved_q", shape_of(*saved_q), {}};
    if (saved_k) request.saved_k = runtime::HostTensor{"saved_k", shape_of(*saved_k), {}};
    lowering::KernelVariant variant;
    variant.with_k = k.has_value();
    variant.backward = request.backward = backward;
    if (positions) {
      runtime::HostPositions p{"positions", shape_of(*positions), {}, false};
      p.values = ids_of(*positions, "positions", &p.is_int64);
      variant.position_type = p.is_int64 ? Halide::Int(64) : Halide::Int(32);
      request.positions = p;
    }
    if (cu_seqlens) {
      bool wide = false;
      request.cu_seqlens = ids_of(*cu_seqlens, "cu_seqlens", &wide);
    }
    request.offset = offset;
    request.seq_len = seq_len;
    if (std::vector<Diagnostic> errors = runtime::check_call(spec_, request); !errors.empty())
      throw nb::value_error(format(errors).c_str());
    if (table && table->size() > 0 && (table->stride(1) != 1 || table->stride(0) != static_cast<int64_t>(table->shape(1))))
      throw nb::value_error("table must be a dense [max_len, dim] tensor");

    const Halide::Type type = lowering::storage_type(spec_.dtype);
    const Layout layout = lowering::tensor_layout(spec_);
    auto view = [&](const auto& t) {
      return runtime::logical_tensor(const_cast<void*>(static_cast<const void*>(t.data())), type, layout, shape_of(t),
                                     strides_of(t));
    };
    runtime::RopeCall call;
    call.q = view(q);
    call.out_q = view(out_q);
    if (k) call.k = view(*k), call.out_k = view(*out_k);
    if (saved_q) call.saved_q = view(*saved_q);
    if (saved_k) call.saved_k = view(*saved_k);
    if (table)
      call.table = Halide::Buffer<>(type, const_cast<void*>(table->data()),
                                    {static_cast<int>(table->shape(1)), static_cast<int>(table->shape(0))});
    if (freqs) call.freqs = float_vector(*freqs, "freqs");
    if (d_freqs) call.d_freqs = float_vector(*d_freqs, "d_freqs");
    std::vector<int32_t> ids32;
    std::vector<int64_t> ids64;
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
    const std::vector<int64_t> cu = request.cu_seqlens.value_or(std::vector<int64_t>{0, packed ? request.q.shape[0] : 0});
    std::vector<int32_t> cu32(cu.begin(), cu.end());
    call.cu_seqlens = Halide::Buffer<int32_t>(cu32.data(), static_cast<int>(cu32.size()));
    call.offset = offset;
    call.seq_len = seq_len.value_or(runtime::default_seq_len(spec_, request));
    // Overlapping tensors, strides no kernel can take: before any compilation.
    if (std::vector<Diagnostic> errors = runtime::check_tensors(spec_, call); !errors.empty())
      throw nb::value_error(format(errors).c_str());

    std::shared_ptr<runtime::Kernel> kernel = value_or_raise(Runtime::process().get(spec_, variant, target_));
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
  python::bind_from_hf(m);
  nb::class_<Kernel>(m, "Kernel")
      .def("__call__", &Kernel::call, nb::arg("q").none(), nb::arg("k").none(), nb::arg("positions").none(),
           nb::arg("offset").none(), nb::arg("seq_len").none(), nb::arg("out_q").none(), nb::arg("out_k").none(),
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
