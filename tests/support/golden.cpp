#include "support/golden.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/test_paths.h"

namespace ropegen::test {
namespace {

std::optional<GoldenTensor> tensor(const nlohmann::json& j, const char* data_key, const char* shape_key) {
  if (!j.contains(data_key)) return std::nullopt;
  GoldenTensor t;
  t.data = j.at(data_key).get<std::vector<double>>();
  t.shape = j.at(shape_key).get<std::vector<int64_t>>();
  return t;
}

// {"shape", "dtype", "data"} as make_golden.py's tensor_json writes it.
GoldenTensor encoded_tensor(const nlohmann::json& j) {
  return {j.at("shape").get<std::vector<int64_t>>(), j.at("data").get<std::vector<double>>(),
          j.at("dtype").get<std::string>() == "int64"};
}

std::map<std::string, GoldenTensor> encoded_tensors(const nlohmann::json& j) {
  std::map<std::string, GoldenTensor> out;
  for (const auto& [name, t] : j.items()) out.emplace(name, encoded_tensor(t));
  return out;
}

// The case files in `dir`, sorted.
std::vector<std::filesystem::path> json_files(const std::string& dir) {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".json" && e.path().stem() != "VERSIONS") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

std::string golden_dir() { return ropegen::test::source_path("/tests/golden/data"); }

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
  std::vector<GoldenCase> cases;
  for (const auto& path : json_files(golden_dir())) {
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

const GoldenTensor* EncodingCase::input(const std::string& input_name) const {
  auto it = inputs.find(input_name);
  return it == inputs.end() ? nullptr : &it->second;
}

ref::Call EncodingCase::call() const {
  auto option = [&](const char* key) -> std::optional<int64_t> {
    if (!options.count(key)) return std::nullopt;
    return options.at(key);
  };
  ref::Call c;
  c.offset = option("offset").value_or(0);
  c.seq_len = option("seq_len");
  if (const GoldenTensor* p = input("positions")) c.positions = ref::Tensor{p->shape, p->data};
  if (const auto max_pos = option("max_pos")) {
    c.positions = ref::Tensor{{*max_pos}, {}};
    for (int64_t i = 0; i < *max_pos; ++i) c.positions->data.push_back(static_cast<double>(i));
  }
  if (const GoldenTensor* cu = input("cu_seqlens")) c.cu_seqlens.assign(cu->data.begin(), cu->data.end());
  if (const GoldenTensor* f = input("freqs")) c.inv_freq = f->data;
  if (const GoldenTensor* t = input("table")) c.table = ref::Tensor{t->shape, t->data};
  if (const GoldenTensor* w = input("q_norm_weight")) c.q_norm_weight = w->data;
  if (const GoldenTensor* w = input("k_norm_weight")) c.k_norm_weight = w->data;
  return c;
}

std::vector<EncodingCase> load_encoding_cases() {
  std::vector<EncodingCase> cases;
  for (const auto& path : json_files(golden_dir() + "/encodings")) {
    std::ifstream in(path);
    const nlohmann::json j = nlohmann::json::parse(in);
    EncodingCase c;
    c.name = path.stem().string();
    c.peer = j.value("peer", "");
    c.spec = j.at("spec").get<std::string>();
    c.command = j.at("command").get<std::string>();
    c.inputs = encoded_tensors(j.at("inputs"));
    c.outputs = encoded_tensors(j.at("outputs"));
    c.options = j.at("options").get<std::map<std::string, int64_t>>();
    cases.push_back(std::move(c));
  }
  return cases;
}

}  // namespace ropegen::test
