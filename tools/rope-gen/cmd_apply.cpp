// rope-gen apply SPEC --q Q.npy [--k K.npy] [--positions P.npy | --offset N]
//   [--cu-seqlens C.npy] [--seq-len N] [--freqs F.npy | --cos-sin-cache C.npy] [--target T]
//   --out-q OQ.npy [--out-k OK.npy]
// rope-gen apply SPEC --backward --q GQ.npy [--k GK.npy] [--saved-q Q.npy --saved-k K.npy
//   --out-freqs DF.npy] ... --out-q DQ.npy [--out-k DK.npy]
// rope-gen apply SPEC --x X.npy [--positions P.npy | --offset N] [--table T.npy] --out Y.npy
//   (sinusoidal, learned; alibi: X = attention scores [B, H, Sq, Sk])
// rope-gen apply SPEC --q Q --k K [--v V] --positions P (--kv-indices I --kv-indptr IP
//   --batch-indices BI [--cache-positions CP] | --slot-mapping SM) --k-cache KC [--v-cache VC] --out-q OQ [--out-k OK]
//   --out-k-cache OKC [--out-v-cache OVC] [--k-scale F --v-scale F]   (specs with kv_cache: the fused
//   append; fp8 caches are uint8 .npy of codes, scaled by --k-scale, --v-scale)
#include <cstring>
#include <iostream>
#include <tuple>

#include <fmt/format.h>

#include "atomic_file.h"
#include "cli_error.h"
#include "commands.h"
#include "npy.h"
#include "output_files.h"
#include "ropegen/spec_io.h"
#include "runtime/host_apply.h"

namespace ropegen::cli {
namespace {

struct ApplyOptions {
  std::string spec, q, k, x, positions, cu_seqlens, table, freqs, cos_sin_cache, saved_q, saved_k;
  std::string out_q, out_k, out, out_freqs, target = "host";
  // Fused KV-cache append.
  std::string v, k_cache, v_cache, kv_indices, kv_indptr, batch_indices, slot_mapping, out_k_cache, out_v_cache;
  std::string cache_positions;
  int64_t offset = 0;
  std::optional<int64_t> seq_len;
  std::optional<float> k_scale, v_scale;  // fp8 caches
  bool backward = false;
};

runtime::HostTensor read_float_tensor(const std::string& path, const char* role) {
  const NpyArray a = read_npy(path);
  if (a.dtype != "<f4")
    fail(fmt::format("{} ({}) has dtype {}; {} must be float32 (np.float32); it is converted to the spec's dtype for "
                     "the kernel",
                     role, path, a.dtype, role));
  runtime::HostTensor t{a.shape, std::vector<float>(a.elements())};
  if (!a.data.empty()) std::memcpy(t.data.data(), a.data.data(), a.data.size());  // an empty tensor has no data pointer
  return t;
}

// The cos/sin cache of frequency scheme table: float32, passed to the kernel
// as it is (never converted to the spec's dtype).
std::optional<runtime::HostTensor> cos_sin_cache(const std::string& path) {
  if (path.empty()) return std::nullopt;
  const NpyArray a = read_npy(path);
  if (a.dtype != "<f4")
    fail(fmt::format("--cos-sin-cache ({}) has dtype {}; a cos/sin cache must be float32 (np.float32) whatever the "
                     "spec's dtype (`rope-gen table` writes one)",
                     path, a.dtype));
  runtime::HostTensor t{a.shape, std::vector<float>(a.elements())};
  if (!a.data.empty()) std::memcpy(t.data.data(), a.data.data(), a.data.size());
  return t;
}

// An fp8 cache: its uint8 codes as they are.
std::optional<runtime::HostCodes> optional_codes(const std::string& path, const char* flag, const RopeSpec& spec) {
  if (path.empty()) return std::nullopt;
  const NpyArray a = read_npy(path);
  if (a.dtype != "|u1")
    fail(fmt::format("{} ({}) has dtype {}; the spec's kv_cache dtype is {}: the cache holds its codes as uint8 "
                     "(np.uint8; torch: cache.view(torch.uint8))",
                     flag, path, a.dtype, to_string(spec.kv_cache.dtype)));
  return runtime::HostCodes{a.shape, a.data};
}

std::optional<runtime::HostTensor> optional_tensor(const std::string& path, const char* role) {
  if (path.empty()) return std::nullopt;
  return read_float_tensor(path, role);
}

// Which flags name the tensors and outputs depends on the encoding: rope
// rotates q (and k), the others update their one tensor x.
void check_flags(const RopeSpec& spec, const ApplyOptions& o) {
  if (spec.encoding == Encoding::Rope) {
    if (!o.x.empty() || !o.out.empty())
      fail(fmt::format("`{}` is a rope spec: pass --q (and --k) with --out-q (and --out-k); --x/--out are for "
                       "sinusoidal, learned and alibi specs",
                       spec.name));
    if (o.q.empty() || o.out_q.empty()) fail("a rope spec needs --q Q.npy and --out-q OUT.npy");
    const bool kv = spec.kv_cache.enabled;
    if (!kv && o.k.empty() != o.out_k.empty()) fail("--k and --out-k go together");
    if (kv && !o.out_k.empty() && o.k.empty()) fail("--out-k needs --k");
    if (!kv) {
      for (auto [flag, value] : {std::pair{"--v", &o.v}, std::pair{"--k-cache", &o.k_cache}, std::pair{"--v-cache", &o.v_cache},
                                 std::pair{"--kv-indices", &o.kv_indices}, std::pair{"--kv-indptr", &o.kv_indptr},
                                 std::pair{"--batch-indices", &o.batch_indices}, std::pair{"--slot-mapping", &o.slot_mapping},
                                 std::pair{"--cache-positions", &o.cache_positions},
                                 std::pair{"--out-k-cache", &o.out_k_cache}, std::pair{"--out-v-cache", &o.out_v_cache}})
        if (!value->empty())
          fail(fmt::format("{} is for specs with a kv_cache section (the fused KV-cache append); `{}` has none", flag,
                           spec.name));
    } else {
      if (o.k_cache.empty() != o.out_k_cache.empty()) fail("--k-cache and --out-k-cache go together (the cache is read, updated and written)");
      if (o.v_cache.empty() != o.out_v_cache.empty()) fail("--v-cache and --out-v-cache go together (the cache is read, updated and written)");
    }
    if (!o.out_freqs.empty() != (o.backward && spec.frequency.scheme == FrequencyScheme::Runtime))
      fail("--out-freqs (dL/d(inv_freq)) goes with --backward on a spec with `frequency: {scheme: runtime}`, and is "
           "required there");
    return;
  }
  if (!o.q.empty() || !o.k.empty() || !o.out_q.empty() || !o.out_k.empty())
    fail(fmt::format("`{}` is a {} spec: pass its tensor as --x X.npy and the result as --out OUT.npy (--q/--k are for "
                     "rope)",
                     spec.name, to_string(spec.encoding)));
  if (o.x.empty() || o.out.empty()) fail(fmt::format("a {} spec needs --x X.npy and --out OUT.npy", to_string(spec.encoding)));
}

// The library names the call's arguments; here they came from flags.
std::vector<Diagnostic> with_flags(std::vector<Diagnostic> errors) {
  static const std::pair<const char*, const char*> flags[] = {
      {"q", "--q"},           {"x", "--x"},           {"k", "--k"},           {"out_q", "--out-q"},
      {"out_k", "--out-k"},   {"out", "--out"},       {"positions", "--positions"}, {"cu_seqlens", "--cu-seqlens"},
      {"table", "--table"},   {"freqs", "--freqs"},   {"cos_sin_cache", "--cos-sin-cache"},
      {"saved_q", "--saved-q"}, {"saved_k", "--saved-k"},
      {"d_freqs", "--out-freqs"}, {"offset", "--offset"}, {"seq_len", "--seq-len"}, {"backward", "--backward"},
      {"v", "--v"}, {"k_cache", "--k-cache"}, {"v_cache", "--v-cache"}, {"kv_indices", "--kv-indices"},
      {"kv_indptr", "--kv-indptr"}, {"batch_indices", "--batch-indices"}, {"slot_mapping", "--slot-mapping"},
      {"k_scale", "--k-scale"}, {"v_scale", "--v-scale"}, {"cache_positions", "--cache-positions"}};
  for (Diagnostic& d : errors)
    for (auto [name, flag] : flags)
      if (d.where.file == name) d.where.file = flag;
  return errors;
}

void run_apply(const ApplyOptions& o) {
  const RopeSpec spec = unwrap(load_spec(o.spec));
  check_flags(spec, o);
  check_outputs({{"--out-q", o.out_q}, {"--out-k", o.out_k}, {"--out", o.out}, {"--out-freqs", o.out_freqs},
                 {"--out-k-cache", o.out_k_cache}, {"--out-v-cache", o.out_v_cache}});
  const bool rope = spec.encoding == Encoding::Rope;
  runtime::ApplyRequest r;
  r.q = rope ? read_float_tensor(o.q, "q") : read_float_tensor(o.x, "x");
  r.k = optional_tensor(o.k, "k");
  if (!o.positions.empty()) {
    NpyInts ids = read_npy_ints(o.positions, "positions");
    r.positions = runtime::HostPositions{ids.shape, ids.values, ids.is_int64};
  }
  if (!o.cu_seqlens.empty()) r.cu_seqlens = read_npy_ints(o.cu_seqlens, "cu_seqlens").values;
  r.table = optional_tensor(o.table, "table");
  r.freqs = optional_tensor(o.freqs, "freqs");
  r.cos_sin_cache = cos_sin_cache(o.cos_sin_cache);
  r.saved_q = optional_tensor(o.saved_q, "saved_q");
  r.saved_k = optional_tensor(o.saved_k, "saved_k");
  r.backward = o.backward;
  r.offset = o.offset;
  r.seq_len = o.seq_len;
  r.target = o.target;
  r.out_k = !o.out_k.empty();
  r.v = optional_tensor(o.v, "v");
  if (spec.kv_cache.is_fp8()) {
    r.k_cache_codes = optional_codes(o.k_cache, "--k-cache", spec);
    r.v_cache_codes = optional_codes(o.v_cache, "--v-cache", spec);
  } else {
    r.k_cache = optional_tensor(o.k_cache, "k_cache");
    r.v_cache = optional_tensor(o.v_cache, "v_cache");
  }
  r.k_scale = o.k_scale, r.v_scale = o.v_scale;
  for (auto [path, role, into] : {std::tuple{&o.kv_indices, "kv_indices", &r.kv_indices},
                                  std::tuple{&o.kv_indptr, "kv_indptr", &r.kv_indptr},
                                  std::tuple{&o.batch_indices, "batch_indices", &r.batch_indices},
                                  std::tuple{&o.slot_mapping, "slot_mapping", &r.slot_mapping},
                                  std::tuple{&o.cache_positions, "cache_positions", &r.cache_positions}})
    if (!path->empty()) *into = read_npy_ints(*path, role).values;

  Result<runtime::ApplyResult> applied = runtime::apply_on_host(spec, r);
  if (!applied) applied = with_flags(applied.errors());
  const runtime::ApplyResult result = unwrap(std::move(applied));
  write_file_atomically(rope ? o.out_q : o.out, npy_bytes(result.out_q, r.q.shape));
  if (result.out_k) write_file_atomically(o.out_k, npy_bytes(*result.out_k, r.k->shape));
  if (result.d_freqs) write_file_atomically(o.out_freqs, npy_bytes(*result.d_freqs, r.freqs->shape));
  if (result.k_cache) write_file_atomically(o.out_k_cache, npy_bytes(*result.k_cache, r.k_cache->shape));
  if (result.v_cache) write_file_atomically(o.out_v_cache, npy_bytes(*result.v_cache, r.v_cache->shape));
  if (result.k_cache_codes) write_file_atomically(o.out_k_cache, npy_bytes(*result.k_cache_codes, r.k_cache_codes->shape));
  if (result.v_cache_codes) write_file_atomically(o.out_v_cache, npy_bytes(*result.v_cache_codes, r.v_cache_codes->shape));
}

}  // namespace

void add_apply_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("apply", "Run a spec on float32 .npy tensors: rotate q (and k), or add the encoding to x");
  auto o = std::make_shared<ApplyOptions>();
  cmd->add_option("SPEC", o->spec, "spec file (YAML)")->required();
  cmd->add_option("--q", o->q, "rope: queries, float32 .npy in the spec's layout (--backward: dL/d(out_q))");
  cmd->add_option("--k", o->k, "rope: keys (may have fewer heads than q; --backward: dL/d(out_k))");
  cmd->add_option("--x", o->x, "sinusoidal, learned: x [B,S,D] / [S,B,D] / [T,D]; alibi: scores [B,H,Sq,Sk]");
  auto* pos = cmd->add_option("--positions", o->positions,
                              "position ids, int32/int64 .npy: the layout's token dims or [S] (multi-axis: plus [n_axes])");
  cmd->add_option("--offset", o->offset, "first position for implicit positions (alibi: of the first query row)")->excludes(pos);
  cmd->add_option("--cu-seqlens", o->cu_seqlens, "thd / td: sequence starts, int32/int64 [n+1]");
  cmd->add_option("--table", o->table, "learned: the position table, float32 [max_len, dim]");
  cmd->add_option("--freqs", o->freqs, "frequency scheme runtime: inv_freq, float32 [rotary_dim / 2]");
  cmd->add_option("--cos-sin-cache", o->cos_sin_cache,
                  "frequency scheme table: float32 [max_pos, rotary_dim], row p = [cos | sin] of the pairs at position "
                  "p (as `rope-gen table` writes it)");
  cmd->add_option("--seq-len", o->seq_len, "run-time sequence length (default: max position + 1, as HF)");
  cmd->add_flag("--backward", o->backward, "rope: the gradients dL/dq (, dL/dk) of upstream gradients given as --q (, --k)");
  cmd->add_option("--saved-q", o->saved_q, "--backward with run-time frequencies: the forward's q");
  cmd->add_option("--saved-k", o->saved_k, "--backward with run-time frequencies: the forward's k");
  cmd->add_option("--target", o->target, "host, cuda, vulkan, or a Halide target string (e.g. host-cuda-cuda_capability_80)");
  cmd->add_option("--out-q", o->out_q, "rope: rotated q (.npy, float32; --backward: dL/dq)");
  cmd->add_option("--out-k", o->out_k, "rope: rotated k (.npy, float32; --backward: dL/dk)");
  cmd->add_option("--out", o->out, "sinusoidal, learned, alibi: the result (.npy, float32)");
  cmd->add_option("--out-freqs", o->out_freqs, "--backward with run-time frequencies: dL/d(inv_freq) (.npy, float32)");
  cmd->add_option("--v", o->v, "kv_cache specs: values [T, Hk, Dv], float32, appended to --v-cache");
  cmd->add_option("--k-cache", o->k_cache, "kv_cache specs: the k cache, float32 .npy in the kv_cache layout (fp8 caches: "
                  "uint8 codes), read, updated, written to --out-k-cache");
  cmd->add_option("--v-cache", o->v_cache, "kv_cache specs: the v cache (read, updated, written to --out-v-cache)");
  cmd->add_option("--kv-indices", o->kv_indices, "paged kv_cache: the pages of every request, int32/int64 .npy");
  cmd->add_option("--kv-indptr", o->kv_indptr, "paged kv_cache: [B + 1], request b's pages start at kv_indptr[b]");
  cmd->add_option("--batch-indices", o->batch_indices, "paged kv_cache: [T], each token's request (< 0: not appended)");
  cmd->add_option("--slot-mapping", o->slot_mapping, "contiguous kv_cache: [T], each token's slot (< 0: not appended)");
  cmd->add_option("--cache-positions", o->cache_positions,
                  "paged kv_cache: [T], where each token goes in its request's pages when that is not the position it "
                  "rotates by (default: --positions)");
  cmd->add_option("--out-k-cache", o->out_k_cache, "kv_cache specs: the updated k cache (.npy, float32; fp8: uint8 codes)");
  cmd->add_option("--out-v-cache", o->out_v_cache, "kv_cache specs: the updated v cache (.npy, float32; fp8: uint8 codes)");
  cmd->add_option("--k-scale", o->k_scale, "fp8 kv_cache: k_cache holds the codes of k / k_scale (default 1)");
  cmd->add_option("--v-scale", o->v_scale, "fp8 kv_cache: v_cache holds the codes of v / v_scale (default 1)");
  cmd->callback([o] { run_apply(*o); });
}

}  // namespace ropegen::cli
