// kit_cases DIR: the GPU kit's case files (gpu_kit/README.md). Every case
// of the kernel tests' lists (the kernel sweeps, the other encodings, the
// cos/sin-cache sweep, the golden vectors that carry tensors) becomes one
// call: its inputs in the spec's storage types, the shapes of its outputs,
// and the float64 reference's outputs (tests/support, which shares no code
// with lowering/) with the tolerance the tests allow. The kit's runner
// needs no Halide and no rope-gen library beyond the AOT libraries built
// from DIR/specs/*.yaml (one per distinct spec, by spec hash).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "call/prepare_call.h"
#include "kernels/encoding_sweeps.h"
#include "kernels/kernel_sweeps.h"
#include "ropegen/spec_io.h"
#include "runtime/host_apply.h"
#include "golden_vectors.h"

namespace ropegen::kit {
namespace {

using nlohmann::ordered_json;

struct Source {
  std::string name;
  std::vector<test::EncodingCase> cases;
};

std::vector<test::EncodingCase> requests(const std::vector<test::Case>& cases) {
  std::vector<test::EncodingCase> out;
  for (const test::Case& c : cases) out.push_back(test::as_encoding_case(c));
  return out;
}

std::vector<test::EncodingCase> golden_requests() {
  std::vector<test::EncodingCase> out;
  for (auto& [spec, request] : golden_vectors()) {
    test::EncodingCase e;
    e.spec = std::move(spec);
    e.request = std::move(request);
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<Source> sources() {
  return {{"kernel sweep: layouts x pairings x dtypes x scalings",
           requests(test::sweep_layouts_pairings_dtypes_scalings())},
          {"kernel sweep: fp8 outputs", requests(test::sweep_fp8_output())},
          {"kernel sweep: explicit positions", requests(test::sweep_explicit_positions())},
          {"kernel sweep: odd sizes", requests(test::sweep_odd_sizes())},
          {"kernel sweep: output pairing", requests(test::sweep_output_pairing())},
          {"kernel sweep: xPos, LongRoPE, schemes", requests(test::sweep_xpos_longrope_schemes())},
          {"kernel sweep: GPU shapes", requests(test::sweep_gpu_shapes())},
          {"kernel sweep: QK-norm then RoPE", requests(test::sweep_qk_norm())},
          {"kernel sweep: QK-norm then RoPE, backward", requests(test::backward_of(test::sweep_qk_norm()))},
          {"encodings: sinusoidal, learned", test::sweep_sinusoidal_and_learned()},
          {"encodings: ALiBi", test::sweep_alibi()},
          {"encodings: multi-axis RoPE", test::sweep_multi_axis_rope()},
          {"backward, run-time frequencies", test::sweep_backward_and_runtime_frequencies()},
          {"frequency scheme table (cos/sin cache)", test::sweep_cos_sin_cache()},
          {"golden vectors", golden_requests()}};
}

std::vector<int64_t> shape_of(const Tensor& t) { return {t.shape.begin(), t.shape.begin() + t.rank}; }

class CaseWriter {
 public:
  explicit CaseWriter(const std::string& path) : out_(path, std::ios::binary) {}
  bool ok() const { return out_.good(); }

  ordered_json tensor(const Tensor& t) {
    const int64_t bytes = t.elements() * element_bytes(t.type);
    ordered_json j = {{"type", to_string(t.type)}, {"shape", shape_of(t)}, {"offset", offset_}, {"bytes", bytes}};
    write(t.data, bytes);
    return j;
  }
  ordered_json truth(const std::vector<double>& values, double tolerance) {
    ordered_json j = {{"offset", offset_}, {"count", values.size()}, {"tolerance", tolerance}};
    write(values.data(), static_cast<int64_t>(values.size() * sizeof(double)));
    return j;
  }

 private:
  void write(const void* data, int64_t bytes) {
    out_.write(static_cast<const char*>(data), bytes);
    offset_ += bytes;
  }
  std::ofstream out_;
  int64_t offset_ = 0;
};

std::string one_line(std::string text) {
  while (!text.empty() && text.back() == '\n') text.pop_back();
  for (size_t at; (at = text.find('\n')) != std::string::npos;) text.replace(at, 1, "; ");
  return text;
}

// Whether prepare_call takes the call in place (out_q and out_k absent):
// DeepSeek's output pairing, for one, cannot be written over its input.
bool takes_in_place(const RopeSpec& spec, Call call) {
  call.out_q.reset(), call.out_k.reset();
  return call::prepare_call(spec, call).ok();
}

// q and k as column slices of one fused qkv row ([..., H + 2 Hk, D] per token):
// rope with k in a layout whose heads sit next to the row dim.
bool takes_fused_qkv(const RopeSpec& spec, const Call& call) {
  return spec.encoding == Encoding::Rope && call.k && !call.saved_q &&
         (spec.layout == Layout::BSHD || spec.layout == Layout::SBHD || spec.layout == Layout::THD);
}

// At most `max_specs` distinct specs (0: all), taken in turn from each
// source (each source's next new spec), so that every source is sampled:
// each spec is one library in the kit (about 1 MiB with its CUDA code).
std::set<std::string> chosen_specs(const std::vector<Source>& sources, size_t max_specs) {
  std::vector<std::vector<std::string>> per_source;
  for (const Source& s : sources) {
    std::vector<std::string>& hashes = per_source.emplace_back();
    for (const test::EncodingCase& c : s.cases) {
      const std::string h = spec_hash(parse_spec(c.spec, "case").value());
      if (std::find(hashes.begin(), hashes.end(), h) == hashes.end()) hashes.push_back(h);
    }
  }
  std::set<std::string> chosen;
  for (size_t round = 0, added = 1; added; ++round) {
    added = 0;
    for (const std::vector<std::string>& hashes : per_source) {
      if (round >= hashes.size() || (max_specs && chosen.size() >= max_specs)) continue;
      added += chosen.insert(hashes[round]).second;
    }
  }
  return chosen;
}

// fp8 outputs' truths, in code units: the reference / its scale (times it,
// fp8_scale: multiply), saturated,
// within half a code's spacing (the codes are compared by value; the host
// and the device must also agree bit for bit). output_quant: each group's
// scale as the kernels compute it from the reference's absmax, and those
// scales as out_scales' truth.
void fp8_truths(const RopeSpec& spec, const Call& call, const test::ReferenceOutputs& want, CaseWriter& w,
                ordered_json& j) {
  const bool e4m3 = spec.output_dtype == KvDType::Fp8E4m3;
  const double max = e4m3 ? 448.0 : 57344.0, half_spacing = std::ldexp(1.0, e4m3 ? -4 : -3) * 1.01;
  auto codes = [&](std::vector<double> values, const std::vector<double>& scales, size_t group) {
    for (size_t i = 0; i < values.size(); ++i) values[i] = std::clamp(values[i] / scales[i / group], -max, max);
    return values;
  };
  if (!spec.output_quant.enabled) {
    // A per-tensor scale as a divisor.
    auto divisor = [&](const std::optional<float>& s) {
      const double scale = s.value_or(1.0f);
      return spec.fp8_scale == Fp8Scale::Multiply ? 1.0 / scale : scale;
    };
    j["truth"]["out_q"] = w.truth(codes(want.out_q, {divisor(call.q_scale)}, want.out_q.size()), half_spacing);
    if (want.out_k)
      j["truth"]["out_k"] = w.truth(codes(*want.out_k, {divisor(call.k_scale)}, want.out_k->size()), half_spacing);
    return;
  }
  const size_t group = static_cast<size_t>(spec.output_quant.group);
  std::vector<double> scales;
  for (size_t g = 0; g * group < want.out_q.size(); ++g) {
    double absmax = 1e-10;
    for (size_t i = g * group; i < (g + 1) * group; ++i) absmax = std::max(absmax, std::abs(want.out_q[i]));
    float scale = static_cast<float>(absmax) * static_cast<float>(1.0 / max);
    if (spec.output_quant.scale == QuantScale::Ue8m0) scale = std::exp2(std::ceil(std::log2(scale)));
    scales.push_back(scale);
  }
  j["truth"]["out_q"] = w.truth(codes(want.out_q, scales, group), half_spacing);
  j["truth"]["out_scales"] = w.truth(scales, 1e-6);
}

int run(const std::string& dir, size_t max_specs) {
  std::filesystem::create_directories(dir + "/cases/data");
  std::filesystem::create_directories(dir + "/specs");
  ordered_json index = ordered_json::array();
  std::map<std::string, std::string> specs;  // hash -> text
  int id = 0, all = 0;
  const std::vector<Source> all_sources = sources();
  for (const Source& source : all_sources)
    for (const test::EncodingCase& c : source.cases)
      if (!parse_spec(c.spec, "case")) return std::cerr << format(parse_spec(c.spec, "case").errors()), 1;
  const std::set<std::string> chosen = chosen_specs(all_sources, max_specs);
  for (const Source& source : all_sources) {
    for (const test::EncodingCase& c : source.cases) {
      ++all;
      const Result<RopeSpec> spec = parse_spec(c.spec, "case");
      if (!chosen.count(spec_hash(*spec))) continue;
      Result<std::unique_ptr<runtime::HostCall>> host = runtime::HostCall::make(*spec, c.request);
      if (!host) return std::cerr << format(host.errors()), 1;
      const Call& call = (*host)->call();
      const std::string hash = spec_hash(*spec);
      specs.emplace(hash, c.spec);

      const std::string data = fmt::format("data/{:04}.bin", id);
      CaseWriter w(dir + "/cases/" + data);
      ordered_json j = {{"id", id}, {"source", source.name}, {"describe", one_line(c.describe())}, {"spec", hash},
                        {"dtype", to_string(call.q->type)}, {"data", data}};
      // Every tensor the call has, by its name in the argument table.
      for (const abi::ArgumentInfo& a : abi::kArguments) {
        const std::optional<Tensor>* t = a.call_tensor ? &(call.*a.call_tensor) : nullptr;
        if (!t || !*t) continue;
        if (a.direction == abi::Direction::In)
          j["inputs"][a.name] = w.tensor(**t);
        else
          j["outputs"][a.name] = {{"type", to_string((*t)->type)}, {"shape", shape_of(**t)}};
        if ((a.arg == abi::Arg::OutQ || a.arg == abi::Arg::OutK) && spec->has_fp8_output())
          j["outputs"][a.name]["fp8"] = to_string(spec->output_dtype);
      }
      j["offset"] = call.offset;
      j["seq_len"] = call.seq_len.value_or(0);
      j["backward"] = call.backward;
      if (call.q_scale) j["q_scale"] = *call.q_scale;
      if (call.k_scale) j["k_scale"] = *call.k_scale;
      const test::ReferenceOutputs want = test::reference_outputs(c);
      const double tol = test::tolerance(spec->dtype, 0.0);  // scaled by max(1, |want|)
      if (spec->has_fp8_output()) {
        fp8_truths(*spec, call, want, w, j);
      } else {
        j["truth"]["out_q"] = w.truth(want.out_q, tol);
        if (want.out_k) j["truth"]["out_k"] = w.truth(*want.out_k, tol);
      }
      const double sum_tol = test::kSumTolerance * test::tolerance(DType::F32, 0.0);
      for (const auto& [name, values] : {std::pair{"d_freqs", &want.d_freqs},
                                         {"d_q_norm_weight", &want.d_q_norm_weight},
                                         {"d_k_norm_weight", &want.d_k_norm_weight}})
        if (*values) j["truth"][name] = w.truth(**values, sum_tol);
      j["in_place"] = takes_in_place(*spec, call);
      j["fused_qkv"] = j["in_place"].get<bool>() && takes_fused_qkv(*spec, call);
      if (!w.ok()) return std::cerr << "cannot write " << dir << "/cases/" << data << "\n", 1;
      index.push_back(std::move(j));
      ++id;
    }
  }
  for (const auto& [hash, text] : specs) std::ofstream(dir + "/specs/" + hash + ".yaml") << text;
  std::ofstream(dir + "/cases/index.json") << index.dump(1) << "\n";
  std::cout << fmt::format("{} of the tests' {} cases ({} specs) in {}\n", id, all, specs.size(), dir);
  return 0;
}

}  // namespace
}  // namespace ropegen::kit

int main(int argc, char** argv) {
  if (argc != 2 && !(argc == 4 && std::string(argv[2]) == "--max-specs"))
    return std::fprintf(stderr, "usage: kit_cases DIR [--max-specs N]\n"), 2;
  return ropegen::kit::run(argv[1], argc == 4 ? std::stoul(argv[3]) : 0);
}
