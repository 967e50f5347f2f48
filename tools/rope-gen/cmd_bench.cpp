// rope-gen bench SPEC --shape B,S,H [--k-heads N] [--backward] [--positions random] [--in-place]
//   [--table-kernel] [--target T] [--threads N]   (sinusoidal, learned: --shape B,S; alibi: --shape B,Sq,Sk)
// One JSON line: {"gbps": ..., "copy_gbps": ..., "ratio": ...}.
#include <cstdlib>
#include <iostream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/bench_kernel.h"
#include "cli_error.h"
#include "commands.h"
#include "ropegen/spec_io.h"

namespace ropegen::cli {
namespace {

struct BenchArgs {
  std::string spec, shape;
  std::string positions = "sequential";
  bench::BenchOptions options;
};

void run_bench(BenchArgs& a) {
  RopeSpec spec = unwrap(load_spec(a.spec));
  // Decode: a spec with implicit positions is timed as its explicit-ids variant.
  a.options.positions = a.positions == "random" ? bench::BenchPositions::Random : bench::BenchPositions::Sequential;
  const bool derived_explicit = a.options.positions == bench::BenchPositions::Random &&
                                spec.encoding != Encoding::Alibi && spec.positions == PositionsMode::Implicit;
  if (derived_explicit) spec.positions = PositionsMode::Explicit;
  // Halide's thread pool reads HL_NUM_THREADS once, when its first kernel
  // runs: process-wide state that this tool (not the library) sets.
  if (a.options.threads > 0) setenv("HL_NUM_THREADS", std::to_string(a.options.threads).c_str(), 1);
  std::vector<int64_t> dims;
  std::stringstream ss(a.shape);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      dims.push_back(std::stoll(item, &used));
      if (used != item.size() || dims.back() < 1) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      fail(fmt::format("--shape {}: expected positive integers separated by commas (e.g. 4,4096,32)", a.shape));
    }
  }
  // What the dims mean depends on the encoding's tensor.
  const bool rows = spec.encoding == Encoding::Sinusoidal || spec.encoding == Encoding::Learned;
  const char* expected = spec.encoding == Encoding::Rope ? "B,S,H (batch, tokens, heads), e.g. 4,4096,32"
                         : rows                          ? "B,S (batch, tokens), e.g. 4,4096"
                                                         : "B,Sq,Sk (batch, query rows, keys), e.g. 1,2048,2048";
  if (dims.size() != (rows ? 2u : 3u)) fail(fmt::format("--shape {}: a {} spec expects {}", a.shape, to_string(spec.encoding), expected));
  a.options.batch = dims[0], a.options.seq = dims[1];
  if (spec.encoding == Encoding::Rope) a.options.heads = dims[2];
  if (spec.encoding == Encoding::Alibi) a.options.keys = dims[2];
  const bench::BenchResult r = unwrap(bench::bench_rope(spec, a.options));
  nlohmann::ordered_json j;
  j["gbps"] = r.gbps;
  j["copy_gbps"] = r.copy_gbps;
  j["ratio"] = r.ratio;
  j["kernel_us"] = r.kernel_us;
  j["copy_us"] = r.copy_us;
  j["bytes"] = r.bytes;
  j["runs"] = r.runs;
  j["copy_runs"] = r.copy_runs;
  if (r.table) {
    j["table_us"] = r.table->us;
    j["table_gbps"] = r.table->gbps;
    j["table_ratio"] = r.table->ratio;
    j["table_avx512"] = r.table_avx512;
  }
  j["shape"] = dims;
  j["encoding"] = to_string(spec.encoding);
  if (a.options.backward) j["backward"] = true;
  j["dtype"] = to_string(spec.dtype);
  j["layout"] = to_string(spec.layout);
  j["positions"] = a.positions;
  if (derived_explicit) j["positions_derived_explicit"] = true;
  j["in_place"] = a.options.in_place;
  j["threads"] = r.threads;
  j["target"] = a.options.target;
  std::cout << j.dump() << "\n";
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "bench",
      "Time SPEC's kernel against a memcpy of the same bytes on the same threads, interleaved in one run (one JSON "
      "line; ratio = kernel GB/s / copy GB/s, medians)");
  auto a = std::make_shared<BenchArgs>();
  cmd->add_option("SPEC", a->spec, "spec file (YAML)")->required();
  cmd->add_option("--shape", a->shape, "rope: B,S,H (batch, tokens, heads of q); sinusoidal, learned: B,S; alibi: B,Sq,Sk")
      ->required();
  cmd->add_flag("--backward", a->options.backward, "rope: time the backward kernel (dL/dq from dL/d(out_q))");
  cmd->add_option("--k-heads", a->options.k_heads, "also rotate k with this many heads")
      ->check(CLI::Range(int64_t{1}, int64_t{INT32_MAX}));
  cmd->add_option("--positions", a->positions,
                  "sequential (0..S-1 per sequence, default) or random: explicit ids uniform in [0, 8192), fixed "
                  "seed (decode); a spec with implicit positions is then timed as its `positions: explicit` variant")
      ->check(CLI::IsMember({"sequential", "random"}));
  cmd->add_flag("--in-place", a->options.in_place, "rotate q (and k) in place (default: into separate outputs)");
  cmd->add_flag("--table-kernel", a->options.table_kernel,
                "rope: also time bench/'s hand-written table kernel (f32 cos/sin table gathered per token)");
  cmd->add_option("--passes", a->options.passes, "interleaved passes (each a batch of runs per side)")
      ->check(CLI::Range(1, 100));
  cmd->add_option("--target", a->options.target,
                  "host, cuda, vulkan, or a Halide target string; on a GPU the time includes host <-> device copies");
  cmd->add_option("--threads", a->options.threads, "threads of the kernel and the copy (default: all cores); sets HL_NUM_THREADS")->check(CLI::Range(1, 1024));
  cmd->add_option("--seconds", a->options.min_seconds, "measuring time per side, over all passes")->check(CLI::Range(0.01, 60.0));
  cmd->callback([a] { run_bench(*a); });
}

}  // namespace ropegen::cli
