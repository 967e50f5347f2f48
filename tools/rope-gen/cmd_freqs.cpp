// rope-gen freqs SPEC [--seq-len N] --out F.npy: the inverse frequencies
// after scaling (float32 npy) and a JSON summary on stdout.
#include <iostream>

#include <nlohmann/json.hpp>

#include "atomic_file.h"
#include "cli_error.h"
#include "commands.h"
#include "npy.h"
#include "output_files.h"
#include "ropegen/rope_math.h"
#include "ropegen/spec_io.h"

namespace ropegen::cli {
namespace {

struct FreqsOptions {
  std::string spec;
  std::optional<int64_t> seq_len;
  std::string out;
};

void run_freqs(const FreqsOptions& o) {
  const RopeSpec spec = unwrap(load_spec(o.spec));
  check_outputs({{"--out", o.out}});
  if (o.seq_len && *o.seq_len < 1) fail("--seq-len must be >= 1");
  const RopeFrequencies f = compute_frequencies(spec, o.seq_len);

  std::vector<float> inv_freq(f.inv_freq.begin(), f.inv_freq.end());
  if (!o.out.empty()) write_file_atomically(o.out, npy_bytes(inv_freq, {static_cast<int64_t>(inv_freq.size())}));

  nlohmann::ordered_json j;
  j["name"] = spec.name;
  j["spec_hash"] = spec_hash(spec);
  j["rotary_dim"] = spec.rotary_dim;
  j["num_pairs"] = spec.num_pairs();
  j["scaling"] = to_string(spec.scaling.type);
  j["attention_factor"] = f.attention_factor;
  if (f.effective_seq_len) j["seq_len"] = *f.effective_seq_len;
  if (spec.scaling.type == ScalingType::LongRope) j["longrope_factors"] = f.uses_long_factor ? "long" : "short";
  if (spec.needs_seq_len() && !o.seq_len)
    j["note"] = "no --seq-len given: frequencies as at initialisation (HF); pass the run-time length to see its effect";
  j["inv_freq"] = f.inv_freq;
  if (!f.xpos_base.empty()) j["xpos_base"] = f.xpos_base;
  if (!o.out.empty()) j["out"] = o.out;
  std::cout << j.dump() << "\n";
}

}  // namespace

void add_freqs_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("freqs",
                                 "Print SPEC's inverse frequencies (after scaling) and attention factor as JSON;\n"
                                 "--out also writes inv_freq as a float32 [rotary_dim/2] .npy");
  auto o = std::make_shared<FreqsOptions>();
  cmd->add_option("SPEC", o->spec, "spec file (YAML)")->required();
  cmd->add_option("--seq-len", o->seq_len,
                  "run-time sequence length (HF: max position id + 1) for dynamic, longrope and xPos");
  cmd->add_option("--out", o->out, "write inv_freq here (.npy, float32)");
  cmd->callback([o] { run_freqs(*o); });
}

}  // namespace ropegen::cli
