// The kit's cases as gpu_kit/make_cases.cpp wrote them: cases/index.json
// (one object per call) and cases/data/NNNN.bin (its inputs in storage
// types, then the float64 reference's outputs).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ropegen_c.h"

namespace kit {

struct TensorData {
  ropegen_dtype dtype{};
  std::string fp8;  // uint8 outputs of fp8 codes: "fp8_e4m3" or "fp8_e5m2"
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;  // dense row-major; empty for outputs

  int64_t elements() const;
  size_t size_in_bytes() const;
};

struct Truth {
  std::vector<double> values;
  double tolerance = 0;  // |got - want| <= tolerance * max(1, |want|)
};

struct KitCase {
  int id = 0;
  std::string source, describe, spec;  // spec: the spec hash, libs/<spec>.so
  std::map<std::string, TensorData> inputs;   // q, k, positions, cu_seqlens, table, freqs, cos_sin_cache, saved_q, saved_k
  std::map<std::string, TensorData> outputs;  // out_q, out_k, d_freqs: dtype and shape
  std::map<std::string, Truth> truth;         // by output name
  int64_t offset = 0, seq_len = 0;
  float q_scale = 0, k_scale = 0;  // fp8 codes' scales (0: not given)
  bool backward = false, in_place = false, fused_qkv = false;
};

// The cases of DIR/cases (throws std::runtime_error naming what is missing
// or malformed); `only`: one id, or all.
std::vector<KitCase> load_cases(const std::string& dir, std::optional<int> only = std::nullopt);

ropegen_dtype dtype_named(const std::string& name);  // "bfloat16" -> {BFLOAT, 16, 1}
int dtype_bytes(ropegen_dtype t);

}  // namespace kit
