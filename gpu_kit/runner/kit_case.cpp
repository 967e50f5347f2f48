#include "kit_case.h"

#include <cstring>
#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace kit {
namespace {

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path + " (is this a GPU kit directory? `make gpu-kit` builds one)");
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// [offset, offset + bytes) of the case's data, checked.
const uint8_t* slice(const std::vector<uint8_t>& data, int64_t offset, int64_t bytes, const std::string& what) {
  if (offset < 0 || bytes < 0 || offset > static_cast<int64_t>(data.size()) ||
      bytes > static_cast<int64_t>(data.size()) - offset)
    throw std::runtime_error(what + " lies outside its data file");
  return data.data() + offset;
}

TensorData tensor(const nlohmann::json& j) {
  TensorData t;
  t.dtype = dtype_named(j.at("type").get<std::string>());
  t.shape = j.at("shape").get<std::vector<int64_t>>();
  t.fp8 = j.value("fp8", std::string());
  return t;
}

}  // namespace

int64_t TensorData::elements() const {
  int64_t n = 1;
  for (int64_t e : shape) n *= e;
  return n;
}

size_t TensorData::size_in_bytes() const { return static_cast<size_t>(elements()) * dtype_bytes(dtype); }

ropegen_dtype dtype_named(const std::string& name) {
  if (name == "float32") return {ROPEGEN_DTYPE_FLOAT, 32, 1};
  if (name == "float16") return {ROPEGEN_DTYPE_FLOAT, 16, 1};
  if (name == "bfloat16") return {ROPEGEN_DTYPE_BFLOAT, 16, 1};
  if (name == "int32") return {ROPEGEN_DTYPE_INT, 32, 1};
  if (name == "int64") return {ROPEGEN_DTYPE_INT, 64, 1};
  if (name == "uint8") return {ROPEGEN_DTYPE_UINT, 8, 1};
  throw std::runtime_error("unknown element type " + name);
}

int dtype_bytes(ropegen_dtype t) { return t.bits / 8; }

std::vector<KitCase> load_cases(const std::string& dir, std::optional<int> only) {
  const std::vector<uint8_t> index_text = read_all(dir + "/cases/index.json");
  const nlohmann::json index = nlohmann::json::parse(index_text.begin(), index_text.end());
  std::vector<KitCase> cases;
  for (const nlohmann::json& j : index) {
    KitCase c;
    c.id = j.at("id").get<int>();
    if (only && c.id != *only) continue;
    c.source = j.at("source").get<std::string>();
    c.describe = j.at("describe").get<std::string>();
    c.spec = j.at("spec").get<std::string>();
    c.offset = j.at("offset").get<int64_t>();
    c.seq_len = j.at("seq_len").get<int64_t>();
    c.backward = j.at("backward").get<bool>();
    c.q_scale = j.value("q_scale", 0.0f), c.k_scale = j.value("k_scale", 0.0f);
    c.in_place = j.at("in_place").get<bool>();
    c.fused_qkv = j.at("fused_qkv").get<bool>();
    const std::string data_path = dir + "/cases/" + j.at("data").get<std::string>();
    const std::vector<uint8_t> data = read_all(data_path);
    for (const auto& [name, t] : j.at("inputs").items()) {
      TensorData d = tensor(t);
      const int64_t bytes = t.at("bytes").get<int64_t>();
      if (bytes != static_cast<int64_t>(d.size_in_bytes())) throw std::runtime_error(data_path + ": " + name + "'s size does not match its shape");
      const uint8_t* p = slice(data, t.at("offset").get<int64_t>(), bytes, data_path + ": " + name);
      d.bytes.assign(p, p + bytes);
      c.inputs.emplace(name, std::move(d));
    }
    for (const auto& [name, t] : j.at("outputs").items()) c.outputs.emplace(name, tensor(t));
    for (const auto& [name, t] : j.at("truth").items()) {
      Truth truth;
      const int64_t count = t.at("count").get<int64_t>();
      const uint8_t* p = slice(data, t.at("offset").get<int64_t>(), count * 8, data_path + ": the truth of " + name);
      truth.values.resize(count);
      std::memcpy(truth.values.data(), p, count * 8);
      truth.tolerance = t.at("tolerance").get<double>();
      c.truth.emplace(name, std::move(truth));
    }
    cases.push_back(std::move(c));
  }
  if (only && cases.empty()) throw std::runtime_error("no case " + std::to_string(*only) + " in " + dir);
  return cases;
}

}  // namespace kit
