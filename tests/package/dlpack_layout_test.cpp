// ropegen_c.h's tensor structs are DLPack's, field for field, and its device
// and dtype codes are DLPack's codes: a DLTensor* is passed as a
// ropegen_tensor* without a copy. Checked against Debian's dlpack.h
// (libdlpack-dev); the static_asserts fail the build, the test names them.
#include <dlpack/dlpack.h>
#include <gtest/gtest.h>

#include <cstddef>

#include "ropegen/ropegen_c.h"

#define ROPEGEN_SAME_FIELD(ours, theirs, ours_field, theirs_field)                            \
  static_assert(offsetof(ours, ours_field) == offsetof(theirs, theirs_field),                 \
                #ours "." #ours_field " is not at " #theirs "." #theirs_field "'s offset"); \
  static_assert(sizeof(ours::ours_field) == sizeof(theirs::theirs_field),                     \
                #ours "." #ours_field " is not the size of " #theirs "." #theirs_field)

static_assert(sizeof(ropegen_device) == sizeof(DLDevice) && alignof(ropegen_device) == alignof(DLDevice));
ROPEGEN_SAME_FIELD(ropegen_device, DLDevice, device_type, device_type);
ROPEGEN_SAME_FIELD(ropegen_device, DLDevice, device_id, device_id);

static_assert(sizeof(ropegen_dtype) == sizeof(DLDataType) && alignof(ropegen_dtype) == alignof(DLDataType));
ROPEGEN_SAME_FIELD(ropegen_dtype, DLDataType, code, code);
ROPEGEN_SAME_FIELD(ropegen_dtype, DLDataType, bits, bits);
ROPEGEN_SAME_FIELD(ropegen_dtype, DLDataType, lanes, lanes);

static_assert(sizeof(ropegen_tensor) == sizeof(DLTensor) && alignof(ropegen_tensor) == alignof(DLTensor));
ROPEGEN_SAME_FIELD(ropegen_tensor, DLTensor, data, data);
ROPEGEN_SAME_FIELD(ropegen_tensor, DLTensor, device, device);
ROPEGEN_SAME_FIELD(ropegen_tensor, DLTensor, ndim, ndim);
ROPEGEN_SAME_FIELD(ropegen_tensor, DLTensor, dtype, dtype);
ROPEGEN_SAME_FIELD(ropegen_tensor, DLTensor, shape, shape);
ROPEGEN_SAME_FIELD(ropegen_tensor, DLTensor, strides, strides);
ROPEGEN_SAME_FIELD(ropegen_tensor, DLTensor, byte_offset, byte_offset);

static_assert(int{ROPEGEN_DEVICE_CPU} == int{kDLCPU} && int{ROPEGEN_DEVICE_CUDA} == int{kDLCUDA} &&
              int{ROPEGEN_DEVICE_VULKAN} == int{kDLVulkan}, "device codes are not DLDeviceType's");
static_assert(int{ROPEGEN_DTYPE_INT} == int{kDLInt} && int{ROPEGEN_DTYPE_UINT} == int{kDLUInt} &&
              int{ROPEGEN_DTYPE_FLOAT} == int{kDLFloat} && int{ROPEGEN_DTYPE_BFLOAT} == int{kDLBfloat},
              "dtype codes are not DLDataTypeCode's");

TEST(Package, DlpackLayout) {
  // A DLTensor read through the ropegen_tensor view sees its own values.
  int64_t shape[2] = {3, 4}, strides[2] = {4, 1};
  float data[12] = {};
  DLTensor dl{data, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, strides, 8};
  const auto* t = reinterpret_cast<const ropegen_tensor*>(&dl);
  EXPECT_EQ(t->data, static_cast<void*>(data));
  EXPECT_EQ(t->device.device_type, ROPEGEN_DEVICE_CPU);
  EXPECT_EQ(t->ndim, 2);
  EXPECT_EQ(t->dtype.code, ROPEGEN_DTYPE_FLOAT);
  EXPECT_EQ(t->dtype.bits, 32);
  EXPECT_EQ(t->dtype.lanes, 1);
  EXPECT_EQ(t->shape[1], 4);
  EXPECT_EQ(t->strides[0], 4);
  EXPECT_EQ(t->byte_offset, 8u);
}
