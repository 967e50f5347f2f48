// The committed peer golden vectors (tests/golden/data/*.json and
// data/encodings/*.json, written by tests/golden/make_golden.py from
// torch/transformers/rotary-embedding-torch and the user's seed documents).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "support/reference.h"

namespace ropegen::test {

struct GoldenTensor {
  std::vector<int64_t> shape;
  std::vector<double> data;
  bool integer = false;  // int64 ids (positions, cu_seqlens); else a float32 tensor
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

// One case of data/encodings (SEMANTICS.md section 6): a CLI call's inputs and
// outputs by name -- x, q, k, positions, cu_seqlens, table, freqs, saved_q,
// saved_k; out, out_q, out_k, out_freqs (the flag is the name with '-' for '_').
struct EncodingCase {
  std::string name;     // file stem
  std::string peer;     // what produced it
  std::string spec;     // rope-gen spec text meaning the same
  std::string command;  // apply | backward | table
  std::map<std::string, GoldenTensor> inputs, outputs;
  std::map<std::string, int64_t> options;  // offset, max_pos, seq_len

  const GoldenTensor* input(const std::string& name) const;  // nullptr when absent
  // positions (max_pos: 0..max_pos-1), offset, cu_seqlens, seq_len, freqs, table as the reference takes them
  ref::Call call() const;
};

std::vector<EncodingCase> load_encoding_cases();

}  // namespace ropegen::test
