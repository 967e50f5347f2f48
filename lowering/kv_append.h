// The fused KV-cache append (spec kv_cache): k's rows (rotary dims
// rotated, the rest copied) and v's rows scattered into the caches, (d, h,
// e, pg) = (dim, head, entry, page) in every layout (contiguous: slots are
// pages of one entry). The caches' pure definitions are undef (no entry is
// written but the tokens'). k_cache update 0: rotated k over k_rows (r, m,
// h, token); update 1 (partial rotary): the other dims over k_pass_rows (j,
// h, token); v_cache update 0: v over v_rows (d, h, token). where() keeps
// the appended tokens.
#pragma once

#include <Halide.h>

#include "ropegen/spec.h"

namespace ropegen::lowering {

struct RopeAlgorithm;

struct KvAppend {
  Halide::Var e{"e"}, pg{"pg"};
  // k's rotation for the cache (as the algorithm's k.rotated), and with
  // own_cache_stages its own copies of cos_sin, reduced, xpos_scale;
  // without, these are undefined and it reads q's.
  Halide::Func rotated_k, cos_sin, reduced, xpos_scale;
  // (t) -> {entry, page} token t goes to, page -1 when it is not appended
  // (a negative batch index or slot, or ids that name no entry of the cache).
  Halide::Func target;
  Halide::Func k_cache, v_cache;  // undefined without a kv_cache section (v_cache: without v)
  Halide::RDom k_rows, k_pass_rows, v_rows;
};

// The append's Funcs, reading k (and v) and the page table or slot
// mapping; fp8 caches (fp8.h) hold codes of x / k_scale (v_scale).
void define_kv_append(const RopeSpec& spec, RopeAlgorithm& a, bool own_cache_stages);

}  // namespace ropegen::lowering
