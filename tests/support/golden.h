// The committed peer golden vectors (tests/golden/data/*.json, written by
// tests/golden/make_golden.py from torch/transformers/rotary-embedding-torch).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "support/reference.h"

namespace ropegen::test {

struct GoldenTensor {
  std::vector<int64_t> shape;
  std::vector<double> data;
};

struct GoldenCase {
  std::string name;   // file stem
  std::string peer;   // what produced it
  std::string spec;   // rope-gen spec text meaning the same
  std::optional<int64_t> seq_len;
  int64_t offset = 0;
  std::vector<double> inv_freq;
  double attention_factor = 1.0;
  std::optional<GoldenTensor> positions, q, k, out_q, out_k;
  std::vector<int64_t> cu_seqlens;

  bool has_tensors() const { return q.has_value(); }
  int64_t max_position() const;
  ref::Call call() const;  // positions / offset / seq_len as the reference takes them
};

std::string golden_dir();
std::vector<GoldenCase> load_golden_cases();

}  // namespace ropegen::test
