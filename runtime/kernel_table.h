// A spec's table as its own kernel computes it: the values of rope_table
// (rope: [cos | sin] x attention factor per pair; sinusoidal: the PE rows in
// the spec's table_form), read off the kernel's float32 outputs for unit
// inputs. `rope-gen table --kernel-bits` writes them; `rope-gen explain`
// measures their error.
#pragma once

#include <cstdint>
#include <vector>

#include "ropegen/result.h"
#include "ropegen/runtime.h"
#include "ropegen/spec.h"

namespace ropegen::runtime {

// [rows, columns] as rope_table(spec, positions, seq_len) lays them out;
// positions as rope_table takes them (multi-axis: n_axes ids per row). The
// kernel is `runtime`'s for the host, in float32 with explicit positions.
// Rope: rotating (1, 0) gives exactly (c, s) in the kernel's arithmetic
// (1 * c - 0 * s = c), so a `scheme: table` kernel reading these rows
// reproduces the computing kernel bit for bit; sinusoidal: 0 + PE = PE.
// Specs with no such table (rope_table's list) and other encodings: errors.
Result<std::vector<float>> kernel_table(Runtime& runtime, const RopeSpec& spec, const std::vector<int64_t>& positions,
                                        int64_t seq_len);

}  // namespace ropegen::runtime
