// The precision part of rope-gen explain: the errors ropegen/rope_explain.h
// defines (TrigErrors), measured per position bin.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ropegen/rope_explain.h"

namespace ropegen::lowering {

struct PrecisionInputs {
  const RopeSpec& spec;                 // rope or sinusoidal
  const std::vector<double>& inv_freq;  // per pair (sinusoidal: per frequency)
  double attention_factor = 1.0;
  int64_t max_pos = 0;
  KernelTable kernel_table;             // empty: no rope_gen values
  int64_t kernel_seq_len = 0;           // the seq_len giving the kernel these frequencies
  std::string no_kernel_note;           // why there is no kernel, if that is the spec's doing
};

// 0..max_pos when max_pos <= kExhaustivePositions; else, in every bin
// (0..1, 2..3, ..., 2^k..2^(k+1)-1), all of it up to 4096 positions or 4096
// spread evenly over it (both ends included), and the last 4096 positions.
std::vector<int64_t> precision_positions(int64_t max_pos);

// x rounded to nearest even with `bits` significant bits and exponents down
// to min_exponent (subnormal below): bf16 (8, -126), f16 (11, -14).
double round_to_format(double x, int bits, int min_exponent);

Result<Precision> measure_precision(const PrecisionInputs& in);

}  // namespace ropegen::lowering
