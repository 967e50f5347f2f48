// The memory of a call's arguments: byte ranges in 64 bits without
// overflow, overlaps between outputs and everything else, and the spans a
// kernel argument addresses (prepare_call checks, parts cuts by them).
#pragma once

#include <cstdint>
#include <vector>

#include "call/fixed_vector.h"
#include "call/prepare_call.h"
#include "ropegen/diagnostics.h"

namespace ropegen::call {

// The most elements one kernel argument may address (Halide's 32-bit buffers).
inline constexpr int64_t kMaxKernelSpan = INT32_MAX;

struct Argument {
  const char* name = "";
  const View* view = nullptr;
  bool output = false;
  bool tensor = false;             // a (d, h, s, b) tensor (cut into parts); else a small buffer
  const View* own_input = nullptr; // an output may be exactly this input (in place)
};

// Strides that overflow the address space, rows that are not contiguous,
// one token too spread out for a kernel argument, outputs overlapping
// anything but exactly their own input (or a side-by-side view), outputs
// overlapping themselves.
// A call's arguments (19 views today, with room to grow), held inline.
using Arguments = FixedVector<Argument, 24>;
std::vector<Diagnostic> check_memory(const Arguments& arguments);

// Elements a (d, h, s, b) tensor's kernel argument addresses for a part of
// ns tokens of nb batches (INT64_MAX when that overflows).
int64_t part_span(const View& t, int64_t ns, int64_t nb);

}  // namespace ropegen::call
