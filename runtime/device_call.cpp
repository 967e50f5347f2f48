#include "device_call.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <numeric>

#include <fmt/format.h>

#include "call/contract.h"
#include "call/parts.h"
#include "runtime/cuda_context.h"

namespace ropegen::runtime {
namespace {

using abi::Arg;

// Tokens [s0, s0 + ns) of batches [b0, b0 + nb), staged as `padded` tokens.
struct Part {
  int b0, nb, s0, ns, padded;
};

// A dense staged buffer: extents innermost first; mins of the last two
// dims (tokens, batches) are the part's, so coordinates stay the caller's.
Halide::Buffer<> staged(Halide::Type type, std::vector<int> extents, std::vector<int> mins) {
  Halide::Buffer<> b(type, extents);
  b.set_min(mins);
  return b;
}

// Zeroes the padding tokens [first, extent) of every batch of a dense
// staged buffer whose last two dims are (tokens, batches): their outputs
// are dropped, but nothing uninitialised should reach a kernel.
void zero_padding(Halide::Buffer<>& b, int first_padded) {
  const int t = b.dimensions() - 2;
  const int64_t token_bytes = static_cast<int64_t>(b.dim(t).stride()) * b.type().bytes();
  const int pad = b.dim(t).extent() - first_padded;
  if (pad <= 0) return;
  for (int i = 0; i < b.dim(t + 1).extent(); ++i)
    std::memset(static_cast<uint8_t*>(b.data()) + i * b.dim(t + 1).stride() * int64_t{b.type().bytes()} +
                    first_padded * token_bytes,
                0, pad * token_bytes);
}

// Row length of a staged input: a multiple of 8 elements (16 bytes and more).
int padded_row(int head_dim) { return (head_dim + 7) / 8 * 8; }

// The dims outside the rotary range, as (first, count) pairs.
call::DimRanges pass_ranges(const RopeSpec& spec) {
  return call::pass_through_ranges(call::call_contract(spec));
}

Halide::Buffer<> rotary_view(const Halide::Buffer<>& logical, const RopeSpec& spec) {
  return wrap(call::rotary_view(unwrap(logical), call::call_contract(spec)));
}

Halide::Buffer<> dim_range_view(const Halide::Buffer<>& logical, int first, int count) {
  return wrap(call::dim_range_view(unwrap(logical), first, count));
}

// What one token of every staged buffer weighs, per batch, and the
// device's limits on a part.
struct Sizes {
  std::vector<int64_t> token_bytes;
  int64_t multiple;  // every buffer's bytes a multiple of this
  int64_t limit;     // and at most this
  int64_t max_tokens, max_batch;  // per launch (DeviceInfo's block limits)

  int64_t padded_tokens(int64_t tokens, int nb) const {
    int64_t step = 1;
    for (int64_t t : token_bytes) step = std::max(step, multiple / std::gcd(t * nb, multiple));
    return (tokens + step - 1) / step * step;
  }
  bool fits(int64_t tokens, int nb) const {
    const int64_t padded = padded_tokens(tokens, nb);
    if (padded > max_tokens || nb > max_batch) return false;
    for (int64_t t : token_bytes)
      if (t * padded * nb > limit) return false;
    return true;
  }
};

std::vector<Part> plan_parts(const Sizes& sizes, int S, int B) {
  std::vector<Part> parts;
  auto add = [&](int b0, int nb, int s0, int ns) {
    parts.push_back({b0, nb, s0, ns, static_cast<int>(sizes.padded_tokens(ns, nb))});
  };
  if (sizes.fits(S, B)) {
    add(0, B, 0, S);
  } else if (sizes.fits(S, 1)) {
    int nb = 1;
    while (nb * 2 <= B && sizes.fits(S, nb * 2)) nb *= 2;
    for (int b0 = 0; b0 < B; b0 += nb) add(b0, std::min(nb, B - b0), 0, S);
  } else {
    int ns = 1;
    while (ns * 2 <= S && sizes.fits(ns * 2, 1)) ns *= 2;
    if (!sizes.fits(ns, 1))
      throw DeviceError(fmt::format("one token of these tensors spans more than the {} bytes the device allows one "
                                    "kernel argument to span",
                                    sizes.limit));
    for (int b = 0; b < B; ++b)
      for (int s0 = 0; s0 < S; s0 += ns) add(b, 1, s0, std::min(ns, S - s0));
  }
  return parts;
}

void check(int halide_error_code, const char* what) {
  if (halide_error_code != 0)
    throw DeviceError(fmt::format("copying {} from the device failed (Halide error {})", what, halide_error_code));
}

// A staged output and where it goes in the caller's tensors.
struct Copy {
  Halide::Buffer<> staged, view;
  int shift;  // added to the staged dim 0 coordinates to get the view's
};

class PartRun {
 public:
  PartRun(const RopeSpec& spec, const lowering::KernelVariant& variant, const DevicePart& call, const Part& p)
      : spec_(spec), variant_(variant), call_(call), p_(p) {}

  // `whole`: the call's arguments that are not split (cu_seqlens, table,
  // freqs, cos_sin_cache), staged once for every part.
  void run(const DevicePipelines& pipelines, const PipelineArguments& whole) {
    const bool rope = spec_.encoding == Encoding::Rope;
    PipelineArguments a = whole;
    // The part's rows and ids (kv_cache specs read k without out_k).
    for (Arg arg : abi::kTensorArgs) {
      const abi::ArgumentInfo& row = abi::info(arg);
      if (row.direction != abi::Direction::In || !call_[arg].defined()) continue;
      if (row.kind == abi::ArgKind::Rows)
        a[arg] = gather(call_[arg]);
      else if (row.kind == abi::ArgKind::Ids)
        a[arg] = gather_positions(call_[arg]);
    }
    a.scalars = call_.scalars;
    // Rope kernels write the rotary view, but with qk_norm or fp8 outputs
    // whole rows (staged in the outputs' type: fp8 codes are uint8).
    const bool rotary = call::writes_rotary_view(call::call_contract(spec_));
    auto out_stage = [&](Arg in, Arg out) {
      return rotary ? rotary_stage(call_[in], call_[out].type()) : row_stage(call_[in], call_[out].type());
    };
    a[Arg::OutQ] = out_stage(Arg::Q, Arg::OutQ);
    if (variant_.with_k) a[Arg::OutK] = out_stage(Arg::K, Arg::OutK);
    // output_quant: q's group scales, whole rows of their own (head_dim / group).
    if (call_[Arg::OutScales].defined()) a[Arg::OutScales] = row_stage(call_[Arg::OutScales], Halide::Float(32));
    // The summed gradients of this part's rows (computed on the device), summed below.
    for (Arg arg : abi::kTensorArgs)
      if (abi::is_summed_gradient(arg) && call_[arg].defined())
        a[arg] = Halide::Buffer<float>(call_[arg].dim(0).extent());
    pipelines.rope(a);

    std::vector<Copy> copies;
    copies.push_back({a[Arg::OutQ], rotary ? rotary_view(call_[Arg::OutQ], spec_) : call_[Arg::OutQ], 0});
    if (variant_.with_k)
      copies.push_back({a[Arg::OutK], rotary ? rotary_view(call_[Arg::OutK], spec_) : call_[Arg::OutK], 0});
    if (call_[Arg::OutScales].defined()) copies.push_back({a[Arg::OutScales], call_[Arg::OutScales], 0});
    if (rope) add_pass_through(pipelines, a[Arg::Q], call_[Arg::Q], call_[Arg::OutQ], copies);
    if (rope && variant_.with_k) add_pass_through(pipelines, a[Arg::K], call_[Arg::K], call_[Arg::OutK], copies);

    // Device memory is freed before any other handle to a staged buffer
    // exists: Halide's buffers share device allocations by reference count.
    for (Arg arg : abi::kTensorArgs) {
      const abi::ArgKind kind = abi::info(arg).kind;
      const bool staged_here = kind == abi::ArgKind::Rows || kind == abi::ArgKind::Ids;
      if (staged_here && abi::info(arg).direction == abi::Direction::In && a[arg].defined())
        a[arg].device_free(pipelines.context);
    }
    for (Copy& c : copies) {
      check(c.staged.copy_to_host(pipelines.context), "a result");
      c.staged.device_free(pipelines.context);
      c.view.copy_from(c.shift ? c.staged.translated(0, c.shift) : c.staged);
    }
    for (Arg arg : abi::kTensorArgs) {
      if (!abi::is_summed_gradient(arg) || !a[arg].defined()) continue;
      check(a[arg].copy_to_host(), abi::info(arg).name);
      a[arg].device_free();
      Halide::Buffer<float> part(a[arg]), total(call_[arg]);
      total.for_each_element([&](int i) { total(i) += part(i); });
    }
  }

 private:
  std::vector<int> token_mins(int leading_dims) const {
    std::vector<int> mins(leading_dims, 0);
    mins.push_back(p_.s0);
    mins.push_back(p_.b0);
    return mins;
  }

  // The part's rows of a (d, h, s, b) input, dense but for rows padded to
  // 16 bytes: the GPU schedule promises aligned rows (wide loads).
  Halide::Buffer<> gather(const Halide::Buffer<>& in) {
    Halide::Buffer<> b = staged(in.type(), {padded_row(in.dim(0).extent()), in.dim(1).extent(), p_.padded, p_.nb},
                                token_mins(2));
    b.copy_from(in);
    zero_padding(b, p_.ns);
    return b;
  }

  // (s, b), or (axis, s, b) for multi-axis ids.
  Halide::Buffer<> gather_positions(const Halide::Buffer<>& in) {
    const int leading = in.dimensions() - 2;
    std::vector<int> extents;
    for (int d = 0; d < leading; ++d) extents.push_back(in.dim(d).extent());
    extents.insert(extents.end(), {p_.padded, p_.nb});
    Halide::Buffer<> b = staged(in.type(), extents, token_mins(leading));
    b.copy_from(in);
    zero_padding(b, p_.ns);
    return b;
  }

  // The kernel's dense output of `type` for the rotary part of a tensor
  // like `like`, dims as rotary_view's: half (r, m, h, s, b), interleaved
  // (m, r, h, s, b).
  Halide::Buffer<> rotary_stage(const Halide::Buffer<>& like, Halide::Type type) const {
    const int half = spec_.num_pairs();
    const bool interleaved = spec_.output_pairing == Pairing::Interleaved;
    return staged(type, {interleaved ? 2 : half, interleaved ? half : 2, like.dim(1).extent(), p_.padded, p_.nb},
                  token_mins(3));
  }

  // The kernel's dense output of `type` for a whole (d, h, s, b) tensor
  // like `like` (the single-tensor encodings, whole-row rope outputs).
  Halide::Buffer<> row_stage(const Halide::Buffer<>& like, Halide::Type type) const {
    return staged(type, {like.dim(0).extent(), like.dim(1).extent(), p_.padded, p_.nb}, token_mins(2));
  }

  // Out of place, the dims outside the rotary range are copied on the
  // device too (lowering::PassThroughCopy), from the staged input.
  void add_pass_through(const DevicePipelines& pipelines, const Halide::Buffer<>& staged_in, const Halide::Buffer<>& in,
                        const Halide::Buffer<>& out,
                        std::vector<Copy>& copies) {
    if (in.data() == out.data()) return;  // in place: already there
    for (auto [first, count] : pass_ranges(spec_)) {
      Halide::Buffer<> stage = staged(in.type(), {count, in.dim(1).extent(), p_.padded, p_.nb}, token_mins(2));
      stage.translate(0, first);  // the same dims of the staged input
      pipelines.pass({staged_in, stage});
      copies.push_back({stage, dim_range_view(out, first, count), -first});
    }
  }

  const RopeSpec& spec_;
  const lowering::KernelVariant& variant_;
  const DevicePart& call_;
  Part p_;
};

Sizes sizes_of(const RopeSpec& spec, const lowering::KernelVariant& variant, const DevicePart& call,
               const DeviceInfo& device) {
  const Halide::Buffer<>&q = call[Arg::Q], &k = call[Arg::K], &v = call[Arg::V], &positions = call[Arg::Positions];
  const int64_t e = q.type().bytes();
  Sizes s{{}, device.buffer_size_multiple, device.max_buffer_bytes, device.max_token_blocks, device.max_batch_blocks};
  if (spec.encoding != Encoding::Rope) {
    const int64_t d = q.dim(0).extent(), h = q.dim(1).extent();
    s.token_bytes = {padded_row(static_cast<int>(d)) * h * e, d * h * e};  // input, output
  }
  std::vector<int64_t> heads;
  if (spec.encoding == Encoding::Rope) heads.push_back(q.dim(1).extent());
  if (variant.with_k) heads.push_back(k.dim(1).extent());
  // k read into a cache only, and v: their staged rows.
  if (!variant.with_k && k.defined()) s.token_bytes.push_back(padded_row(spec.head_dim) * k.dim(1).extent() * e);
  if (v.defined()) s.token_bytes.push_back(padded_row(v.dim(0).extent()) * v.dim(1).extent() * e);
  for (int64_t h : heads) {
    // input (and the saved forward input), rotary output, pass-through copies
    for (int n = call[Arg::SavedQ].defined() ? 2 : 1; n > 0; --n)
      s.token_bytes.push_back(padded_row(spec.head_dim) * h * e);
    s.token_bytes.push_back((spec.writes_whole_rows() ? spec.head_dim : spec.rotary_dim) * h * e);
    for (auto [first, count] : pass_ranges(spec)) s.token_bytes.push_back(count * h * e);
  }
  if (spec.output_quant.enabled) s.token_bytes.push_back(spec.head_dim / spec.output_quant.group * heads[0] * 4);
  if (positions.defined())
    s.token_bytes.push_back(positions.type().bytes() * (positions.dimensions() == 3 ? positions.dim(0).extent() : 1));
  return s;
}

// A small argument that is not split (a learned table, run-time
// frequencies, a cos/sin cache): copied whole, its last dim padded so that its size is a
// multiple of the device's size multiple.
Halide::Buffer<> staged_whole(const Halide::Buffer<>& in, int64_t multiple) {
  if (!in.defined()) return in;
  const int last = in.dimensions() - 1;
  const int64_t slice_bytes = in.number_of_elements() / in.dim(last).extent() * in.type().bytes();
  const int64_t step = std::max<int64_t>(1, multiple / std::gcd(slice_bytes, multiple));
  std::vector<int> extents;
  for (int d = 0; d < in.dimensions(); ++d) extents.push_back(in.dim(d).extent());
  extents[last] = static_cast<int>((extents[last] + step - 1) / step * step);
  Halide::Buffer<> b(in.type(), extents);
  std::memset(b.data(), 0, b.size_in_bytes());
  b.copy_from(in);
  return b;
}

// A token's batch index or slot, padded to the size multiple with -1
// (not appended): staged tokens past the call's are never appended.
Halide::Buffer<> staged_token_indices(const Halide::Buffer<>& in, int64_t multiple) {
  if (!in.defined()) return in;
  const int n = in.dim(0).extent();
  const int64_t step = std::max<int64_t>(1, multiple / 4);
  Halide::Buffer<int32_t> b(static_cast<int>((n + step - 1) / step * step));
  const auto* ids = static_cast<const int32_t*>(in.data());
  for (int i = 0; i < b.dim(0).extent(); ++i) b(i) = i < n ? ids[i * in.dim(0).stride()] : -1;
  b.set_host_dirty();
  return b;
}

// cu_seqlens padded to the size multiple with starts past every token:
// the kernel counts the starts <= a token, so the padding never counts.
Halide::Buffer<> staged_cu_seqlens(const Halide::Buffer<>& cu, int64_t multiple) {
  if (!cu.defined()) return cu;
  const int n = cu.dim(0).extent();
  const int64_t step = std::max<int64_t>(1, multiple / 4);
  Halide::Buffer<int32_t> b(static_cast<int>((n + step - 1) / step * step));
  const auto* starts = static_cast<const int32_t*>(cu.data());
  for (int i = 0; i < b.dim(0).extent(); ++i) b(i) = i < n ? starts[i * cu.dim(0).stride()] : INT32_MAX;
  b.set_host_dirty();
  return b;
}

// Per-token index tensors (batch_indices, slot_mapping, cache_positions):
// staged padded with -1 (not appended).
bool per_token_index(Arg a) { return a == Arg::BatchIndices || a == Arg::SlotMapping || a == Arg::CachePositions; }

std::atomic<uint64_t> staged_part_count{0};

}  // namespace

uint64_t staged_parts() { return staged_part_count.load(); }

void prepare_device_runtime(const Halide::Target& target) {
  if (target.has_feature(Halide::Target::CUDA)) find_libcuda_so_1();
  if (!target.has_feature(Halide::Target::Vulkan)) return;
  // pool : min block (MiB) : max block : max blocks : size multiple; 0 = no limit.
  // Only if unset (overwrite = 0): a value of the user's, empty included, is their opt-out (device_call.h).
  static std::once_flag once;
  std::call_once(once, [] { setenv("HL_VK_ALLOC_CONFIG", "0:1:0:0:256", /*overwrite=*/0); });
}

int device_parts(const RopeSpec& spec, const lowering::KernelVariant& variant, const DevicePart& call,
                 const DeviceInfo& device) {
  const Halide::Buffer<>& q = call[Arg::Q];
  return static_cast<int>(
      plan_parts(sizes_of(spec, variant, call, device), q.dim(2).extent(), q.dim(3).extent()).size());
}

void run_on_device(const RopeSpec& spec, const lowering::KernelVariant& variant, const DevicePart& call,
                   const DeviceInfo& device, const DevicePipelines& pipelines) {
  const Sizes sizes = sizes_of(spec, variant, call, device);
  // The arguments that are not split (cu_seqlens, tables, frequencies, the
  // cos/sin cache (the rows up to the call's largest position: prepare_call
  // crops the view), the KV-cache append's indices and caches), staged once
  // for every part. The caches' entries no token goes to come back as they
  // went; every part updates them, they are copied back once.
  PipelineArguments whole;
  for (Arg arg : abi::kTensorArgs) {
    if (abi::info(arg).kind != abi::ArgKind::Whole || abi::is_summed_gradient(arg)) continue;
    const int64_t multiple = device.buffer_size_multiple;
    if (arg == Arg::CuSeqlens)
      whole[arg] = staged_cu_seqlens(call[arg], multiple);
    else if (per_token_index(arg))
      whole[arg] = staged_token_indices(call[arg], multiple);
    else
      whole[arg] = staged_whole(call[arg], multiple);
  }
  for (Arg arg : abi::kTensorArgs)  // the parts add to the summed gradients
    if (abi::is_summed_gradient(arg) && call[arg].defined()) Halide::Buffer<float>(call[arg]).fill(0.0f);
  const Halide::Buffer<>& q = call[Arg::Q];
  try {
    for (const Part& p : plan_parts(sizes, q.dim(2).extent(), q.dim(3).extent())) {
      PartRun(spec, variant, call, p).run(pipelines, whole);
      ++staged_part_count;
    }
  } catch (const Halide::Error& e) {
    throw DeviceError(fmt::format("{}: {}", device.description, e.what()));
  }
  for (Arg arg : abi::kTensorArgs) {
    Halide::Buffer<> staged = whole[arg];
    if (!staged.defined()) continue;
    if (abi::info(arg).direction == abi::Direction::InOut) {  // the caches
      check(staged.copy_to_host(pipelines.context), "a KV cache");
      staged.device_free(pipelines.context);
      Halide::Buffer<> view = call[arg];
      view.copy_from(staged);
    } else {
      staged.device_free(pipelines.context);
    }
  }
}

void run_staged(const call::PreparedCall& call, const RopeSpec& spec, const lowering::KernelVariant& variant,
                const Halide::Target& target, const DevicePipelines& pipelines) {
  prepare_device_runtime(target);
  call::run_in_parts(call, nullptr, [&](const call::PartViews& part) {
    const Result<DeviceInfo> device = probe_device(target);  // an empty call asks nothing of the device
    if (!device) throw DeviceError(format(device.errors()));
    run_on_device(spec, variant, wrap(part), *device, pipelines);
  });
}

}  // namespace ropegen::runtime
