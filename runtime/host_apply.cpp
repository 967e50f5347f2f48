#include "host_apply.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ropegen/runtime.h"
#include "runtime/device_call.h"
#include "runtime/device_probe.h"
#include "runtime/host_tensor.h"
#include "runtime/tensor_view.h"
#include "targets/target_names.h"

namespace ropegen::runtime {
namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  return s.size() == 1 ? fmt::format("({},)", s[0]) : fmt::format("({})", fmt::join(s, ", "));
}

int heads_dim(Layout l) { return l == Layout::BHSD ? 1 : l == Layout::THD ? 1 : 2; }

Diagnostic error(const std::string& what, std::string message) { return Diagnostic{{what, -1, -1}, std::move(message), {}}; }

// Token dims (the shape positions must have) of a tensor in this layout.
std::vector<int64_t> token_dims(Layout l, const std::vector<int64_t>& s) {
  switch (l) {
    case Layout::BSHD: return {s[0], s[1]};
    case Layout::BHSD: return {s[0], s[2]};
    case Layout::SBHD: return {s[0], s[1]};
    case Layout::THD: return {s[0]};
  }
  return {};
}

void check_tensor(const RopeSpec& spec, const HostTensor& t, std::vector<Diagnostic>& errors) {
  const size_t rank = spec.layout == Layout::THD ? 3 : 4;
  if (t.shape.size() != rank) {
    errors.push_back(error(t.name, fmt::format("{} has shape {} but layout {} needs {} dims {}", t.name,
                                               shape_str(t.shape), to_string(spec.layout), rank, layout_dims(spec.layout))));
    return;
  }
  const int64_t d = t.shape.back();
  if (d != spec.head_dim) {
    std::string hint;
    if (d * 2 == spec.head_dim)
      hint = fmt::format("; it looks like cos/sin-sized data (head_dim / 2 = {}): pass the whole head", d);
    else if (d == spec.rotary_dim)
      hint = "; it looks like only the rotary part: pass the whole head (rotary_offset/rotary_dim select the part)";
    std::vector<int64_t> want = t.shape;
    want.back() = spec.head_dim;
    errors.push_back(error(t.name, fmt::format("{} has shape {} but the spec's head_dim is {}: expected {} (last dim = "
                                               "head_dim){}",
                                               t.name, shape_str(t.shape), spec.head_dim, shape_str(want), hint)));
  }
  for (int64_t e : t.shape)
    if (e <= 0 || e > INT32_MAX) {
      errors.push_back(error(t.name, fmt::format("{} has shape {}: every dim must be in 1..2^31-1", t.name, shape_str(t.shape))));
      break;
    }
}

}  // namespace

std::vector<Diagnostic> check_call(const RopeSpec& spec, const ApplyRequest& r) {
  std::vector<Diagnostic> errors;
  check_tensor(spec, r.q, errors);
  if (r.k) {
    check_tensor(spec, *r.k, errors);
    if (errors.empty()) {
      std::vector<int64_t> qs = r.q.shape, ks = r.k->shape;
      qs[heads_dim(spec.layout)] = ks[heads_dim(spec.layout)] = 0;
      if (qs != ks) {
        std::vector<int64_t> want = r.q.shape;
        want[heads_dim(spec.layout)] = r.k->shape[heads_dim(spec.layout)];
        errors.push_back(error(r.k->name, fmt::format("k has shape {} but q has {}: k may differ from q only in its "
                                                      "number of heads (expected {})",
                                                      shape_str(r.k->shape), shape_str(r.q.shape), shape_str(want))));
      }
    }
  }
  if (!errors.empty()) return errors;
  const std::vector<int64_t> tokens = token_dims(spec.layout, r.q.shape);

  if (spec.positions == PositionsMode::Explicit) {
    if (!r.positions) {
      errors.push_back(error("positions", fmt::format("the spec has `positions: explicit`: pass position ids shaped {} "
                                                      "(or [{}] shared by the batch)",
                                                      shape_str(tokens), spec.layout == Layout::THD ? tokens[0] : tokens[1])));
      return errors;
    }
    const auto& p = *r.positions;
    const int64_t seq = spec.layout == Layout::SBHD ? tokens[0] : tokens.back();
    const bool shared = p.shape.size() == 1 && p.shape[0] == seq;
    if (p.shape != tokens && !shared)
      errors.push_back(error(p.name, fmt::format("positions have shape {} but q {} in layout {} needs {} (the token dims) "
                                                 "or ({},) shared by the batch",
                                                 shape_str(p.shape), shape_str(r.q.shape), to_string(spec.layout),
                                                 shape_str(tokens), seq)));
    const int64_t limit = p.is_int64 ? (int64_t{1} << 53) : INT32_MAX;
    for (int64_t v : p.values)
      if (v < 0 || v > limit) {
        errors.push_back(error(p.name, fmt::format("position id {} is out of range: ids must be in 0..{}", v, limit)));
        break;
      }
  } else if (r.positions) {
    errors.push_back(error(r.positions->name, "the spec has `positions: implicit` (offset + index); use --offset, or "
                                              "set `positions: explicit` in the spec to pass ids"));
  }
  if (r.offset < 0) errors.push_back(error("offset", fmt::format("offset ({}) must be >= 0", r.offset)));
  if (r.cu_seqlens) {
    const auto& cu = *r.cu_seqlens;
    if (spec.layout != Layout::THD)
      errors.push_back(error("cu_seqlens", "cu_seqlens only applies to layout thd (packed tokens)"));
    else if (cu.size() < 2 || cu.front() != 0 || cu.back() != tokens[0] || !std::is_sorted(cu.begin(), cu.end()))
      errors.push_back(error("cu_seqlens", fmt::format("cu_seqlens {} must start at 0, never decrease and end at T = {} "
                                                       "(the tokens in q)",
                                                       shape_str(cu), tokens[0])));
  }
  if (r.seq_len && *r.seq_len < 1) errors.push_back(error("seq_len", fmt::format("seq_len ({}) must be >= 1", *r.seq_len)));
  return errors;
}

int64_t default_seq_len(const RopeSpec& spec, const ApplyRequest& r) {
  const std::vector<int64_t> tokens = token_dims(spec.layout, r.q.shape);
  int64_t max_position = 0;
  if (r.positions) {
    for (int64_t v : r.positions->values) max_position = std::max(max_position, v);
  } else if (spec.layout == Layout::THD) {
    const std::vector<int64_t> cu = r.cu_seqlens.value_or(std::vector<int64_t>{0, tokens[0]});
    for (size_t i = 0; i + 1 < cu.size(); ++i) max_position = std::max(max_position, r.offset + cu[i + 1] - cu[i] - 1);
  } else {
    max_position = r.offset + (spec.layout == Layout::SBHD ? tokens[0] : tokens[1]) - 1;
  }
  return max_position + 1;
}

Result<ApplyResult> apply_on_host(const RopeSpec& spec, const ApplyRequest& r) {
  if (std::vector<Diagnostic> errors = check_call(spec, r); !errors.empty()) return errors;
  // GPU targets: the driver and a device must be there (a diagnostic, not Halide's abort).
  Result<Halide::Target> target = runnable_target(r.target);
  if (!target) return target.errors();

  const std::vector<int64_t> tokens = token_dims(spec.layout, r.q.shape);
  std::vector<int64_t> cu = r.cu_seqlens.value_or(std::vector<int64_t>{0, tokens[0]});
  ApplyResult result;
  result.seq_len = r.seq_len.value_or(default_seq_len(spec, r));

  lowering::KernelVariant variant;
  variant.with_k = r.k.has_value();
  variant.position_type = r.positions && r.positions->is_int64 ? Halide::Int(64) : Halide::Int(32);
  // Through the kernel cache: a later apply of this spec (in any process) skips compilation.
  Result<std::shared_ptr<Kernel>> kernel = Runtime::process().get(spec, variant, r.target);
  if (!kernel) return kernel.errors();

  HostStorage q = to_storage(r.q.data, spec.dtype);
  HostStorage out_q = q.empty_like();
  RopeCall call;
  call.q = logical_tensor(q.data(), q.type(), spec.layout, r.q.shape, dense_strides(r.q.shape));
  call.out_q = logical_tensor(out_q.data(), q.type(), spec.layout, r.q.shape, dense_strides(r.q.shape));
  std::optional<HostStorage> k, out_k;
  if (r.k) {
    k = to_storage(r.k->data, spec.dtype);
    out_k = k->empty_like();
    call.k = logical_tensor(k->data(), k->type(), spec.layout, r.k->shape, dense_strides(r.k->shape));
    call.out_k = logical_tensor(out_k->data(), k->type(), spec.layout, r.k->shape, dense_strides(r.k->shape));
  }
  std::vector<int32_t> pos32;
  std::vector<int64_t> pos64;
  if (r.positions) {
    void* ids = nullptr;
    if (r.positions->is_int64) pos64 = r.positions->values, ids = pos64.data();
    else pos32.assign(r.positions->values.begin(), r.positions->values.end()), ids = pos32.data();
    const int64_t batch = spec.layout == Layout::THD ? 1 : (spec.layout == Layout::SBHD ? tokens[1] : tokens[0]);
    call.positions = logical_positions(ids, variant.position_type, spec.layout, r.positions->shape, batch);
  }
  std::vector<int32_t> cu32(cu.begin(), cu.end());
  call.cu_seqlens = Halide::Buffer<int32_t>(cu32.data(), static_cast<int>(cu32.size()));
  call.offset = r.offset;
  call.seq_len = result.seq_len;
  try {
    kernel.value()->run(call);
  } catch (const DeviceError& e) {
    return Diagnostic{{"--target", -1, -1}, fmt::format("running on {} failed: {}", r.target, e.what()), {}};
  }

  result.out_q = out_q.to_float();
  if (out_k) result.out_k = out_k->to_float();
  return result;
}

}  // namespace ropegen::runtime
