#include "support/golden.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

namespace ropegen::test {
namespace {

std::optional<GoldenTensor> tensor(const nlohmann::json& j, const char* data_key, const char* shape_key) {
  if (!j.contains(data_key)) return std::nullopt;
  GoldenTensor t;
  t.data = j.at(data_key).get<std::vector<double>>();
  t.shape = j.at(shape_key).get<std::vector<int64_t>>();
  return t;
}

}  // namespace

std::string golden_dir() { return ROPEGEN_SOURCE_DIR "/tests/golden/data"; }

int64_t GoldenCase::max_position() const {
  if (positions) return static_cast<int64_t>(*std::max_element(positions->data.begin(), positions->data.end()));
  if (!q) return 0;
  // Implicit: offset + index along S; S is dim 2 for bhsd, 1 for bshd, 0 for sbhd/thd.
  const auto& s = q->shape;
  int64_t len = s.size() == 3 ? s[0] : 0;
  for (int64_t d : s) len = std::max(len, d);  // upper bound is enough for tolerances
  return offset + len - 1;
}

ref::Call GoldenCase::call() const {
  ref::Call c;
  if (positions) c.positions = ref::Tensor{positions->shape, positions->data};
  c.offset = offset;
  c.cu_seqlens = cu_seqlens;
  c.seq_len = seq_len;
  return c;
}

std::vector<GoldenCase> load_golden_cases() {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(golden_dir()))
    if (e.path().extension() == ".json" && e.path().stem() != "VERSIONS") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::vector<GoldenCase> cases;
  for (const auto& path : files) {
    std::ifstream in(path);
    const nlohmann::json j = nlohmann::json::parse(in);
    GoldenCase c;
    c.name = path.stem().string();
    c.peer = j.value("peer", "");
    c.spec = j.at("spec").get<std::string>();
    if (j.contains("seq_len") && !j["seq_len"].is_null()) c.seq_len = j["seq_len"].get<int64_t>();
    c.offset = j.value("offset", int64_t{0});
    c.inv_freq = j.at("inv_freq").get<std::vector<double>>();
    c.attention_factor = j.value("attention_factor", 1.0);
    c.positions = tensor(j, "positions", "positions_shape");
    c.q = tensor(j, "q", "q_shape");
    c.out_q = tensor(j, "out_q", "q_shape");
    c.k = tensor(j, "k", "k_shape");
    c.out_k = tensor(j, "out_k", "k_shape");
    if (j.contains("cu_seqlens")) c.cu_seqlens = j["cu_seqlens"].get<std::vector<int64_t>>();
    cases.push_back(std::move(c));
  }
  return cases;
}

}  // namespace ropegen::test
