// rope-gen bench SPEC --shape B,S,H [--k-heads N] [--backward] [--target T] [--threads N]
//   (sinusoidal, learned: --shape B,S; alibi: --shape B,Sq,Sk)
// One JSON line: {"gbps": ..., "copy_gbps": ..., "ratio": ...}.
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
  bench::BenchOptions options;
};

void run_bench(BenchArgs& a) {
  const RopeSpec spec = unwrap(load_spec(a.spec));
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
  j["shape"] = dims;
  j["encoding"] = to_string(spec.encoding);
  if (a.options.backward) j["backward"] = true;
  j["dtype"] = to_string(spec.dtype);
  j["layout"] = to_string(spec.layout);
  j["threads"] = a.options.threads;
  j["target"] = a.options.target;
  std::cout << j.dump() << "\n";
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "Time SPEC's kernel against a copy of the same bytes (one JSON line)");
  auto a = std::make_shared<BenchArgs>();
  cmd->add_option("SPEC", a->spec, "spec file (YAML)")->required();
  cmd->add_option("--shape", a->shape, "rope: B,S,H (batch, tokens, heads of q); sinusoidal, learned: B,S; alibi: B,Sq,Sk")
      ->required();
  cmd->add_flag("--backward", a->options.backward, "rope: time the backward kernel (dL/dq from dL/d(out_q))");
  cmd->add_option("--k-heads", a->options.k_heads, "also rotate k with this many heads");
  cmd->add_option("--target", a->options.target,
                  "host, cuda, vulkan, or a Halide target string; on a GPU the time includes host <-> device copies");
  cmd->add_option("--threads", a->options.threads, "worker threads (default: all cores)")->check(CLI::Range(1, 1024));
  cmd->add_option("--seconds", a->options.min_seconds, "minimum measuring time per side")->check(CLI::Range(0.01, 60.0));
  cmd->callback([a] { run_bench(*a); });
}

}  // namespace ropegen::cli
