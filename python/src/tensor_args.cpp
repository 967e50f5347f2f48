#include "tensor_args.h"

namespace nb = nanobind;

namespace ropegen::python {
namespace {

std::string text(nb::handle h) { return nb::str(h).c_str(); }

// Why `h` is not a tensor we take, as the exception to raise.
[[noreturn]] void refuse(nb::handle h, const std::string& name) {
  if (h.is_none()) throw nb::type_error((name + " is None: pass a numpy array or a torch CPU tensor").c_str());
  if (nb::hasattr(h, "dtype") && nb::hasattr(h.attr("dtype"), "byteorder") && text(h.attr("dtype").attr("byteorder")) == ">")
    throw nb::value_error((name + " is big-endian (dtype " + text(h.attr("dtype")) + "): pass it in native byte order, e.g. " +
                           name + ".astype(" + name + ".dtype.newbyteorder('='))").c_str());
  if (nb::hasattr(h, "device") && nb::hasattr(h, "cpu"))  // a torch tensor elsewhere than the CPU
    throw nb::type_error((name + " is on " + text(h.attr("device")) + ": pass a CPU tensor (" + name + ".cpu())").c_str());
  throw nb::type_error((name + " must be a numpy array or a torch CPU tensor, not " +
                        text(nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(h.ptr()))).attr("__name__")))
                           .c_str());
}

}  // namespace

Input input(nb::handle h, const std::string& name) {
  Input t;
  if (!nb::try_cast(h, t, /*convert=*/false)) refuse(h, name);
  return t;
}

Output output(nb::handle h, const std::string& name) {
  Output t;
  if (nb::try_cast(h, t, /*convert=*/false)) return t;
  if (Input read_only; nb::try_cast(h, read_only, false))
    throw nb::value_error((name + " is read-only: an output must be writable (leave it out for a new array, or pass a "
                                  "writable copy)").c_str());
  refuse(h, name);
}

std::optional<Input> optional_input(nb::handle h, const std::string& name) {
  if (h.is_none()) return std::nullopt;
  return input(h, name);
}

std::optional<Output> optional_output(nb::handle h, const std::string& name) {
  if (h.is_none()) return std::nullopt;
  return output(h, name);
}

int64_t integer(nb::handle h, const std::string& name) {
  // Anything with __index__ (numpy integers too), never a float or a bool.
  if (PyBool_Check(h.ptr()) || !PyIndex_Check(h.ptr()))
    throw nb::type_error((name + " must be an integer, not " + text(h.type().attr("__name__"))).c_str());
  const nb::object index = nb::steal(PyNumber_Index(h.ptr()));
  int overflow = 0;
  const long long v = index ? PyLong_AsLongLongAndOverflow(index.ptr(), &overflow) : -1;
  if (!index || overflow || (v == -1 && PyErr_Occurred())) {
    PyErr_Clear();
    throw nb::value_error((name + " (" + text(h) + ") is not a 64-bit integer").c_str());
  }
  return v;
}

std::string dtype_name(nb::dlpack::dtype d) {
  std::string base;
  switch (static_cast<nb::dlpack::dtype_code>(d.code)) {
    case nb::dlpack::dtype_code::Int: base = "int"; break;
    case nb::dlpack::dtype_code::UInt: base = "uint"; break;
    case nb::dlpack::dtype_code::Float: base = "float"; break;
    case nb::dlpack::dtype_code::Bfloat: base = "bfloat"; break;
    case nb::dlpack::dtype_code::Complex: base = "complex"; break;
    case nb::dlpack::dtype_code::Bool: return "bool";
    default: base = "dtype code " + std::to_string(d.code) + " of ";
  }
  return base + std::to_string(d.bits) + (d.lanes > 1 ? "x" + std::to_string(d.lanes) : "");
}

void check_dtype(const RopeSpec& spec, const nb::dlpack::dtype& have, const std::string& name) {
  const nb::dlpack::dtype want = spec.dtype == DType::F32   ? nb::dtype<float>()
                                 : spec.dtype == DType::F16 ? nb::dlpack::dtype{uint8_t(nb::dlpack::dtype_code::Float), 16, 1}
                                                            : nb::dlpack::dtype{uint8_t(nb::dlpack::dtype_code::Bfloat), 16, 1};
  if (have != want)
    throw nb::value_error((name + " has dtype " + dtype_name(have) + " but the spec's dtype is " + to_string(spec.dtype) +
                           ": pass " + dtype_name(want) + " (rope-gen does not convert)").c_str());
}

}  // namespace ropegen::python
