#include "lowering/kv_append.h"

#include "lowering/cos_sin.h"
#include "lowering/fp8.h"
#include "lowering/rope_algorithm.h"
#include "lowering/rotation.h"
#include "lowering/storage.h"

namespace ropegen::lowering {

using namespace Halide;

namespace {

// The cache's element for a float32 value: the cache dtype's rounding, or
// for fp8 caches the code of value and scale (the spec's fp8_scale rule).
Type cache_type(const KvCache& kv) { return kv.is_fp8() ? UInt(8) : storage_type(kv.float_dtype()); }
Expr cache_value_from_float(const RopeSpec& spec, const Expr& value, const Expr& scale,
                            Bf16Rounding rounding = Bf16Rounding::IntegerOps) {
  const KvCache& kv = spec.kv_cache;
  return kv.is_fp8() ? fp8_from_float(value, scale, kv.dtype, spec.fp8_scale)
                     : store_from_float(value, kv.float_dtype(), rounding);
}

// A row element of `in` (spec dtype) as the cache stores it: the same bits
// when the dtypes agree, else through float32 (round to nearest even).
Expr as_cache_value(const RopeSpec& spec, const Expr& value, const Expr& scale) {
  const KvCache& kv = spec.kv_cache;
  if (!kv.is_fp8() && kv.float_dtype() == spec.dtype) return value;
  return cache_value_from_float(spec, load_as_float(value, spec.dtype), scale);
}

// Where token t goes (FlashInfer's page.cuh append: page
// kv_indices[kv_indptr[b] + p / page_size], entry p % page_size; vLLM:
// slot slot_mapping[t]): a.kv.target(t) = {entry, page}, page -1 when it
// goes nowhere. prepare_call checks every index of a host call; a device
// call's cannot be read without a synchronisation, so whatever they are,
// every load is clamped into its buffer and a token whose target is not in
// the cache is not appended (README.md): a batch index outside the
// requests or a slot outside the cache (negative: vLLM's padding), a
// negative position or one past its request's pages, a page id outside the
// cache; tokens past the index tensor (GPU staging pads tokens) neither.
void define_kv_target(const RopeSpec& spec, RopeAlgorithm& a) {
  auto within = [](const Expr& i, const ImageParam& p) { return clamp(i, p.dim(0).min(), p.dim(0).max()); };
  auto inside = [](const Expr& i, const Expr& min, const Expr& max) { return min <= i && i <= max; };
  const Var& t = a.s;
  Expr entry, page, exists;
  if (spec.kv_cache.layout == KvLayout::Contiguous) {
    a.use(Arg::SlotMapping);
    entry = a.kv.k_cache.output_buffer().dim(2).min();
    page = a.input(Arg::SlotMapping)(within(t, a.input(Arg::SlotMapping)));
    exists = t <= a.input(Arg::SlotMapping).dim(0).max();
  } else {
    a.use(Arg::KvIndices), a.use(Arg::KvIndptr), a.use(Arg::BatchIndices), a.use(Arg::CachePositions);
    const int ps = spec.kv_cache.page_size;
    const ImageParam& indptr = a.input(Arg::KvIndptr);
    const Expr b = a.input(Arg::BatchIndices)(within(t, a.input(Arg::BatchIndices)));
    // The token's place in its request (prepare_call: cache_positions, else its position).
    const Expr pos = a.input(Arg::CachePositions)(within(t, a.input(Arg::CachePositions)));
    // Request b's pages are kv_indices[kv_indptr[b] .. kv_indptr[b + 1]).
    const Expr request = within(b, indptr);
    const Expr index = indptr(request) + cast<int>(pos / ps);
    entry = cast<int>(pos % ps);
    page = a.input(Arg::KvIndices)(within(index, a.input(Arg::KvIndices)));
    exists = t <= a.input(Arg::BatchIndices).dim(0).max() && inside(b, indptr.dim(0).min(), indptr.dim(0).max() - 1) &&
             pos >= 0 && index < indptr(within(request + 1, indptr)) &&
             inside(index, a.input(Arg::KvIndices).dim(0).min(), a.input(Arg::KvIndices).dim(0).max());
  }
  const OutputImageParam cache = a.kv.k_cache.output_buffer();
  a.kv.target = Func("kv_target");
  a.kv.target(t) = Tuple(entry, select(exists && inside(page, cache.dim(3).min(), cache.dim(3).max()), page, -1));
}

// Token t's entry and page in `cache`, clamped (bounds inference sees the
// cache, whatever the indices), and whether it is appended.
struct CacheEntry {
  Expr entry, page, appended;
};
CacheEntry cache_entry(const RopeAlgorithm& a, const Expr& t, const Func& cache) {
  const OutputImageParam out = cache.output_buffer();
  const Expr entry = a.kv.target(t)[0], page = a.kv.target(t)[1];
  return {clamp(entry, out.dim(2).min(), out.dim(2).max()), clamp(page, out.dim(3).min(), out.dim(3).max()), page >= 0};
}

}  // namespace

void define_kv_append(const RopeSpec& spec, RopeAlgorithm& a, bool own_cache_stages) {
  const KvCache& kv = spec.kv_cache;
  // fp8 caches read the call's scales (k's also for k's copied dims).
  if (kv.is_fp8()) a.use(Arg::KScale);
  if (kv.is_fp8() && a.variant.with_v) a.use(Arg::VScale);
  const ImageParam& k = a.k.input;
  for (Arg index : {Arg::KvIndices, Arg::KvIndptr, Arg::BatchIndices, Arg::SlotMapping, Arg::CachePositions})
    a.make_input(index, Int(32), 1).dim(0).set_stride(Expr());

  // k's rotation for the cache: its own Func (out_k's is placed in out_k's
  // loops), reading q's cos/sin (and xPos) stages, or with
  // own_cache_stages copies of them (the same arithmetic) that a schedule
  // can place apart (one Func has one place).
  if (own_cache_stages) {
    const CosSinStages own = own_cos_sin_stages(spec, a, compute_frequencies(spec), "kv_");
    a.kv.cos_sin = own.cos_sin, a.kv.reduced = own.reduced, a.kv.xpos_scale = own.xpos_scale;
  }
  RotatedTensor kv_k;
  kv_k.input = a.k.input;
  kv_k.normed = a.k.normed;  // qk_norm: the cache gets normalised k (undefined otherwise)
  kv_k.rotated = a.kv.rotated_k = Func("kv_rotated_k");
  define_rotation(spec, a, kv_k, true, false, a.kv.cos_sin, a.kv.xpos_scale);

  // The caches' pure definitions write nothing; each update scatters
  // rows of the appended tokens (the last RDom dim: token; where() keeps
  // the appended ones) at their entries.
  auto cache_func = [&](Func& cache, const char* name) {
    cache = Func(name);
    cache(a.d, a.h, a.kv.e, a.kv.pg) = undef(cache_type(kv));
  };
  auto tokens = [](const ImageParam& in) { return std::pair{in.dim(2).min(), in.dim(2).extent()}; };
  const Expr b0 = k.dim(3).min();

  // k, update 0: the rotary dims, pair by pair as out_k holds them (output
  // pairing): rows (r, m, h, t), stores dense along r as out_k's are.
  const int off = spec.rotary_offset, half = spec.num_pairs(), pass = spec.head_dim - spec.rotary_dim;
  cache_func(a.kv.k_cache, "k_cache");
  a.kv.k_cache.output_buffer().dim(0).set_bounds(0, spec.head_dim);  // k's rows: whole heads
  define_kv_target(spec, a);
  {
    const auto [t0, nt] = tokens(k);
    a.kv.k_rows = RDom({{0, half}, {0, 2}, {k.dim(1).min(), k.dim(1).extent()}, {t0, nt}}, "k_cache_rows");
    const RDom& r = a.kv.k_rows;
    const CacheEntry at = cache_entry(a, r.w, a.kv.k_cache);
    a.kv.k_rows.where(at.appended);
    a.kv.k_cache(dim_of(spec, spec.output_pairing, r.x, r.y), r.z, at.entry, at.page) = cache_value_from_float(
        spec, a.kv.rotated_k(r.x, r.y, r.z, r.w, b0), a.scalar(Arg::KScale), Bf16Rounding::InstructionWhereAvailable);
  }
  // k, update 1 (partial rotary): the other dims copied (qk_norm: normalised).
  if (pass > 0) {
    const auto [t0, nt] = tokens(k);
    a.kv.k_pass_rows = RDom({{0, pass}, {k.dim(1).min(), k.dim(1).extent()}, {t0, nt}}, "k_cache_pass_rows");
    const RDom& r = a.kv.k_pass_rows;
    const CacheEntry at = cache_entry(a, r.z, a.kv.k_cache);
    a.kv.k_pass_rows.where(at.appended);
    const Expr d = select(r.x < off, r.x, r.x + spec.rotary_dim);
    a.kv.k_cache(d, r.y, at.entry, at.page) =
        a.k.normed.defined() ? cache_value_from_float(spec, a.k.normed(d, r.y, r.z, b0), a.scalar(Arg::KScale))
                             : as_cache_value(spec, k(d, r.y, r.z, b0), a.scalar(Arg::KScale));
  }
  // v, update 0: rows (d, h, t) copied; they span the cache's dims (GPU
  // staging pads v's rows).
  if (a.variant.with_v) {
    a.make_input(Arg::V, a.q.input.type(), 4);
    a.use(Arg::V);
    cache_func(a.kv.v_cache, "v_cache");
    const auto [t0, nt] = tokens(a.input(Arg::V));
    a.kv.v_rows = RDom({{0, a.kv.v_cache.output_buffer().dim(0).extent()},
                        {a.input(Arg::V).dim(1).min(), a.input(Arg::V).dim(1).extent()},
                        {t0, nt}},
                       "v_cache_rows");
    const RDom& r = a.kv.v_rows;
    const CacheEntry at = cache_entry(a, r.z, a.kv.v_cache);
    a.kv.v_rows.where(at.appended);
    a.kv.v_cache(r.x, r.y, at.entry, at.page) =
        as_cache_value(spec, a.input(Arg::V)(r.x, r.y, r.z, b0), a.scalar(Arg::VScale));
  }
}

}  // namespace ropegen::lowering
