// rope-gen apply SPEC --q Q.npy [--k K.npy] [--positions P.npy | --offset N]
//   [--cu-seqlens C.npy] [--seq-len N] [--target T] --out-q OQ.npy [--out-k OK.npy]
#include <cstring>
#include <iostream>

#include <fmt/format.h>

#include "atomic_file.h"
#include "cli_error.h"
#include "commands.h"
#include "npy.h"
#include "ropegen/spec_io.h"
#include "runtime/host_apply.h"

namespace ropegen::cli {
namespace {

struct ApplyOptions {
  std::string spec, q, k, positions, cu_seqlens, out_q, out_k, target = "host";
  int64_t offset = 0;
  std::optional<int64_t> seq_len;
};

runtime::HostTensor read_float_tensor(const std::string& path, const char* role) {
  const NpyArray a = read_npy(path);
  if (a.dtype != "<f4")
    fail(fmt::format("{} ({}) has dtype {}; {} must be float32 (np.float32), in the spec's layout; it is converted "
                     "to the spec's dtype for the kernel",
                     role, path, a.dtype, role));
  runtime::HostTensor t{role, a.shape, std::vector<float>(a.elements())};
  std::memcpy(t.data.data(), a.data.data(), a.data.size());
  return t;
}

void run_apply(const ApplyOptions& o) {
  const RopeSpec spec = unwrap(load_spec(o.spec));
  runtime::ApplyRequest r;
  r.q = read_float_tensor(o.q, "q");
  if (!o.k.empty()) r.k = read_float_tensor(o.k, "k");
  if (!o.positions.empty()) {
    NpyInts ids = read_npy_ints(o.positions, "positions");
    r.positions = runtime::HostPositions{"positions", ids.shape, ids.values, ids.is_int64};
  }
  if (!o.cu_seqlens.empty()) r.cu_seqlens = read_npy_ints(o.cu_seqlens, "cu_seqlens").values;
  if (o.k.empty() != o.out_k.empty()) fail("--k and --out-k go together");
  r.offset = o.offset;
  r.seq_len = o.seq_len;
  r.target = o.target;

  const runtime::ApplyResult result = unwrap(runtime::apply_on_host(spec, r));
  write_file_atomically(o.out_q, npy_bytes(result.out_q, r.q.shape));
  if (result.out_k) write_file_atomically(o.out_k, npy_bytes(*result.out_k, r.k->shape));
}

}  // namespace

void add_apply_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("apply", "Rotate q (and k) stored as float32 .npy in the spec's layout");
  auto o = std::make_shared<ApplyOptions>();
  cmd->add_option("SPEC", o->spec, "spec file (YAML)")->required();
  cmd->add_option("--q", o->q, "queries, float32 .npy in the spec's layout")->required();
  cmd->add_option("--k", o->k, "keys (may have fewer heads than q)");
  auto* pos = cmd->add_option("--positions", o->positions, "position ids, int32/int64 .npy: the layout's token dims or [S]");
  cmd->add_option("--offset", o->offset, "first position for implicit positions (decode with a KV cache)")->excludes(pos);
  cmd->add_option("--cu-seqlens", o->cu_seqlens, "thd: sequence starts, int32/int64 [n+1]");
  cmd->add_option("--seq-len", o->seq_len, "run-time sequence length (default: max position + 1, as HF)");
  cmd->add_option("--target", o->target, "host, cuda, vulkan, or a Halide target string (e.g. host-cuda-cuda_capability_80)");
  cmd->add_option("--out-q", o->out_q, "rotated q (.npy, float32)")->required();
  cmd->add_option("--out-k", o->out_k, "rotated k (.npy, float32)");
  cmd->callback([o] { run_apply(*o); });
}

}  // namespace ropegen::cli
