// ropegen._ropegen: compile a spec (through ropegen::Runtime, so kernels are
// cached in memory and on disk) and run it on DLPack tensors (numpy, torch
// CPU) without copies; errors are ValueErrors (TypeErrors for what is not a
// tensor) with the library's messages.
#include <fmt/format.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <array>
#include <memory>
#include <mutex>

#include "abi/arguments.h"
#include "dsl/spec_file.h"
#include "ropegen/rope_math.h"
#include "ropegen/runtime.h"
#include "ropegen/spec_io.h"
#include "tensor_args.h"

namespace nb = nanobind;
using namespace ropegen;

namespace ropegen::python {
void bind_from_hf(nb::module_& m);  // from_hf_binding.cpp
void bind_explain(nb::module_& m);  // explain_binding.cpp
}

namespace {

using python::Input;
using ropegen::Call;
using ropegen::Status;
using ropegen::Tensor;
using python::Output;
using python::shape_of;
using python::strides_of;

template <typename T>
T value_or_raise(Result<T> r) {
  if (!r) throw nb::value_error(format(r.errors()).c_str());
  return std::move(r).value();
}

RopeSpec parse(const std::string& text, const std::string& source) { return value_or_raise(parse_spec(text, source)); }

// A DLPack tensor as the library's Tensor (its one conversion, Tensor::from_dlpack).
template <typename T>
Tensor tensor_of(const T& t, const char* name) {
  std::vector<int64_t> shape = shape_of(t), strides = strides_of(t);
  ropegen_tensor dl{};
  dl.data = const_cast<void*>(static_cast<const void*>(t.data()));
  dl.device = {t.device_type(), t.device_id()};
  dl.ndim = static_cast<int32_t>(t.ndim());
  dl.dtype = {t.dtype().code, t.dtype().bits, t.dtype().lanes};
  dl.shape = shape.data();
  dl.strides = strides.data();
  return value_or_raise(Tensor::from_dlpack(dl, name));
}

class SpecKernel {
 public:
  SpecKernel(RopeSpec spec, std::string target) : spec_(std::move(spec)), target_(std::move(target)) {}

  // One call: `tensors` maps argument names (abi/arguments.h: q, k,
  // positions, ..., out_q, k_cache, ...) to tensors; inputs may be
  // read-only, outputs and the caches (updated in place) not. Tensors
  // arrive as Python objects so that a wrong one is named (tensor_args.h);
  // the call is checked by the library's prepare_call, like every other.
  void call(nb::dict tensors, nb::handle offset_arg, nb::handle seq_len_arg, bool backward,
            std::optional<float> k_scale, std::optional<float> v_scale, std::optional<float> q_scale,
            uintptr_t stream) {
    const bool single = spec_.encoding != Encoding::Rope;
    for (auto [key, value] : tensors) {
      const std::string name = nb::cast<std::string>(nb::str(key));
      const std::optional<abi::Arg> arg = abi::argument_named(name);
      if (!arg || !abi::is_tensor(*arg))
        throw nb::type_error(fmt::format("{} is not a tensor argument of a call", name).c_str());
    }
    Call call;
    // The ndarrays stay alive until the call returns: a DLPack capsule of a
    // temporary (torch.utils.dlpack.to_dlpack(ids.int())) owns its memory
    // only through them.
    std::vector<Input> held_inputs;
    std::vector<Output> held_outputs;
    for (const abi::ArgumentInfo& a : abi::kArguments) {
      if (!a.call_tensor) continue;
      const std::string name = abi::user_name(a.arg, single);
      const nb::handle h = tensors.contains(a.name) ? nb::handle(tensors[a.name]) : nb::handle(Py_None);
      // q and out_q (x and out) are required: the message names what is missing.
      const bool required = a.arg == abi::Arg::Q || a.arg == abi::Arg::OutQ;
      std::optional<Tensor>& into = call.*a.call_tensor;
      if (a.direction == abi::Direction::In) {
        std::optional<Input> t =
            required ? std::optional<Input>(python::input(h, name)) : python::optional_input(h, name);
        if (!t) continue;
        if (a.dtype == abi::DtypeRule::Spec) python::check_dtype(spec_, t->dtype(), name);
        into = tensor_of(*t, name.c_str());
        held_inputs.push_back(std::move(*t));
      } else {
        std::optional<Output> t =
            required ? std::optional<Output>(python::output(h, name)) : python::optional_output(h, name);
        if (!t) continue;
        const bool codes = a.dtype == abi::DtypeRule::Output && spec_.has_fp8_output();  // uint8: prepare_call checks
        if (a.dtype == abi::DtypeRule::Spec || (a.dtype == abi::DtypeRule::Output && !codes))
          python::check_dtype(spec_, t->dtype(), name);
        into = tensor_of(*t, name.c_str());
        held_outputs.push_back(std::move(*t));
      }
    }
    // fp8 caches and outputs (uint8 codes); None: not given.
    call.q_scale = q_scale, call.k_scale = k_scale, call.v_scale = v_scale;
    call.offset = python::integer(offset_arg, "offset");
    if (!seq_len_arg.is_none()) call.seq_len = python::integer(seq_len_arg, "seq_len");
    call.backward = backward;
    call.stream = reinterpret_cast<void*>(stream);  // CUDA tensors: the caller's CUstream (0: the legacy stream)
    if (call.k && !call.out_k && !spec_.kv_cache.enabled) throw nb::value_error("k and out_k go together");

    Status ran;
    {
      nb::gil_scoped_release release;  // compiling and running touch no Python object
      Result<std::shared_ptr<Kernel>> kernel = kernel_for(kernel_variant(spec_, call));
      ran = kernel ? kernel.value()->run(call) : Status(kernel.errors());
    }
    if (!ran) throw nb::value_error(format(ran.errors()).c_str());
  }

  std::string spec_yaml() const { return to_yaml(spec_); }
  std::string encoding() const { return to_string(spec_.encoding); }
  std::string hash() const { return spec_hash(spec_); }
  std::string layout() const { return to_string(spec_.layout); }
  // output_dtype fp8 ("fp8_e4m3", "fp8_e5m2": out_q and out_k are uint8
  // codes); None: the spec's dtype.
  std::optional<std::string> output_fp8() const {
    if (!spec_.has_fp8_output()) return std::nullopt;
    return to_string(spec_.output_dtype);
  }
  // output_quant's group (dims per scale of out_scales); None without one.
  std::optional<int> output_quant_group() const {
    if (!spec_.output_quant.enabled) return std::nullopt;
    return spec_.output_quant.group;
  }
  // The kv_cache section's dtype ("bf16", "fp8_e4m3", ...); None without one.
  std::optional<std::string> kv_cache_dtype() const {
    if (!spec_.kv_cache.enabled) return std::nullopt;
    return to_string(spec_.kv_cache.dtype);
  }

 private:
  // The Runtime's kernel for a variant, kept here so that a call costs no
  // cache lookup (which hashes the normalised spec): decode-sized calls from
  // PyTorch run in microseconds.
  Result<std::shared_ptr<Kernel>> kernel_for(const KernelVariant& v) {
    const size_t slot = size_t{v.with_k} | size_t{v.backward} << 1 | size_t{v.position_type == IdType::Int64} << 2 |
                        size_t{v.with_v} << 3 | size_t{v.float32_norm_weights} << 4;
    std::lock_guard<std::mutex> lock(mutex_);
    if (!kernels_[slot]) {
      Result<std::shared_ptr<Kernel>> got = Runtime::process().get(spec_, v, target_);
      if (!got) return got.errors();
      kernels_[slot] = got.value();
    }
    return kernels_[slot];
  }

  RopeSpec spec_;
  std::string target_;
  std::mutex mutex_;
  std::array<std::shared_ptr<Kernel>, 32> kernels_;
};

// The caller's dtype and layout for what a spec leaves out ("bf16", "bhsd").
template <typename E>
std::optional<E> spelled(const std::optional<std::string>& name, std::optional<E> (*named)(const std::string&),
                         const char* what) {
  if (!name) return std::nullopt;
  if (std::optional<E> e = named(*name)) return e;
  throw nb::value_error(fmt::format("{} '{}' is not one rope-gen knows", what, *name).c_str());
}

}  // namespace

NB_MODULE(_ropegen, m) {
  m.doc() = "rope-gen kernels; use the `ropegen` package rather than this module";
  python::bind_from_hf(m);
  python::bind_explain(m);
  nb::class_<SpecKernel>(m, "Kernel")
      .def("__call__", &SpecKernel::call, nb::arg("tensors"), nb::arg("offset").none(), nb::arg("seq_len").none(),
           nb::arg("backward"), nb::arg("k_scale").none() = nb::none(), nb::arg("v_scale").none() = nb::none(),
           nb::arg("q_scale").none() = nb::none(), nb::arg("stream") = 0)
      .def_prop_ro("spec", &SpecKernel::spec_yaml)
      .def_prop_ro("encoding", &SpecKernel::encoding)
      .def_prop_ro("spec_hash", &SpecKernel::hash)
      .def_prop_ro("layout", &SpecKernel::layout)
      .def_prop_ro("kv_cache_dtype", &SpecKernel::kv_cache_dtype)
      .def_prop_ro("output_fp8", &SpecKernel::output_fp8)
      .def_prop_ro("output_quant_group", &SpecKernel::output_quant_group);
  m.def(
      "compile",
      [](const std::string& text, const std::string& source, const std::string& target,
         std::optional<std::string> dtype, std::optional<std::string> layout, std::optional<bool> explicit_positions) {
        SpecDefaults defaults{spelled(dtype, dtype_named, "dtype"), spelled(layout, layout_named, "layout"), {}};
        if (explicit_positions) defaults.positions = *explicit_positions ? PositionsMode::Explicit : PositionsMode::Implicit;
        return std::make_unique<SpecKernel>(value_or_raise(parse_spec(text, source, defaults)), target);
      },
      nb::arg("text"), nb::arg("source"), nb::arg("target"), nb::arg("dtype").none() = nb::none(),
      nb::arg("layout").none() = nb::none(), nb::arg("explicit_positions").none() = nb::none());
  m.def("freqs", [](const std::string& text, const std::string& source, std::optional<int64_t> seq_len) {
    const RopeFrequencies f = compute_frequencies(parse(text, source), seq_len);
    return std::make_tuple(f.inv_freq, f.attention_factor);
  });
  // The argument table (abi/arguments.h), for the Python layers' loops:
  // (name, direction "in" | "out" | "inout", dtype rule, kind).
  m.def("call_arguments", [] {
    std::vector<std::tuple<std::string, std::string, std::string, std::string>> rows;
    for (const abi::ArgumentInfo& a : abi::kArguments) {
      const char* direction = a.direction == abi::Direction::In    ? "in"
                              : a.direction == abi::Direction::Out ? "out"
                                                                   : "inout";
      rows.emplace_back(a.name, direction, abi::to_string(a.dtype), abi::to_string(a.kind));
    }
    return rows;
  });
  // A spec file's text, read as the CLI reads it: regular files only, never
  // more than the spec limit (a FIFO, a directory, /dev/zero are refused by name).
  m.def("read_spec_file", [](const std::string& path) { return value_or_raise(dsl::read_spec_file(path)); });
  m.def("normalise", [](const std::string& text, const std::string& source) { return to_yaml(parse(text, source)); });
}
