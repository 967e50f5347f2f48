// The CUDA driver API, loaded at run time (base/cuda_driver_api.h: dlopen of
// libcuda.so.1): the kit runs on a machine with a driver and no toolkit, and
// starts (to say so) on one with neither. Every call's result is checked
// (CudaError names the call and the driver's message).
#pragma once

#include <stdexcept>
#include <string>

#include "base/cuda_driver_api.h"

namespace kit {

using CUresult = ropegen_CUresult;
using CUdevice = ropegen_CUdevice;
using CUdeviceptr = ropegen_CUdeviceptr;
using CUcontext = ropegen_CUcontext;
using CUstream = ropegen_CUstream;
using CUevent = ropegen_CUevent;
using CUgraph = ropegen_CUgraph;
using CUgraphExec = ropegen_CUgraphExec;

class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The table's entry points (d.cuMemAlloc_v2, ...) and device 0.
struct CudaDriver : ropegen_cuda_driver {
  CUdevice device = 0;
  std::string description;  // "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, driver 13.0)"

  // The driver and device 0 with its primary context current (PyTorch's),
  // or why not (no driver library, no device: the kit's no-device mode).
  static const CudaDriver* load(std::string& why_not);

  void check(CUresult r, const char* what) const;
};

}  // namespace kit
