// The fused KV-cache append: the caches and their layout's shapes and
// dtype, the index tensors, every page and slot a token goes to, kv_indptr
// monotone and within kv_indices, each token's position within its
// request's pages, no two tokens to one entry.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "call/checks.h"

namespace ropegen::call {
namespace {

int64_t magnitude(int64_t s) { return s == INT64_MIN ? INT64_MAX : s < 0 ? -s : s; }

// The arguments only kv_cache specs take.
bool is_kv_argument(Arg a) {
  const abi::Feature f = abi::info(a).feature;
  return f == abi::Feature::KvCache || f == abi::Feature::PagedKvCache || f == abi::Feature::ContiguousKvCache;
}

const char* kv_layout_name(const CheckContext& x) {
  switch (kv_layout(x.c)) {
    case KvLayout::PagedNhd: return "paged_nhd";
    case KvLayout::PagedHnd: return "paged_hnd";
    case KvLayout::Contiguous: return "contiguous";
  }
  return "?";
}

// The shape a cache has in the spec's kv_cache layout, for messages.
std::string cache_shape(const CheckContext& x, const std::string& pages, int64_t heads, int64_t dim) {
  switch (kv_layout(x.c)) {
    case KvLayout::PagedNhd:
      return fmt::format("({}, {}, {}, {}) ([pages, page_size, Hk, D])", pages, x.c.kv_page_size, heads, dim);
    case KvLayout::PagedHnd:
      return fmt::format("({}, {}, {}, {}) ([pages, Hk, page_size, D])", pages, heads, x.c.kv_page_size, dim);
    case KvLayout::Contiguous:
      return fmt::format("({}, {}, {}) ([num_slots, Hk, D])", pages == "pages" ? "num_slots" : pages, heads, dim);
  }
  return "?";
}

// A cache's shape for `heads` heads of `dim`, its pages (or slots), and
// that one kernel argument addresses all of it.
bool check_cache(CheckContext& x, const Tensor& t, const char* name, int64_t heads, int64_t dim, int64_t* pages) {
  const bool contiguous = kv_layout(x.c) == KvLayout::Contiguous;
  const int rank = contiguous ? 3 : 4;
  Shape want;
  if (t.rank == rank) {
    if (kv_layout(x.c) == KvLayout::PagedNhd)
      want = {t.shape[0], x.c.kv_page_size, heads, dim};
    else if (kv_layout(x.c) == KvLayout::PagedHnd)
      want = {t.shape[0], heads, x.c.kv_page_size, dim};
    else
      want = {t.shape[0], heads, dim};
  }
  const bool ok = t.rank == rank && t.shape[0] >= 1 && t.shape[0] <= INT32_MAX && shape_of(t) == want;
  if (!ok) {
    x.fail(name, fmt::format("{} has shape {} but the spec's kv_cache layout {} needs {}", name, shape_str(t),
                             kv_layout_name(x), cache_shape(x, contiguous ? "num_slots" : "pages", heads, dim)));
    return false;
  }
  int64_t span = 0;
  for (int i = 0; i < t.rank; ++i) {
    int64_t far = 0;
    if (t.shape[i] > 1 && (__builtin_mul_overflow(t.shape[i] - 1, magnitude(t.strides[i]), &far) ||
                           __builtin_add_overflow(span, far, &span))) {
      span = INT64_MAX;
      break;
    }
  }
  if (span >= INT32_MAX) {
    x.fail(name, fmt::format("{} spans more than the 2^31-1 elements a kernel call can address", name));
    return false;
  }
  *pages = t.shape[0];
  return true;
}

// A one-dim int32 index tensor of `n` entries (n < 0: any).
bool check_index_vector(CheckContext& x, const Tensor& t, const char* name, int64_t n, const char* what) {
  if (t.rank != 1 || (n >= 0 && t.shape[0] != n) || t.shape[0] > INT32_MAX) {
    x.fail(name, fmt::format("{} has shape {} but must be {}", name, shape_str(t),
                             n >= 0 ? fmt::format("({},) ({})", n, what) : std::string(what)));
    return false;
  }
  return true;
}

// Token t's position (thd: positions [T]).
int64_t position_of(const CheckContext& x, int64_t t) { return id_at(*x.call.positions, t); }

// No two appended tokens write one cache entry (which would be a race).
// Entries are page * page_size + entry (paged), or slots (page_size 0).
void check_distinct(CheckContext& x, std::vector<std::pair<int64_t, int64_t>>& entry_token, const char* name,
                    int64_t page_size) {
  std::sort(entry_token.begin(), entry_token.end());
  for (size_t i = 1; i < entry_token.size(); ++i)
    if (entry_token[i].first == entry_token[i - 1].first) {
      const int64_t at = entry_token[i].first;
      x.fail(name, fmt::format("tokens {} and {} both go to {}: each cache entry takes at most one "
                               "token of a call",
                               entry_token[i - 1].second, entry_token[i].second,
                               page_size > 0 ? fmt::format("page {}, entry {}", at / page_size, at % page_size)
                                             : fmt::format("slot {}", at)));
      return;
    }
}

void check_page_table(CheckContext& x, int64_t T, int64_t pages) {
  const Tensor &indptr = *x.call.kv_indptr, &indices = *x.call.kv_indices, &batch = *x.call.batch_indices;
  if (!check_index_vector(x, indptr, "kv_indptr", -1,
                          "(B + 1,): the first page of each request in kv_indices, then the end") ||
      !check_index_vector(x, indices, "kv_indices", -1, "(n,): the pages of every request") ||
      !check_index_vector(x, batch, "batch_indices", T, "the request of each token") ||
      (x.call.cache_positions && !check_index_vector(x, *x.call.cache_positions, "cache_positions", T,
                                                     "where each token goes in its request's cache")))
    return;
  const int64_t B = indptr.shape[0] - 1, n = indices.shape[0];
  if (B < 1) {
    x.fail("kv_indptr", fmt::format("kv_indptr has shape {}: it needs B + 1 >= 2 entries", shape_str(indptr)));
    return;
  }
  // A device call's page table is the caller's to keep valid; the kernels
  // read int32 places (cache_positions, else positions).
  if (x.on_device) {
    if (!x.call.cache_positions && x.call.positions->type != ElementType::Int32)
      x.fail("cache_positions",
             "a device call with int64 positions passes cache_positions (int32 "
             "[T], each token's place in its request's cache): the kernels read "
             "int32 places, and converting the positions would read device "
             "memory");
    return;
  }
  for (int64_t b = 0; b <= B; ++b) {
    const int64_t at = id_at(indptr, b);
    if (at < 0 || at > n || (b > 0 && at < id_at(indptr, b - 1))) {
      x.fail("kv_indptr", fmt::format("kv_indptr[{}] is {}: kv_indptr must never decrease and stay "
                                      "within kv_indices (0..{})",
                                      b, at, n));
      return;
    }
  }
  for (int64_t i = id_at(indptr, 0); i < id_at(indptr, B); ++i) {
    const int64_t page = id_at(indices, i);
    if (page < 0 || page >= pages) {
      x.fail("kv_indices",
             fmt::format("kv_indices[{}] is {}, outside k_cache's {} pages (0..{})", i, page, pages, pages - 1));
      return;
    }
  }
  const int64_t ps = x.c.kv_page_size;
  std::vector<std::pair<int64_t, int64_t>> entries;
  x.placement.assign(T, 0);  // tokens not appended: never read
  for (int64_t t = 0; t < T; ++t) {
    const int64_t b = id_at(batch, t);
    if (b < 0) continue;
    if (b >= B) {
      x.fail("batch_indices", fmt::format("batch_indices[{}] is {} but kv_indptr has {} requests "
                                          "(0..{}; negative: not appended)",
                                          t, b, B, B - 1));
      return;
    }
    // Where the token goes: cache_positions, else the position it is rotated by.
    const char* placed_by = x.call.cache_positions ? "cache_positions" : "positions";
    const int64_t p = x.call.cache_positions ? id_at(*x.call.cache_positions, t) : position_of(x, t);
    const int64_t first = id_at(indptr, b), count = id_at(indptr, b + 1) - first;
    if (p < 0) {  // positions are checked >= 0 already
      x.fail(placed_by, fmt::format("cache_positions[{}] is {}: a token's place in its request's "
                                    "cache is >= 0",
                                    t, p));
      return;
    }
    if (p / ps >= count) {
      x.fail(placed_by, fmt::format("token {} (request {}) is at {} {}, in page {} of its request, but "
                                    "the request has {} pages (kv_indptr[{}..{}] = {}..{}, page_size {})",
                                    t, b, x.call.cache_positions ? "cache position" : "position", p, p / ps, count, b,
                                    b + 1, first, first + count, ps));
      return;
    }
    // The kernels read int32 cache positions (as FlashInfer's).
    if (p > INT32_MAX) {
      x.fail(placed_by, fmt::format("token {} is at {} {}: cache positions are int32 (at most {})", t,
                                    x.call.cache_positions ? "cache position" : "position", p, INT32_MAX));
      return;
    }
    x.placement[t] = static_cast<int32_t>(p);
    entries.push_back({id_at(indices, first + p / ps) * ps + p % ps, t});
  }
  check_distinct(x, entries, "batch_indices", ps);
}

void check_slot_mapping(CheckContext& x, int64_t T, int64_t slots) {
  const Tensor& m = *x.call.slot_mapping;
  if (!check_index_vector(x, m, "slot_mapping", T, "a slot per token") || x.on_device) return;  // device: the caller's
  std::vector<std::pair<int64_t, int64_t>> entries;
  for (int64_t t = 0; t < T; ++t) {
    const int64_t s = id_at(m, t);
    if (s < 0) continue;
    if (s >= slots) {
      x.fail("slot_mapping", fmt::format("slot_mapping[{}] is {}, outside k_cache's {} slots (0..{}; "
                                         "negative: not appended)",
                                         t, s, slots, slots - 1));
      return;
    }
    entries.push_back({s, t});
  }
  check_distinct(x, entries, "slot_mapping", 0);
}

}  // namespace

// The fused KV-cache append: FlashInfer's append_paged_kv_cache (page.cuh:
// token t of request b = batch_indices[t] at p = positions[t] goes to page
// kv_indices[kv_indptr[b] + p / page_size], entry p % page_size) and
// vLLM's reshape_and_cache (slot_mapping[t]; negative: padding). Every
// entry a token goes to is checked here: the kernels clamp, never check.
void check_kv_cache(CheckContext& x) {
  if (!has_kv_cache(x.c)) {
    for (const abi::ArgumentInfo& a : abi::kArguments)
      if (is_kv_argument(a.arg) && a.call_tensor && x.call.*a.call_tensor)
        x.fail(a.name, fmt::format("{} is for specs with a kv_cache section (the fused KV-cache append); this spec has "
                                   "none",
                                   a.name));
    return;
  }
  const bool paged = kv_layout(x.c) != KvLayout::Contiguous;
  if (x.call.backward) x.fail("backward", "a spec with kv_cache has no backward kernel (it appends to a cache)");
  if (!x.k) {
    x.fail("k", "the spec appends to a KV cache: pass k ([T, Hk, head_dim]); it is rotated into k_cache");
    return;
  }
  const int64_t T = x.q.shape[0], Hk = x.k->shape[1];
  // The cache rows read k as it came; an out_k over it could be written first.
  if (x.out_k && x.out_k->data == x.k->data)
    x.fail("out_k",
           "out_k is k (in place), but the cache rows are rotated from k as it came: pass "
           "a separate out_k, or leave out_k out (k is then not written)");
  if (!x.call.k_cache)
    x.fail("k_cache", fmt::format("the spec appends to a KV cache: pass k_cache shaped {}",
                                  cache_shape(x, "pages", Hk, x.c.row_dim)));
  if (x.call.v && !x.call.v_cache) x.fail("v_cache", "v is given without v_cache: pass the cache v is appended to");
  if (x.call.v_cache && !x.call.v)
    x.fail("v", "v_cache is given without v: pass v ([T, Hk, Dv]) or leave v_cache out (MLA)");
  for (auto [t, name, wanted] :
       {std::tuple{&x.call.kv_indices, "kv_indices", paged}, std::tuple{&x.call.kv_indptr, "kv_indptr", paged},
        std::tuple{&x.call.batch_indices, "batch_indices", paged},
        std::tuple{&x.call.slot_mapping, "slot_mapping", !paged}}) {
    if (wanted && !*t)
      x.fail(name, fmt::format("the spec's kv_cache layout is {}: pass {} ({})", kv_layout_name(x), name,
                               paged ? "kv_indices, kv_indptr and batch_indices" : "int32 [T], a slot per token"));
    else if (!wanted && *t)
      x.fail(name, fmt::format("{} is for {} caches; the spec's kv_cache layout is {} (pass {})", name,
                               paged ? "contiguous" : "paged", kv_layout_name(x),
                               paged ? "kv_indices, kv_indptr and batch_indices" : "slot_mapping"));
  }
  if (!paged && x.call.cache_positions)
    x.fail("cache_positions",
           "cache_positions is for paged caches; the spec's kv_cache layout is "
           "contiguous (slot_mapping places the tokens)");
  if (!x.errors.empty()) return;
  if (x.call.v) {
    const Tensor& v = *x.call.v;
    if (v.rank != 3 || v.shape[0] != T || v.shape[1] != Hk || v.shape[2] < 1 || v.shape[2] > INT32_MAX) {
      x.fail("v", fmt::format("v has shape {} but must be (T, Hk, Dv) = ({}, {}, Dv): k's tokens and "
                              "heads, any row size",
                              shape_str(v), T, Hk));
      return;
    }
  }
  int64_t pages = 0;
  if (!check_cache(x, *x.call.k_cache, "k_cache", Hk, x.c.row_dim, &pages)) return;
  if (x.call.v) {
    int64_t v_pages = 0;
    if (!check_cache(x, *x.call.v_cache, "v_cache", Hk, x.call.v->shape[2], &v_pages)) return;
    if (v_pages != pages) {
      x.fail("v_cache", fmt::format("v_cache has {} {} but k_cache has {}: they are indexed alike", v_pages,
                                    paged ? "pages" : "slots", pages));
      return;
    }
  }
  if (paged)
    check_page_table(x, T, pages);
  else
    check_slot_mapping(x, T, pages);
}

}  // namespace ropegen::call
