// A tensor the caller owns, as rope-gen's calls take it: data pointer,
// element type, shape and strides in elements, device. It holds its dims
// by value (no allocation) and converts from DLPack's DLTensor (or
// ropegen_tensor, the same struct) without copying data.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>

#include "ropegen/result.h"
#include "ropegen/ropegen_c.h"

namespace ropegen {

// DLDeviceType's codes.
enum class DeviceType : int32_t { CPU = ROPEGEN_DEVICE_CPU, CUDA = ROPEGEN_DEVICE_CUDA, Vulkan = ROPEGEN_DEVICE_VULKAN };

struct Device {
  DeviceType type = DeviceType::CPU;
  int32_t id = 0;
  bool operator==(const Device& o) const { return type == o.type && id == o.id; }
  bool operator!=(const Device& o) const { return !(*this == o); }
};

// The element types calls use: the spec's dtype for tensors, int32/int64
// for ids, float32 for run-time frequencies, uint8 for fp8 KV caches (the
// codes: kv_cache dtype fp8_e4m3 or fp8_e5m2).
enum class ElementType : uint8_t { Float32, Float16, BFloat16, Int32, Int64, UInt8 };

const char* to_string(ElementType type);  // "float32", "bfloat16", ...
const char* to_string(DeviceType type);   // "cpu", "cuda", "vulkan"
int element_bytes(ElementType type);

// Ranks rope-gen's arguments have: at most 4 ([B, S, H, D], scores) plus
// multi-axis ids' trailing axis dim; more is refused.
inline constexpr int kMaxRank = 6;

struct Tensor {
  void* data = nullptr;  // the first element (a DLTensor's data + byte_offset)
  ElementType type = ElementType::Float32;
  int rank = 0;
  std::array<int64_t, kMaxRank> shape{}, strides{};  // strides in elements
  Device device{};

  // Dense row-major.
  static Tensor dense(void* data, ElementType type, std::initializer_list<int64_t> shape, Device device = {});
  static Tensor dense(void* data, ElementType type, const int64_t* shape, int rank, Device device = {});
  static Tensor strided(void* data, ElementType type, std::initializer_list<int64_t> shape,
                        std::initializer_list<int64_t> strides, Device device = {});
  // A DLTensor (same layout as ropegen_tensor). A diagnostic names `name`
  // for what rope-gen cannot take: rank > kMaxRank, lanes != 1, another
  // dtype, a device other than cpu/cuda/vulkan.
  static Result<Tensor> from_dlpack(const ropegen_tensor& t, const char* name);

  int64_t elements() const;  // product of the shape (0 for an empty tensor)
};

}  // namespace ropegen
