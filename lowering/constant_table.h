// Constants the kernels read from memory rather than as immediates, for
// two defects of Halide 21's Vulkan backend (measured on lavapipe):
//  - float64 immediates are emitted as float32 (x * 1.5707963267948966
//    computes x * 1.5707963705062866), which breaks the float64 angle
//    reduction; a value loaded from a table is exact on every backend;
//  - device buffers whose size is not a multiple of the device's alignment
//    (64 bytes on lavapipe and RADV) are copied short or fail to allocate
//    (fixed upstream after 21: halide/Halide#9223), so tables are padded to
//    256 bytes.
// On CPU and CUDA the tables cost one load per tile, hoisted out of loops.
#pragma once

#include <string>
#include <vector>

#include <Halide.h>

namespace ropegen::lowering {

// Tables are padded to a multiple of this many entries (256 bytes).
inline constexpr int kTableRowEntries = 256 / sizeof(double);

// values, zero-padded to a multiple of kTableRowEntries.
Halide::Buffer<double> constant_table(const std::vector<double>& values, const std::string& name);

// float32 values, zero-padded to 256 bytes likewise (tables of float32
// results, read without a conversion).
Halide::Buffer<float> constant_table_f32(const std::vector<float>& values, const std::string& name);

// One float64 constant, exact on every backend.
Halide::Expr f64_constant(double value, const std::string& name);

}  // namespace ropegen::lowering
