// Positions: explicit ids (shape, width, span), cu_seqlens of packed
// layouts, seq_len, and one check of every position the call reads (ids,
// offset + index, ALiBi's query rows) against 0..kMaxPosition (2^32).
#include <fmt/format.h>

#include <algorithm>

#include "call/checks.h"
#include "ropegen/position_limits.h"

namespace ropegen::call {
namespace {

// |s|, saturated (INT64_MIN has no positive counterpart).
int64_t magnitude(int64_t s) { return s == INT64_MIN ? INT64_MAX : s < 0 ? -s : s; }

// Explicit ids, or offset + index along the longest sequence (packed:
// restarting at every cu_seqlens start; alibi: the query rows).
Result<PositionRange> position_range(const CheckContext& x) {
  if (x.call.positions) {
    const Tensor& p = *x.call.positions;
    const int64_t n = p.elements();
    return n == 0 ? PositionRange{} : id_range(p, n);
  }
  int64_t longest = x.sequence_tokens();
  if (x.traits.packed() && x.call.cu_seqlens) {
    longest = 0;
    for (int64_t i = 0; i + 1 < x.call.cu_seqlens->shape[0]; ++i)
      longest = std::max(longest, id_at(*x.call.cu_seqlens, i + 1) - id_at(*x.call.cu_seqlens, i));
  }
  int64_t last = x.call.offset;
  if (longest > 0 && __builtin_add_overflow(x.call.offset, longest - 1, &last))
    return named_error("offset", fmt::format("offset {} + {} tokens overflows int64", x.call.offset, longest));
  return PositionRange{x.call.offset, last};
}

}  // namespace

bool kernel_reads_cu_seqlens(const CheckContext& x) { return x.traits.packed() && !x.c.explicit_positions; }

void check_positions(CheckContext& x) {
  const bool alibi = encoding(x.c) == Encoding::Alibi;
  if (!x.c.explicit_positions) {
    if (x.call.positions)
      x.fail("positions", alibi
                              ? "alibi takes no position ids: query row r sits at offset + r, key j at j (pass offset)"
                              : "the spec has `positions: implicit` (offset + index): pass offset, or set "
                                "`positions: explicit` in the spec to pass ids");
    return;
  }
  // Multi-axis ids carry a trailing axis dim.
  Shape want = x.tokens, shared = {x.sequence_tokens()};
  std::string axes_note;
  if (x.c.position_axes > 0) {
    want.push_back(x.c.position_axes);
    shared.push_back(x.c.position_axes);
    axes_note = fmt::format(" plus a trailing dim of {} (one id per axis)", x.c.position_axes);
  }
  if (!x.call.positions) {
    x.fail("positions", fmt::format("the spec has `positions: explicit`: pass position ids shaped {} (or {} shared by "
                                    "the batch)",
                                    shape_str(want), shape_str(shared)));
    return;
  }
  // The kernels read ids as they are: an offset would be silently dropped.
  if (x.call.offset != 0)
    x.fail("offset", fmt::format("offset ({}) is for implicit positions (offset + index); with position ids, add it "
                                 "to the ids (or pass offset 0)",
                                 x.call.offset));
  const Tensor& p = *x.call.positions;
  if (shape_of(p) != want && shape_of(p) != shared) {
    x.fail("positions", fmt::format("positions have shape {} but {} {} in layout {} needs {} (the token dims{}) or {} "
                                    "shared by the batch",
                                    shape_str(p), x.name(Arg::Q), shape_str(x.q), x.traits.name, shape_str(want),
                                    axes_note, shape_str(shared)));
    return;
  }
  for (int i = 0; i < p.rank; ++i) {
    int64_t span = 0;
    if (p.shape[i] > 1 &&
        (__builtin_mul_overflow(p.shape[i] - 1, magnitude(p.strides[i]), &span) || span > INT32_MAX)) {
      x.fail("positions", fmt::format("positions' dim {} ({} ids, {} apart) spans more than a kernel call can address "
                                      "(2^31-1 ids): pass dense ids",
                                      i, p.shape[i], p.strides[i]));
      return;
    }
  }
}

void check_cu_seqlens(CheckContext& x) {
  // A device call's kernels read the caller's starts as they are.
  const bool from_device = x.on_device && kernel_reads_cu_seqlens(x);
  if (!x.call.cu_seqlens) {
    if (from_device)
      x.fail("cu_seqlens", fmt::format("a device call in layout {} with implicit positions needs cu_seqlens (int32 "
                                       "[num_sequences + 1], on the device; [0, T] for one sequence): the kernels read "
                                       "the sequence starts there",
                                       x.traits.name));
    return;
  }
  const Tensor& cu = *x.call.cu_seqlens;
  if (!x.traits.packed()) {
    x.fail("cu_seqlens", "cu_seqlens only applies to packed layouts (thd, td)");
    return;
  }
  const int64_t T = x.q.shape[x.traits.s];
  bool valid = cu.rank == 1 && cu.shape[0] >= 2 && cu.shape[0] <= INT32_MAX;
  for (int64_t i = 0; valid && !x.on_device && i < cu.shape[0]; ++i) {
    const int64_t start = id_at(cu, i);
    valid = (i > 0 || start == 0) && (i == 0 || start >= id_at(cu, i - 1)) && (i + 1 < cu.shape[0] || start == T);
  }
  if (!valid)
    x.fail("cu_seqlens", fmt::format("cu_seqlens (shape {}) must be num_sequences + 1 starts from 0, never decreasing, "
                                     "ending at T = {} (the tokens in {})",
                                     shape_str(cu), T, x.name(Arg::Q)));
  else if (from_device && cu.type != ElementType::Int32)
    x.fail("cu_seqlens", fmt::format("cu_seqlens has dtype {}: a device call passes int32 cu_seqlens (the kernels read "
                                     "int32 starts; converting these would read device memory)",
                                     to_string(cu.type)));
}

void check_seq_len(CheckContext& x) {
  if (x.call.seq_len && *x.call.seq_len < 1)
    x.fail("seq_len", fmt::format("seq_len ({}) must be >= 1", *x.call.seq_len));
}

// A device call's ids and sequence lengths (cu_seqlens) are on the device:
// only what the host knows is checked then (implicit positions start at
// offset), and the range stays unknown.
void check_position_range(CheckContext& x) {
  x.range_known = !x.on_device || (!x.call.positions && !(x.traits.packed() && x.call.cu_seqlens));
  if (x.on_device && x.call.positions) return;
  const Result<PositionRange> range = x.range_known ? position_range(x) : PositionRange{x.call.offset, x.call.offset};
  if (!range) {
    x.errors.insert(x.errors.end(), range.errors().begin(), range.errors().end());
    return;
  }
  x.range = *range;
  const bool ids = x.call.positions.has_value();
  const char* what = ids ? "position id" : "position (offset + index)";
  if (range->first < 0)
    x.fail(ids ? "positions" : "offset",
           fmt::format("{} {} is negative: positions must be in 0..{}", what, range->first, kMaxPositionText));
  else if (range->last > kMaxPosition)
    x.fail(ids ? "positions" : "offset",
           fmt::format("{} {} is out of range: positions must be in 0..{} ({}; past it the float64 angle "
                       "loses accuracy){}",
                       what, range->last, kMaxPositionText, kMaxPosition,
                       ids ? "" : fmt::format("; the offset is {}", x.call.offset)));
}

}  // namespace ropegen::call
