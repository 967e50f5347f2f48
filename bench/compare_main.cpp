// compare_bench [--encodings | --qk-norm | --fp8] [--threads N] [--seconds S] [--no-header] [--json FILE]
// rope-gen's kernel, bench/'s hand-written table kernel and a memcpy of the
// same bytes, side by side on llama3-8B shapes (q 32 heads + k 8, head_dim
// 128): decode 64 x 1 (random explicit ids in [0, 8192)), prefill 1 x 128
// and 4 x 4096 (positions 0..S-1), f32 and bf16, out of place and in place.
// --encodings: the sinusoidal and learned x + PE kernels (d_model 1024,
// f32, bsd, positions 0..S-1) against the memcpy, [1,128], [8,512] and
// [4,4096]. --qk-norm: Qwen3-8B's heads (q 32 + k 8, head_dim 128, bf16,
// in place) normalised then rotated by one kernel (qk_norm) against the two
// passes a separate norm needs (a qk_norm kernel that rotates by 0, then the
// RoPE kernel: the sum of their times), decode 64 x 1 and prefill 4 x 4096.
// --fp8: RoPE + FP8 (float8_e4m3) q and k from bf16 in one kernel
// (output_dtype fp8_e4m3, out of place) against RoPE then a separate cast:
// the bf16 RoPE kernel, then a kernel that reads its bf16 output and writes
// fp8 codes (the fp8 spec rotating by 0: a cast's traffic, an upper bound of
// its time; bench/torch_bench.py times torch's own cast). GQA 32/8 x 128
// (half pairing) and MLA 128/1 x 576 (nope 512 | rope 64, interleaved),
// decode 64 tokens (random ids) and prefill 4096 (GQA) / 1024 (MLA).
// One markdown table row per case (`make bench` runs both for 1
// and 2 threads); --json appends one JSON line per case to FILE.
//
// Halide's thread pool reads HL_NUM_THREADS when the first kernel runs, so
// one process times one thread count; --threads sets it before that.
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/bench_kernel.h"
#include "ropegen/diagnostics.h"
#include "ropegen/spec_io.h"

namespace {

using ropegen::bench::BenchPositions;

struct Case {
  const char* name;
  int64_t batch, seq;
  BenchPositions positions;
};

int usage() {
  std::cerr << "usage: compare_bench [--encodings | --qk-norm | --fp8] [--threads N] [--seconds S] [--no-header] "
               "[--json FILE]\n";
  return 2;
}

bool print_errors(const std::string& what, const std::vector<ropegen::Diagnostic>& errors) {
  for (const auto& d : errors) std::cerr << what << ": " << ropegen::format(d) << "\n";
  return false;
}

// The x + PE encodings against the memcpy of their bytes; false if a case failed.
bool bench_encodings(int threads, double seconds, bool header, std::ofstream& json) {
  const std::vector<std::pair<const char*, const char*>> specs = {
      {"sinusoidal", ROPEGEN_SOURCE_DIR "/bench/sinusoidal_1024.yaml"},
      {"learned", ROPEGEN_SOURCE_DIR "/bench/learned_1024.yaml"}};
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{1, 128}, {8, 512}, {4, 4096}};
  if (header)
    std::cout << "| encoding | [B,S] d1024 f32 | threads | rope-gen µs | memcpy µs | rope-gen ratio |\n"
                 "|---|---|---|---|---|---|\n";
  bool ok = true;
  for (const auto& [name, path] : specs) {
    ropegen::Result<ropegen::RopeSpec> spec = ropegen::load_spec(path);
    if (!spec) return print_errors(path, spec.errors());
    for (const auto& [batch, seq] : shapes) {
      ropegen::bench::BenchOptions o;
      o.batch = batch, o.seq = seq, o.threads = threads, o.min_seconds = seconds;
      const ropegen::Result<ropegen::bench::BenchResult> r = ropegen::bench::bench_rope(*spec, o);
      if (!r) {
        ok = print_errors(name, r.errors());
        continue;
      }
      std::cout << fmt::format("| {} | [{},{}] | {} | {:.1f} | {:.1f} | {:.2f} |\n", name, batch, seq, threads,
                               r->kernel_us, r->copy_us, r->ratio)
                << std::flush;
      if (json.is_open()) {
        nlohmann::ordered_json j;
        j["encoding"] = name, j["shape"] = {batch, seq, spec->dim}, j["threads"] = threads, j["bytes"] = r->bytes;
        j["kernel_us"] = r->kernel_us, j["copy_us"] = r->copy_us, j["ratio"] = r->ratio;
        j["runs"] = r->runs, j["copy_runs"] = r->copy_runs;
        json << j.dump() << "\n";
      }
    }
  }
  return ok;
}

// Fused qk_norm + RoPE against norm then RoPE (two rope-gen calls) and the
// memcpy of the fused kernel's bytes; false if a case failed.
bool bench_qk_norm(int threads, double seconds, bool header, std::ofstream& json) {
  ropegen::Result<ropegen::RopeSpec> loaded = ropegen::load_spec(ROPEGEN_SOURCE_DIR "/bench/qwen3_8b_qk_norm.yaml");
  if (!loaded) return print_errors("qwen3_8b_qk_norm.yaml", loaded.errors());
  const std::vector<Case> cases = {{"decode", 64, 1, BenchPositions::Random},
                                   {"prefill", 4, 4096, BenchPositions::Sequential}};
  if (header)
    std::cout << "| case | [B,S] q32+k8 bf16 | threads | fused µs | norm µs + rope µs | memcpy µs | fused ratio "
                 "| two-pass ratio | two-pass time / fused time |\n|---|---|---|---|---|---|---|---|---|\n";
  bool ok = true;
  for (const Case& c : cases) {
    ropegen::RopeSpec fused = *loaded;
    if (c.positions == BenchPositions::Random) fused.positions = ropegen::PositionsMode::Explicit;
    ropegen::RopeSpec norm = fused, rope = fused;
    norm.frequency = {ropegen::FrequencyScheme::Constant, 10000.0, 10.0, 0.0, {}};  // rotates by 0
    rope.qk_norm = ropegen::QkNorm{};
    ropegen::bench::BenchOptions o;
    o.batch = c.batch, o.seq = c.seq, o.heads = 32, o.k_heads = 8, o.positions = c.positions, o.in_place = true;
    o.threads = threads, o.min_seconds = seconds;
    std::vector<ropegen::bench::BenchResult> r;
    for (const ropegen::RopeSpec* spec : {&fused, &norm, &rope}) {
      ropegen::Result<ropegen::bench::BenchResult> one = ropegen::bench::bench_rope(*spec, o);
      if (!one) {
        ok = print_errors(c.name, one.errors());
        break;
      }
      r.push_back(*one);
    }
    if (r.size() != 3) continue;
    // The two passes against the fused run's memcpy (the same bytes per pass).
    const double two_pass_us = r[1].kernel_us + r[2].kernel_us, copy_us = r[0].copy_us;
    std::cout << fmt::format("| {} | [{},{}] | {} | {:.1f} | {:.1f} + {:.1f} | {:.1f} | {:.2f} | {:.2f} | {:.2f} |\n",
                             c.name, c.batch, c.seq, threads, r[0].kernel_us, r[1].kernel_us, r[2].kernel_us, copy_us,
                             copy_us / r[0].kernel_us, copy_us / two_pass_us, two_pass_us / r[0].kernel_us)
              << std::flush;
    if (json.is_open()) {
      nlohmann::ordered_json j;
      j["qk_norm"] = c.name, j["shape"] = {c.batch, c.seq, 32}, j["k_heads"] = 8, j["threads"] = threads;
      j["fused_us"] = r[0].kernel_us, j["norm_us"] = r[1].kernel_us, j["rope_us"] = r[2].kernel_us;
      j["copy_us"] = copy_us, j["bytes"] = r[0].bytes;
      json << j.dump() << "\n";
    }
  }
  return ok;
}

// RoPE + FP8 in one kernel against RoPE then a cast (see the top); false if a case failed.
bool bench_fp8(int threads, double seconds, bool header, std::ofstream& json) {
  struct Fp8Case {
    const char* model;
    const char* spec;
    int64_t heads, k_heads, tokens;
    BenchPositions positions;
  };
  const char* gqa = "head_dim: 128\n";
  const char* mla = "head_dim: 576\nrotary_dim: 64\nrotary_offset: 512\npairing: interleaved\n";
  const std::vector<Fp8Case> cases = {{"GQA 32/8 x 128", gqa, 32, 8, 64, BenchPositions::Random},
                                      {"GQA 32/8 x 128", gqa, 32, 8, 4096, BenchPositions::Sequential},
                                      {"MLA 128/1 x (512 + 64)", mla, 128, 1, 64, BenchPositions::Random},
                                      {"MLA 128/1 x (512 + 64)", mla, 128, 1, 1024, BenchPositions::Sequential}};
  if (header)
    std::cout << "| model | tokens | threads | one kernel µs | rope µs + cast µs | memcpy µs | one-kernel ratio "
                 "| two-pass ratio | two-pass time / one-kernel time |\n|---|---|---|---|---|---|---|---|---|\n";
  bool ok = true;
  for (const Fp8Case& c : cases) {
    const std::string base = fmt::format("name: fp8_bench\n{}dtype: bf16\nlayout: thd\npositions: explicit\n", c.spec);
    const std::string fp8 = base + "output_dtype: fp8_e4m3\n";
    const std::string cast = fp8 + "frequency: {scheme: constant, value: 0}\n";  // rotates by 0
    ropegen::bench::BenchOptions o;
    o.batch = 1, o.seq = c.tokens, o.heads = c.heads, o.k_heads = c.k_heads, o.positions = c.positions;
    o.threads = threads, o.min_seconds = seconds;
    std::vector<ropegen::bench::BenchResult> r;
    for (const std::string& text : {fp8, base, cast}) {
      ropegen::Result<ropegen::RopeSpec> spec = ropegen::parse_spec(text, "fp8_bench.yaml");
      ropegen::Result<ropegen::bench::BenchResult> one =
          spec ? ropegen::bench::bench_rope(*spec, o) : ropegen::Result<ropegen::bench::BenchResult>(spec.errors());
      if (!one) {
        ok = print_errors(c.model, one.errors());
        break;
      }
      r.push_back(*one);
    }
    if (r.size() != 3) continue;
    // Every side against the bf16 copy of the inputs (the one kernel's run).
    const double two_pass_us = r[1].kernel_us + r[2].kernel_us, copy_us = r[0].copy_us;
    std::cout << fmt::format("| {} | {} | {} | {:.1f} | {:.1f} + {:.1f} | {:.1f} | {:.2f} | {:.2f} | {:.2f} |\n",
                             c.model, c.tokens, threads, r[0].kernel_us, r[1].kernel_us, r[2].kernel_us, copy_us,
                             copy_us / r[0].kernel_us, copy_us / two_pass_us, two_pass_us / r[0].kernel_us)
              << std::flush;
    if (json.is_open()) {
      nlohmann::ordered_json j;
      j["fp8"] = c.model, j["tokens"] = c.tokens, j["heads"] = {c.heads, c.k_heads}, j["threads"] = threads;
      j["one_kernel_us"] = r[0].kernel_us, j["rope_us"] = r[1].kernel_us, j["cast_us"] = r[2].kernel_us;
      j["copy_us"] = copy_us, j["bytes"] = r[0].bytes;
      json << j.dump() << "\n";
    }
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1;
  double seconds = 0.2;
  bool header = true, encodings = false, qk_norm = false, fp8 = false;
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--threads" && has_value) threads = std::atoi(argv[++i]);
    else if (arg == "--seconds" && has_value) seconds = std::atof(argv[++i]);
    else if (arg == "--json" && has_value) json_path = argv[++i];
    else if (arg == "--no-header") header = false;
    else if (arg == "--encodings") encodings = true;
    else if (arg == "--qk-norm") qk_norm = true;
    else if (arg == "--fp8") fp8 = true;
    else return usage();
  }
  if (threads < 1 || threads > 1024 || !(seconds > 0)) return usage();
  setenv("HL_NUM_THREADS", std::to_string(threads).c_str(), 1);
  std::ofstream json;
  if (!json_path.empty()) json.open(json_path, std::ios::app);
  if (encodings) return bench_encodings(threads, seconds, header, json) ? 0 : 1;
  if (qk_norm) return bench_qk_norm(threads, seconds, header, json) ? 0 : 1;
  if (fp8) return bench_fp8(threads, seconds, header, json) ? 0 : 1;

  const std::vector<std::pair<const char*, std::string>> specs = {
      {"bf16", ROPEGEN_SOURCE_DIR "/examples/llama3_8b.yaml"}, {"f32", ROPEGEN_SOURCE_DIR "/bench/llama3_8b_f32.yaml"}};
  const std::vector<Case> cases = {{"decode", 64, 1, BenchPositions::Random},
                                   {"prefill", 1, 128, BenchPositions::Sequential},
                                   {"prefill", 4, 4096, BenchPositions::Sequential}};
  if (header) {
    std::cout << "| dtype | case | [B,S] q32+k8 | threads | placement | rope-gen µs | table µs | memcpy µs "
                 "| rope-gen ratio | table ratio | rope-gen time / table time |\n"
                 "|---|---|---|---|---|---|---|---|---|---|---|\n";
  }
  int failures = 0;
  for (const auto& [dtype, path] : specs) {
    ropegen::Result<ropegen::RopeSpec> loaded = ropegen::load_spec(path);
    if (!loaded) {
      print_errors(path, loaded.errors());
      return 1;
    }
    for (const Case& c : cases) {
      for (const bool in_place : {false, true}) {
        ropegen::RopeSpec spec = *loaded;
        // Decode: the spec's explicit-ids variant (the table kernel reads ids either way).
        if (c.positions == BenchPositions::Random) spec.positions = ropegen::PositionsMode::Explicit;
        ropegen::bench::BenchOptions o;
        o.batch = c.batch, o.seq = c.seq, o.heads = 32, o.k_heads = 8;
        o.positions = c.positions, o.in_place = in_place, o.table_kernel = true;
        o.threads = threads, o.min_seconds = seconds;
        const ropegen::Result<ropegen::bench::BenchResult> r = ropegen::bench::bench_rope(spec, o);
        if (!r) {
          for (const auto& d : r.errors()) std::cerr << dtype << " " << c.name << ": " << ropegen::format(d) << "\n";
          ++failures;
          continue;
        }
        const char* placement = in_place ? "in place" : "out of place";
        std::cout << fmt::format("| {} | {}{} | [{},{}] | {} | {} | {:.1f} | {:.1f} | {:.1f} | {:.2f} | {:.2f} | {:.2f} |\n",
                                 dtype, c.name, c.positions == BenchPositions::Random ? " (random ids)" : "", c.batch,
                                 c.seq, threads, placement, r->kernel_us, r->table->us, r->copy_us, r->ratio,
                                 r->table->ratio, r->kernel_us / r->table->us)
                  << std::flush;
        if (json.is_open()) {
          nlohmann::ordered_json j;
          j["dtype"] = dtype, j["case"] = c.name, j["shape"] = {c.batch, c.seq, 32}, j["k_heads"] = 8;
          j["positions"] = c.positions == BenchPositions::Random ? "random" : "sequential";
          j["in_place"] = in_place, j["threads"] = threads, j["bytes"] = r->bytes;
          j["kernel_us"] = r->kernel_us, j["table_us"] = r->table->us, j["copy_us"] = r->copy_us;
          j["ratio"] = r->ratio, j["table_ratio"] = r->table->ratio, j["table_avx512"] = r->table_avx512;
          j["runs"] = r->runs, j["table_runs"] = r->table->runs, j["copy_runs"] = r->copy_runs;
          json << j.dump() << "\n";
        }
      }
    }
  }
  return failures == 0 ? 0 : 1;
}
