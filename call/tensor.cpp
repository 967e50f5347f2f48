// The public Tensor and Call (ropegen/tensor.h, ropegen/call.h) and their
// conversion from the C structs, which are DLPack's.
#include "ropegen/tensor.h"

#include <fmt/format.h>

#include "abi/arguments.h"
#include "ropegen/call.h"

namespace ropegen {
namespace {

std::optional<ElementType> element_type(ropegen_dtype t) {
  if (t.lanes != 1) return std::nullopt;
  if (t.code == ROPEGEN_DTYPE_FLOAT && t.bits == 32) return ElementType::Float32;
  if (t.code == ROPEGEN_DTYPE_FLOAT && t.bits == 16) return ElementType::Float16;
  if (t.code == ROPEGEN_DTYPE_BFLOAT && t.bits == 16) return ElementType::BFloat16;
  if (t.code == ROPEGEN_DTYPE_INT && t.bits == 32) return ElementType::Int32;
  if (t.code == ROPEGEN_DTYPE_INT && t.bits == 64) return ElementType::Int64;
  if (t.code == ROPEGEN_DTYPE_UINT && t.bits == 8) return ElementType::UInt8;
  return std::nullopt;
}

void set_dense_strides(Tensor& t) {
  int64_t stride = 1;
  for (int i = t.rank - 1; i >= 0; --i) {
    t.strides[i] = stride;
    // An overflowing product only happens for shapes prepare_call refuses.
    if (__builtin_mul_overflow(stride, t.shape[i] > 0 ? t.shape[i] : 1, &stride)) stride = INT64_MAX;
  }
}

}  // namespace

const char* to_string(ElementType type) {
  switch (type) {
    case ElementType::Float32: return "float32";
    case ElementType::Float16: return "float16";
    case ElementType::BFloat16: return "bfloat16";
    case ElementType::Int32: return "int32";
    case ElementType::Int64: return "int64";
    case ElementType::UInt8: return "uint8";
  }
  return "?";
}

const char* to_string(DeviceType type) {
  switch (type) {
    case DeviceType::CPU: return "cpu";
    case DeviceType::CUDA: return "cuda";
    case DeviceType::Vulkan: return "vulkan";
  }
  return "?";
}

int element_bytes(ElementType type) {
  switch (type) {
    case ElementType::Float16: case ElementType::BFloat16: return 2;
    case ElementType::Int64: return 8;
    case ElementType::UInt8: return 1;
    default: return 4;
  }
}

Tensor Tensor::dense(void* data, ElementType type, const int64_t* shape, int rank, Device device) {
  Tensor t;
  t.data = data, t.type = type, t.device = device;
  t.rank = rank < 0 ? 0 : rank > kMaxRank ? kMaxRank : rank;
  for (int i = 0; i < t.rank; ++i) t.shape[i] = shape[i];
  set_dense_strides(t);
  return t;
}

Tensor Tensor::dense(void* data, ElementType type, std::initializer_list<int64_t> shape, Device device) {
  return dense(data, type, shape.begin(), static_cast<int>(shape.size()), device);
}

Tensor Tensor::strided(void* data, ElementType type, std::initializer_list<int64_t> shape,
                       std::initializer_list<int64_t> strides, Device device) {
  Tensor t = dense(data, type, shape, device);
  int i = 0;
  for (int64_t s : strides)
    if (i < t.rank) t.strides[i++] = s;
  return t;
}

int64_t Tensor::elements() const {
  int64_t n = 1;
  for (int i = 0; i < rank; ++i)
    if (__builtin_mul_overflow(n, shape[i], &n)) return INT64_MAX;
  return n;
}

Result<Tensor> Tensor::from_dlpack(const ropegen_tensor& t, const char* name) {
  const std::optional<ElementType> type = element_type(t.dtype);
  if (!type)
    return named_error(name, fmt::format("{} has a dtype rope-gen does not take (DLPack code {}, {} bits, {} lanes)",
                                         name, t.dtype.code, t.dtype.bits, t.dtype.lanes));
  if (t.ndim < 0 || t.ndim > kMaxRank || (t.ndim > 0 && !t.shape))
    return named_error(name,
                       fmt::format("{} has {} dims: rope-gen's arguments have at most {}", name, t.ndim, kMaxRank));
  const int32_t dev = t.device.device_type;
  if (dev != ROPEGEN_DEVICE_CPU && dev != ROPEGEN_DEVICE_CUDA && dev != ROPEGEN_DEVICE_VULKAN)
    return named_error(
        name,
        fmt::format("{} is on DLPack device type {}: rope-gen runs on cpu (1), cuda (2) and vulkan (7)", name, dev));
  uintptr_t data = reinterpret_cast<uintptr_t>(t.data);
  if (__builtin_add_overflow(data, t.byte_offset, &data))
    return named_error(name, fmt::format("{}'s byte_offset {} overflows its address", name, t.byte_offset));
  Tensor out = dense(reinterpret_cast<void*>(data), *type, t.shape, t.ndim,
                     Device{static_cast<DeviceType>(dev), t.device.device_id});
  if (t.strides)
    for (int i = 0; i < t.ndim; ++i) out.strides[i] = t.strides[i];
  return out;
}

Result<Call> Call::from_c(const ropegen_call& c) {
  Call call;
  std::vector<Diagnostic> errors;
  for (const abi::ArgumentInfo& a : abi::kArguments) {
    if (!a.c_tensor || !(c.*a.c_tensor)) continue;
    Result<Tensor> r = Tensor::from_dlpack(*(c.*a.c_tensor), a.name);
    if (r)
      call.*a.call_tensor = *r;
    else errors.insert(errors.end(), r.errors().begin(), r.errors().end());
  }
  if (!errors.empty()) return errors;
  call.offset = c.offset;
  if (c.seq_len > 0) call.seq_len = c.seq_len;
  // 0: not given (fp8 caches then divide by 1).
  if (c.k_scale != 0) call.k_scale = c.k_scale;
  if (c.v_scale != 0) call.v_scale = c.v_scale;
  if (c.q_scale != 0) call.q_scale = c.q_scale;
  call.backward = c.backward != 0;
  call.stream = c.stream;
  return call;
}

}  // namespace ropegen

extern "C" const char* ropegen_status_string(int status) {
  switch (status) {
    case ROPEGEN_OK: return "ok";
    case ROPEGEN_ERROR_INVALID_ARGUMENT: return "invalid argument";
    case ROPEGEN_ERROR_UNSUPPORTED: return "unsupported";
    case ROPEGEN_ERROR_KERNEL: return "kernel failed";
    case ROPEGEN_ERROR_OUT_OF_MEMORY: return "out of memory";
    default: return "unknown status";
  }
}
