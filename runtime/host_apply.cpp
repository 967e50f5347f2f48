#include "host_apply.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lowering/rope_algorithm.h"
#include "ropegen/position_limits.h"
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

Diagnostic error(const std::string& what, std::string message) { return Diagnostic{{what, -1, -1}, std::move(message), {}}; }

bool is_rope(const RopeSpec& spec) { return spec.encoding == Encoding::Rope; }

// Where the heads are in a shape of the layout (-1: no heads).
int heads_dim(Layout l) {
  switch (l) {
    case Layout::BSHD: case Layout::SBHD: return 2;
    case Layout::BHSD: case Layout::THD: return 1;
    default: return -1;
  }
}

// Token dims (the shape positions must have) of a tensor in this layout.
std::vector<int64_t> token_dims(Layout l, const std::vector<int64_t>& s) {
  switch (l) {
    case Layout::BSHD: case Layout::SBHD: case Layout::BSD: case Layout::SBD: return {s[0], s[1]};
    case Layout::BHSD: return {s[0], s[2]};
    case Layout::THD: case Layout::TD: return {s[0]};
  }
  return {};
}

// Tokens of one sequence: what [S] shared positions have.
int64_t sequence_tokens(Layout l, const std::vector<int64_t>& tokens) {
  return l == Layout::SBHD || l == Layout::SBD || tokens.size() == 1 ? tokens[0] : tokens[1];
}

int64_t batch_of(Layout l, const std::vector<int64_t>& tokens) {
  if (tokens.size() == 1) return 1;
  return l == Layout::SBHD || l == Layout::SBD ? tokens[1] : tokens[0];
}

// The last dim a tensor of the spec has, and what it is called.
std::pair<int64_t, const char*> row_dim(const RopeSpec& spec) {
  switch (spec.encoding) {
    case Encoding::Rope: return {spec.head_dim, "head_dim"};
    case Encoding::Sinusoidal: case Encoding::Learned: return {spec.dim, "dim"};
    case Encoding::Alibi: return {-1, "Sk"};  // any key count
  }
  return {0, ""};
}

void check_tensor(const RopeSpec& spec, const HostTensor& t, std::vector<Diagnostic>& errors) {
  const Layout layout = lowering::tensor_layout(spec);
  const size_t rank = layout == Layout::THD || layout == Layout::BSD || layout == Layout::SBD ? 3
                      : layout == Layout::TD                                                  ? 2
                                                                                              : 4;
  if (t.shape.size() != rank) {
    errors.push_back(error(t.name, fmt::format("{} has shape {} but {} needs {} dims {}", t.name, shape_str(t.shape),
                                               spec.encoding == Encoding::Alibi ? "alibi (attention scores)"
                                                                                : fmt::format("layout {}", to_string(layout)),
                                               rank, spec.encoding == Encoding::Alibi ? "[B, H, Sq, Sk]" : layout_dims(layout))));
    return;
  }
  const auto [want_d, d_name] = row_dim(spec);
  const int64_t d = t.shape.back();
  if (want_d > 0 && d != want_d) {
    std::string hint;
    if (is_rope(spec) && d * 2 == spec.head_dim)
      hint = fmt::format("; it looks like cos/sin-sized data (head_dim / 2 = {}): pass the whole head", d);
    else if (is_rope(spec) && d == spec.rotary_dim)
      hint = "; it looks like only the rotary part: pass the whole head (rotary_offset/rotary_dim select the part)";
    std::vector<int64_t> want = t.shape;
    want.back() = want_d;
    errors.push_back(error(t.name, fmt::format("{} has shape {} but the spec's {} is {}: expected {} (last dim = {}){}",
                                               t.name, shape_str(t.shape), d_name, want_d, shape_str(want), d_name, hint)));
  }
  if (spec.encoding == Encoding::Alibi && t.shape[1] != spec.num_heads) {
    std::vector<int64_t> want = t.shape;
    want[1] = spec.num_heads;
    errors.push_back(error(t.name, fmt::format("{} has shape {} but the spec has num_heads {}: expected {} ([B, H, Sq, "
                                               "Sk], H = num_heads)",
                                               t.name, shape_str(t.shape), spec.num_heads, shape_str(want))));
  }
  for (int64_t e : t.shape)
    if (e < 0 || e > INT32_MAX) {  // 0: an empty tensor, nothing to do
      errors.push_back(error(t.name, fmt::format("{} has shape {}: every dim must be in 0..2^31-1", t.name, shape_str(t.shape))));
      break;
    }
}

void check_k(const RopeSpec& spec, const ApplyRequest& r, std::vector<Diagnostic>& errors) {
  check_tensor(spec, *r.k, errors);
  if (!errors.empty()) return;
  const int hd = heads_dim(spec.layout);
  std::vector<int64_t> qs = r.q.shape, ks = r.k->shape;
  qs[hd] = ks[hd] = 0;
  if (qs == ks) return;
  std::vector<int64_t> want = r.q.shape;
  want[hd] = r.k->shape[hd];
  errors.push_back(error(r.k->name, fmt::format("k has shape {} but q has {}: k may differ from q only in its number of "
                                                "heads (expected {})",
                                                shape_str(r.k->shape), shape_str(r.q.shape), shape_str(want))));
}

void check_positions(const RopeSpec& spec, const ApplyRequest& r, const std::vector<int64_t>& tokens,
                     std::vector<Diagnostic>& errors) {
  const Layout layout = lowering::tensor_layout(spec);
  const int64_t seq = sequence_tokens(layout, tokens);
  // Multi-axis ids carry a trailing axis dim.
  std::vector<int64_t> want = tokens, shared = {seq};
  std::string axes_note;
  if (spec.axes.enabled()) {
    want.push_back(spec.axes.count());
    shared.push_back(spec.axes.count());
    axes_note = fmt::format(" plus a trailing dim of {} (one id per axis)", spec.axes.count());
  }
  if (!r.positions) {
    errors.push_back(error("positions", fmt::format("the spec has `positions: explicit`: pass position ids shaped {} (or "
                                                    "{} shared by the batch)",
                                                    shape_str(want), shape_str(shared))));
    return;
  }
  const HostPositions& p = *r.positions;
  if (p.shape != want && p.shape != shared)
    errors.push_back(error(p.name, fmt::format("positions have shape {} but {} {} in layout {} needs {} (the token "
                                               "dims{}) or {} shared by the batch",
                                               shape_str(p.shape), r.q.name, shape_str(r.q.shape), to_string(layout),
                                               shape_str(want), axes_note, shape_str(shared))));
  // The kernel reads int32 ids in their own width.
  if (!p.is_int64)
    for (int64_t v : p.values)
      if (v < INT32_MIN || v > INT32_MAX) {
        errors.push_back(error(p.name, fmt::format("position id {} does not fit int32 ids; pass them as int64", v)));
        break;
      }
}

struct PositionRange {
  int64_t first = 0, last = 0;  // the smallest and largest position read
};

// Explicit ids, or offset + index along the longest sequence (thd / td:
// restarting at every cu_seqlens start; alibi: the query rows). The call's
// shapes and cu_seqlens are already valid.
Result<PositionRange> position_range(const RopeSpec& spec, const ApplyRequest& r) {
  if (r.positions) {
    const std::vector<int64_t>& ids = r.positions->values;
    if (ids.empty()) return PositionRange{};
    const auto [lo, hi] = std::minmax_element(ids.begin(), ids.end());
    return PositionRange{*lo, *hi};
  }
  const Layout layout = lowering::tensor_layout(spec);
  const std::vector<int64_t> tokens = token_dims(layout, r.q.shape);
  int64_t longest = sequence_tokens(layout, tokens);
  if (layout == Layout::THD || layout == Layout::TD) {
    const std::vector<int64_t> cu = r.cu_seqlens.value_or(std::vector<int64_t>{0, tokens[0]});
    longest = 0;
    for (size_t i = 0; i + 1 < cu.size(); ++i) longest = std::max(longest, cu[i + 1] - cu[i]);
  }
  int64_t last = r.offset;
  if (longest > 0 && __builtin_add_overflow(r.offset, longest - 1, &last))
    return error("offset", fmt::format("offset {} + {} tokens overflows int64", r.offset, longest));
  return PositionRange{r.offset, last};
}

// One check for every encoding: ids, offset + index, ALiBi query rows.
void check_position_range(const RopeSpec& spec, const ApplyRequest& r, std::vector<Diagnostic>& errors) {
  const Result<PositionRange> range = position_range(spec, r);
  if (!range) {
    errors.insert(errors.end(), range.errors().begin(), range.errors().end());
    return;
  }
  const char* what = r.positions ? "position id" : "position (offset + index)";
  if (range->first < 0)
    errors.push_back(error(r.positions ? r.positions->name : "offset",
                           fmt::format("{} {} is negative: positions must be in 0..2^53", what, range->first)));
  else if (range->last > kMaxPosition)
    errors.push_back(error(r.positions ? r.positions->name : "offset",
                           fmt::format("{} {} is out of range: positions must be in 0..2^53 ({}){}", what, range->last,
                                       kMaxPosition, r.positions ? "" : fmt::format("; the offset is {}", r.offset))));
}

void check_table(const RopeSpec& spec, const ApplyRequest& r, std::vector<Diagnostic>& errors) {
  if (spec.encoding != Encoding::Learned) {
    if (r.table) errors.push_back(error("table", fmt::format("--table is for `encoding: learned`; this spec is {}",
                                                             to_string(spec.encoding))));
    return;
  }
  if (!r.table) {
    errors.push_back(error("table", fmt::format("`encoding: learned` adds rows of a table: pass it shaped (max_len, {})",
                                                spec.dim)));
    return;
  }
  const HostTensor& t = *r.table;
  if (t.shape.size() != 2 || t.shape[1] != spec.dim || t.shape[0] < 1 || t.shape[0] > INT32_MAX) {
    errors.push_back(error(t.name, fmt::format("table has shape {} but must be (max_len, {}) (dim = {})",
                                               shape_str(t.shape), spec.dim, spec.dim)));
    return;
  }
  if (const int64_t p = position_range(spec, r)->last; p >= t.shape[0])
    errors.push_back(error(t.name, fmt::format("position {} is outside the table: it has {} rows (positions 0..{}); "
                                               "pass a longer table or smaller positions",
                                               p, t.shape[0], t.shape[0] - 1)));
}

void check_freqs(const RopeSpec& spec, const ApplyRequest& r, std::vector<Diagnostic>& errors) {
  const bool runtime = is_rope(spec) && spec.frequency.scheme == FrequencyScheme::Runtime;
  if (!runtime) {
    if (r.freqs) errors.push_back(error("freqs", "--freqs is for specs with `frequency: {scheme: runtime}`"));
    return;
  }
  const std::vector<int64_t> want = {spec.num_pairs()};
  if (!r.freqs) {
    errors.push_back(error("freqs", fmt::format("the spec has `frequency: {{scheme: runtime}}`: pass inv_freq shaped {}",
                                                shape_str(want))));
  } else if (r.freqs->shape != want) {
    errors.push_back(error(r.freqs->name, fmt::format("freqs have shape {} but the spec needs {} (rotary_dim / 2)",
                                                      shape_str(r.freqs->shape), shape_str(want))));
  }
}

void check_backward(const RopeSpec& spec, const ApplyRequest& r, std::vector<Diagnostic>& errors) {
  const bool saved = r.saved_q || r.saved_k;
  if (r.backward && !is_rope(spec))
    errors.push_back(error("backward", fmt::format("backward kernels are for rope specs; this spec is {}",
                                                   to_string(spec.encoding))));
  const bool gradient = r.backward && spec.frequency.scheme == FrequencyScheme::Runtime;
  if (!gradient) {
    if (saved) errors.push_back(error("saved", "saved forward inputs are only read by the backward of a spec with "
                                               "`frequency: {scheme: runtime}` (for dL/d(inv_freq))"));
    return;
  }
  auto check_saved = [&](const std::optional<HostTensor>& s, const std::optional<HostTensor>& like, const char* name) {
    if (!like) {
      if (s) errors.push_back(error(s->name, fmt::format("{} is given without the gradient it belongs to", name)));
      return;
    }
    if (!s) errors.push_back(error(name, fmt::format("the backward of run-time frequencies needs the forward input {} "
                                                     "(shaped {}) for dL/d(inv_freq)",
                                                     name, shape_str(like->shape))));
    else if (s->shape != like->shape)
      errors.push_back(error(s->name, fmt::format("{} has shape {} but its gradient has {}: they must match", name,
                                                  shape_str(s->shape), shape_str(like->shape))));
  };
  check_saved(r.saved_q, r.q, "saved_q");
  check_saved(r.saved_k, r.k, "saved_k");
}

}  // namespace

std::vector<Diagnostic> check_call(const RopeSpec& spec, const ApplyRequest& r) {
  std::vector<Diagnostic> errors;
  check_tensor(spec, r.q, errors);
  if (r.k) {
    if (!is_rope(spec)) errors.push_back(error(r.k->name, "k is for rope specs; this encoding takes one tensor (x)"));
    else check_k(spec, r, errors);
  }
  if (!errors.empty()) return errors;
  const Layout layout = lowering::tensor_layout(spec);
  const std::vector<int64_t> tokens = token_dims(layout, r.q.shape);

  if (spec.positions == PositionsMode::Explicit && spec.encoding != Encoding::Alibi) {
    check_positions(spec, r, tokens, errors);
  } else if (r.positions) {
    errors.push_back(error(r.positions->name,
                           spec.encoding == Encoding::Alibi
                               ? "alibi takes no position ids: query row r sits at offset + r, key j at j (use --offset)"
                               : "the spec has `positions: implicit` (offset + index); use --offset, or set `positions: "
                                 "explicit` in the spec to pass ids"));
  }
  if (r.cu_seqlens) {
    const auto& cu = *r.cu_seqlens;
    if (layout != Layout::THD && layout != Layout::TD)
      errors.push_back(error("cu_seqlens", "cu_seqlens only applies to packed layouts (thd, td)"));
    else if (cu.size() < 2 || cu.front() != 0 || cu.back() != tokens[0] || !std::is_sorted(cu.begin(), cu.end()))
      errors.push_back(error("cu_seqlens", fmt::format("cu_seqlens {} must start at 0, never decrease and end at T = {} "
                                                       "(the tokens in {})",
                                                       shape_str(cu), tokens[0], r.q.name)));
  }
  if (r.seq_len && *r.seq_len < 1) errors.push_back(error("seq_len", fmt::format("seq_len ({}) must be >= 1", *r.seq_len)));
  if (errors.empty()) check_position_range(spec, r, errors);
  if (errors.empty()) check_table(spec, r, errors);
  check_freqs(spec, r, errors);
  check_backward(spec, r, errors);
  return errors;
}

int64_t default_seq_len(const RopeSpec& spec, const ApplyRequest& r) { return position_range(spec, r)->last + 1; }

namespace {

// A float32 host tensor in the spec's storage type, and its views.
struct Staged {
  HostStorage storage;
  TensorView view;
};

Staged stage(const RopeSpec& spec, const HostTensor& t) {
  HostStorage s = to_storage(t.data, spec.dtype);
  const TensorView view = logical_tensor(s.data(), s.type(), lowering::tensor_layout(spec), t.shape, dense_strides(t.shape));
  return {std::move(s), view};
}

Staged stage_output(const RopeSpec& spec, const Staged& like, const HostTensor& t) {
  HostStorage s = like.storage.empty_like();
  const TensorView view = logical_tensor(s.data(), s.type(), lowering::tensor_layout(spec), t.shape, dense_strides(t.shape));
  return {std::move(s), view};
}

}  // namespace

Result<ApplyResult> apply_on_host(const RopeSpec& spec, const ApplyRequest& r) {
  if (std::vector<Diagnostic> errors = check_call(spec, r); !errors.empty()) return errors;
  // GPU targets: the driver and a device must be there (a diagnostic, not Halide's abort).
  Result<Halide::Target> target = runnable_target(r.target);
  if (!target) return target.errors();

  const Layout layout = lowering::tensor_layout(spec);
  const std::vector<int64_t> tokens = token_dims(layout, r.q.shape);
  std::vector<int64_t> cu = r.cu_seqlens.value_or(std::vector<int64_t>{0, tokens[0]});
  ApplyResult result;
  result.seq_len = r.seq_len.value_or(default_seq_len(spec, r));

  lowering::KernelVariant variant;
  variant.with_k = r.k.has_value();
  variant.position_type = r.positions && r.positions->is_int64 ? Halide::Int(64) : Halide::Int(32);
  variant.backward = r.backward;
  // Through the kernel cache: a later apply of this spec (in any process) skips compilation.
  Result<std::shared_ptr<Kernel>> kernel = Runtime::process().get(spec, variant, r.target);
  if (!kernel) return kernel.errors();

  RopeCall call;
  const Staged q = stage(spec, r.q), out_q = stage_output(spec, q, r.q);
  call.q = q.view, call.out_q = out_q.view;
  std::optional<Staged> k, out_k, saved_q, saved_k;
  if (r.k) {
    k = stage(spec, *r.k), out_k = stage_output(spec, *k, *r.k);
    call.k = k->view, call.out_k = out_k->view;
  }
  if (r.saved_q) saved_q = stage(spec, *r.saved_q), call.saved_q = saved_q->view;
  if (r.saved_k) saved_k = stage(spec, *r.saved_k), call.saved_k = saved_k->view;
  std::vector<int32_t> pos32;
  std::vector<int64_t> pos64;
  if (r.positions) {
    void* ids = nullptr;
    if (r.positions->is_int64) pos64 = r.positions->values, ids = pos64.data();
    else pos32.assign(r.positions->values.begin(), r.positions->values.end()), ids = pos32.data();
    call.positions = logical_positions(ids, variant.position_type, layout, r.positions->shape, batch_of(layout, tokens),
                                       spec.axes.count());
  }
  std::optional<HostStorage> table;
  if (r.table) {
    table = to_storage(r.table->data, spec.dtype);
    call.table = Halide::Buffer<>(table->type(), table->data(), {static_cast<int>(spec.dim), static_cast<int>(r.table->shape[0])});
  }
  std::vector<float> freqs, d_freqs;
  if (r.freqs) {
    freqs = r.freqs->data;
    call.freqs = Halide::Buffer<float>(freqs.data(), static_cast<int>(freqs.size()));
    if (r.backward) {
      d_freqs.assign(freqs.size(), 0.0f);
      call.d_freqs = Halide::Buffer<float>(d_freqs.data(), static_cast<int>(d_freqs.size()));
    }
  }
  std::vector<int32_t> cu32(cu.begin(), cu.end());
  call.cu_seqlens = Halide::Buffer<int32_t>(cu32.data(), static_cast<int>(cu32.size()));
  call.offset = r.offset;
  call.seq_len = result.seq_len;
  try {
    kernel.value()->run(call);
  } catch (const DeviceError& e) {
    return Diagnostic{{"--target", -1, -1}, fmt::format("running on {} failed: {}", r.target, e.what()), {}};
  } catch (const Halide::RuntimeError& e) {
    return Diagnostic{{"--target", -1, -1}, fmt::format("running the kernel on {} failed: {}", r.target, e.what()), {}};
  } catch (const std::invalid_argument& e) {  // tensors no kernel can take (runtime/call_parts.h)
    return Diagnostic{{r.q.name, -1, -1}, e.what(), {}};
  }

  result.out_q = out_q.storage.to_float();
  if (out_k) result.out_k = out_k->storage.to_float();
  if (call.d_freqs.defined()) result.d_freqs = d_freqs;
  return result;
}

}  // namespace ropegen::runtime
