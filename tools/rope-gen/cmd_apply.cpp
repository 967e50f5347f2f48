// rope-gen apply SPEC: a spec run on .npy tensors, one flag per call
// argument (abi/arguments.h: its cli_flag), read and converted by its
// dtype rule, results written to --out-* files.
//   rope:       --q Q.npy [--k K.npy] [--positions P.npy | --offset N] ... --out-q OQ.npy [--out-k OK.npy]
//   backward:   --backward --q GQ.npy [--k GK.npy] [--saved-q Q --saved-k K --out-freqs DF] ...
//   sinusoidal, learned, alibi: --x X.npy [--table T.npy] ... --out Y.npy
//   kv_cache:   --k-cache KC.npy --out-k-cache OKC.npy (and --v-cache / --out-v-cache): read, updated, written
#include <fmt/format.h>

#include <cstring>
#include <iostream>

#include "abi/arguments.h"
#include "atomic_file.h"
#include "cli_error.h"
#include "commands.h"
#include "npy.h"
#include "output_files.h"
#include "ropegen/spec_io.h"
#include "runtime/host_apply.h"

namespace ropegen::cli {
namespace {

using abi::Arg;

struct ApplyOptions {
  std::string spec, target = "host";
  abi::ByTensor<std::string> paths;    // each argument's file: inputs read, outputs written
  abi::ByTensor<std::string> updated;  // the caches (read, updated in place): where they are written
  std::string x, out;                  // sinusoidal, learned, alibi: their spellings of --q, --out-q
  int64_t offset = 0;
  std::optional<int64_t> seq_len;
  std::optional<float> q_scale, k_scale, v_scale;  // fp8 caches and outputs
  bool backward = false;
};

// "--k-cache" -> "--out-k-cache": where an updated cache is written.
std::string updated_flag(const abi::ArgumentInfo& a) { return fmt::format("--out-{}", a.cli_flag + 2); }

// An argument's .npy file as its dtype rule wants it: float32 values (the
// spec's dtype and caches: converted for the kernel; cos/sin caches and
// frequencies: passed as they are), int32/int64 ids and indices, or an fp8
// cache's uint8 codes.
runtime::HostArray read_argument(const RopeSpec& spec, const abi::ArgumentInfo& a, const std::string& path) {
  const char* flag = a.cli_flag;
  if (a.dtype == abi::DtypeRule::Ids || a.dtype == abi::DtypeRule::Int32) {
    NpyInts ids = read_npy_ints(path, flag);
    return runtime::HostArray::of_ids(ids.shape, ids.values, ids.is_int64);
  }
  const NpyArray n = read_npy(path);
  if (a.dtype == abi::DtypeRule::KvCache && spec.kv_cache.is_fp8()) {
    if (n.dtype != "|u1")
      fail(
          fmt::format("{} ({}) has dtype {}; the spec's kv_cache dtype is {}: the cache holds its codes as uint8 "
                      "(np.uint8; torch: cache.view(torch.uint8))",
                      flag, path, n.dtype, to_string(spec.kv_cache.dtype)));
    return runtime::HostArray::of_codes(n.shape, n.data);
  }
  if (n.dtype != "<f4")
    fail(a.dtype == abi::DtypeRule::Float32
             ? fmt::format("{} ({}) has dtype {}; it must be float32 (np.float32) whatever the spec's dtype", flag,
                           path, n.dtype)
             : fmt::format("{} ({}) has dtype {}; it must be float32 (np.float32); it is converted to the {} dtype for "
                           "the kernel",
                           flag, path, n.dtype, a.dtype == abi::DtypeRule::KvCache ? "cache's" : "spec's"));
  std::vector<float> values(n.elements());
  if (!n.data.empty()) std::memcpy(values.data(), n.data.data(), n.data.size());  // an empty tensor has no data pointer
  return runtime::HostArray::of_floats(n.shape, std::move(values));
}

// Which flags a spec takes: rope rotates q (and k), the others update x;
// the caches go with their updated files; d_freqs with --backward on
// run-time frequencies.
void check_flags(const RopeSpec& spec, ApplyOptions& o) {
  if (spec.encoding != Encoding::Rope) {
    if (!o.paths[Arg::Q].empty() || !o.paths[Arg::K].empty() || !o.paths[Arg::OutQ].empty() ||
        !o.paths[Arg::OutK].empty())
      fail(
          fmt::format("`{}` is a {} spec: pass its tensor as --x X.npy and the result as --out OUT.npy (--q/--k are "
                      "for rope)",
                      spec.name, to_string(spec.encoding)));
    if (o.x.empty() || o.out.empty())
      fail(fmt::format("a {} spec needs --x X.npy and --out OUT.npy", to_string(spec.encoding)));
    o.paths[Arg::Q] = o.x, o.paths[Arg::OutQ] = o.out;
    return;
  }
  if (!o.x.empty() || !o.out.empty())
    fail(
        fmt::format("`{}` is a rope spec: pass --q (and --k) with --out-q (and --out-k); --x/--out are for "
                    "sinusoidal, learned and alibi specs",
                    spec.name));
  if (o.paths[Arg::Q].empty() || o.paths[Arg::OutQ].empty()) fail("a rope spec needs --q Q.npy and --out-q OUT.npy");
  const bool kv = spec.kv_cache.enabled;
  const bool k = !o.paths[Arg::K].empty(), out_k = !o.paths[Arg::OutK].empty();
  if (!kv && k != out_k) fail("--k and --out-k go together");
  if (kv && out_k && !k) fail("--out-k needs --k");
  for (const abi::ArgumentInfo& a : abi::kArguments) {
    if (!abi::is_tensor(a.arg)) continue;
    const bool kv_argument = a.feature == abi::Feature::KvCache || a.feature == abi::Feature::PagedKvCache ||
                             a.feature == abi::Feature::ContiguousKvCache;
    const std::string& path = o.paths[a.arg];
    if (!kv && kv_argument && (!path.empty() || !o.updated[a.arg].empty()))
      fail(fmt::format("{} is for specs with a kv_cache section (the fused KV-cache append); `{}` has none",
                       path.empty() ? updated_flag(a) : a.cli_flag, spec.name));
    if (kv && a.direction == abi::Direction::InOut && path.empty() != o.updated[a.arg].empty())
      fail(fmt::format("{} and {} go together (the cache is read, updated and written)", a.cli_flag, updated_flag(a)));
  }
  if (!o.paths[Arg::DFreqs].empty() != (o.backward && spec.frequency.scheme == FrequencyScheme::Runtime))
    fail(
        "--out-freqs (dL/d(inv_freq)) goes with --backward on a spec with `frequency: {scheme: runtime}`, and is "
        "required there");
}

// The library names the call's arguments; here they came from flags.
std::vector<Diagnostic> with_flags(std::vector<Diagnostic> errors, bool single_tensor) {
  for (Diagnostic& d : errors)
    if (const std::optional<Arg> a = abi::argument_named(d.where.file); a && abi::info(*a).cli_flag)
      d.where.file = single_tensor && abi::info(*a).single_name ? fmt::format("--{}", abi::info(*a).single_name)
                                                                : abi::info(*a).cli_flag;
    else if (d.where.file == "backward")
      d.where.file = "--backward";
  return errors;
}

void write_result(const std::string& path, const runtime::HostArray& a) {
  if (a.type == ElementType::UInt8)
    write_file_atomically(path, npy_bytes(a.codes, a.shape));
  else
    write_file_atomically(path, npy_bytes(a.floats, a.shape));
}

void run_apply(ApplyOptions& o) {
  const RopeSpec spec = unwrap(load_spec(o.spec));
  check_flags(spec, o);
  std::vector<OutputFile> outputs;
  for (const abi::ArgumentInfo& a : abi::kArguments) {
    if (!abi::is_tensor(a.arg)) continue;
    if (a.direction == abi::Direction::Out) outputs.push_back({a.cli_flag, o.paths[a.arg]});
    if (a.direction == abi::Direction::InOut) outputs.push_back({updated_flag(a), o.updated[a.arg]});
  }
  const bool single = spec.encoding != Encoding::Rope;
  if (single) outputs[0].flag = "--out";  // out_q, the first output
  check_outputs(outputs);
  runtime::ApplyRequest r;
  for (const abi::ArgumentInfo& a : abi::kArguments)
    if (abi::is_tensor(a.arg) && a.direction != abi::Direction::Out && !o.paths[a.arg].empty())
      r[a.arg] = read_argument(spec, a, o.paths[a.arg]);
  r.offset = o.offset, r.seq_len = o.seq_len;
  r.q_scale = o.q_scale, r.k_scale = o.k_scale, r.v_scale = o.v_scale;
  r.backward = o.backward;
  r.target = o.target;
  r.out_k = !o.paths[Arg::OutK].empty();
  Result<runtime::ApplyResult> applied = runtime::apply_on_host(spec, r);
  if (!applied) applied = with_flags(applied.errors(), single);
  const runtime::ApplyResult result = unwrap(std::move(applied));
  for (Arg a : abi::kTensorArgs) {
    const std::string& path = abi::info(a).direction == abi::Direction::InOut ? o.updated[a] : o.paths[a];
    if (result[a] && !path.empty()) write_result(path, *result[a]);
  }
}

}  // namespace

void add_apply_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("apply", "Run a spec on float32 .npy tensors: rotate q (and k), or add the encoding to x");
  auto o = std::make_shared<ApplyOptions>();
  cmd->add_option("SPEC", o->spec, "spec file (YAML)")->required();
  cmd->add_option("--x", o->x, "sinusoidal, learned: x [B,S,D] / [S,B,D] / [T,D]; alibi: scores [B,H,Sq,Sk]");
  cmd->add_option("--out", o->out, "sinusoidal, learned, alibi: the result (.npy, float32)");
  CLI::Option* positions = nullptr;
  for (const abi::ArgumentInfo& a : abi::kArguments) {
    if (!a.cli_flag) continue;
    switch (a.arg) {
      case Arg::Offset: cmd->add_option(a.cli_flag, o->offset, a.doc)->excludes(positions); break;
      case Arg::SeqLen: cmd->add_option(a.cli_flag, o->seq_len, a.doc); break;
      case Arg::QScale: cmd->add_option(a.cli_flag, o->q_scale, a.doc); break;
      case Arg::KScale: cmd->add_option(a.cli_flag, o->k_scale, a.doc); break;
      case Arg::VScale: cmd->add_option(a.cli_flag, o->v_scale, a.doc); break;
      default: {
        const std::string help =
            fmt::format("{} (.npy{})", a.doc, a.direction == abi::Direction::In ? "" : ", written");
        CLI::Option* option = cmd->add_option(a.cli_flag, o->paths[a.arg], help);
        if (a.arg == Arg::Positions) positions = option;
        if (a.direction == abi::Direction::InOut)
          cmd->add_option(updated_flag(a), o->updated[a.arg], fmt::format("where the updated {} is written", a.name));
      }
    }
  }
  cmd->add_flag("--backward", o->backward,
                "rope: the gradients dL/dq (, dL/dk) of upstream gradients given as --q (, --k)");
  cmd->add_option("--target", o->target,
                  "host, cuda, vulkan, or a Halide target string (e.g. host-cuda-cuda_capability_80)");
  cmd->callback([o] { run_apply(*o); });
}

}  // namespace ropegen::cli
