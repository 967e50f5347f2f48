"""The fused RoPE + KV-cache append through kernel calls: k rotated into
k_cache exactly as out_k holds it, v copied, entries no token goes to
untouched, padding tokens skipped, errors naming the argument."""
import numpy as np
import pytest

import ropegen

SPEC = ("name: kv\nhead_dim: 8\nlayout: thd\npositions: explicit\n"
        "kv_cache: {layout: paged_nhd, page_size: 2}\n")


def case(T=3):
    rng = np.random.default_rng(0)
    q = rng.standard_normal((T, 2, 8), dtype=np.float32)
    k = rng.standard_normal((T, 1, 8), dtype=np.float32)
    v = rng.standard_normal((T, 1, 4), dtype=np.float32)
    return q, k, v


def test_paged_append_matches_out_k_and_touches_nothing_else():
    kernel = ropegen.compile(SPEC)
    q, k, v = case()
    k_cache = np.full((3, 2, 1, 8), 9.0, dtype=np.float32)
    v_cache = np.full((3, 2, 1, 4), 9.0, dtype=np.float32)
    positions = np.array([0, 1, 2], dtype=np.int32)
    indices = np.array([2, 0], dtype=np.int32)      # request 0: pages 2, then 0
    indptr = np.array([0, 2], dtype=np.int32)
    batch = np.array([0, 0, -1], dtype=np.int32)    # token 2: padding, not appended
    out_k = np.empty_like(k)
    out_q, got_k = kernel(q, k, v=v, positions=positions, out_k=out_k, k_cache=k_cache, v_cache=v_cache,
                          kv_indices=indices, kv_indptr=indptr, batch_indices=batch)
    assert got_k is out_k
    want_k = np.full_like(k_cache, 9.0)
    want_v = np.full_like(v_cache, 9.0)
    for t, (page, entry) in enumerate([(2, 0), (2, 1)]):
        want_k[page, entry] = out_k[t]
        want_v[page, entry] = v[t]
    np.testing.assert_array_equal(k_cache, want_k)
    np.testing.assert_array_equal(v_cache, want_v)
    assert out_q.shape == q.shape


def test_contiguous_without_out_k_leaves_k_and_returns_out_q():
    kernel = ropegen.compile(SPEC.replace("{layout: paged_nhd, page_size: 2}", "{layout: contiguous}"))
    q, k, _ = case()
    k_before = k.copy()
    k_cache = np.zeros((5, 1, 8), dtype=np.float32)
    out_q = kernel(q, k, positions=np.array([4, 5, 6], dtype=np.int32), k_cache=k_cache,
                   slot_mapping=np.array([3, -1, 0], dtype=np.int32))
    assert isinstance(out_q, np.ndarray)
    np.testing.assert_array_equal(k, k_before)
    assert np.all(k_cache[[1, 2, 4]] == 0) and np.any(k_cache[3] != 0) and np.any(k_cache[0] != 0)


def test_out_of_range_slot_is_refused_by_name():
    kernel = ropegen.compile(SPEC.replace("{layout: paged_nhd, page_size: 2}", "{layout: contiguous}"))
    q, k, _ = case()
    k_cache = np.zeros((2, 1, 8), dtype=np.float32)
    with pytest.raises(ValueError, match=r"slot_mapping: error: slot_mapping\[2\] is 7, outside k_cache's 2 slots"):
        kernel(q, k, positions=np.array([0, 1, 2], dtype=np.int32), k_cache=k_cache,
               slot_mapping=np.array([0, 1, 7], dtype=np.int32))
    assert np.all(k_cache == 0)


def test_fp8_cache_holds_the_codes_of_v_over_v_scale():
    """e4m3 (e4m3fn) codes of v / v_scale, literal; k / k_scale saturates at
    448 (0x7e); a scale for a float cache is refused by name."""
    kernel = ropegen.compile(SPEC.replace("{layout: paged_nhd, page_size: 2}", "{layout: contiguous, dtype: fp8_e4m3}"))
    q = np.ones((2, 2, 8), dtype=np.float32)
    k = np.full((2, 1, 8), 1000.0, dtype=np.float32)
    v = np.array([[[0.0, 1.0, 3.0, 11.0]], [[-1.0, 1e6, np.nan, 2 ** -10]]], dtype=np.float32)
    k_cache = np.full((3, 1, 8), 0x5A, dtype=np.uint8)
    v_cache = np.full((3, 1, 4), 0x5A, dtype=np.uint8)
    kernel(q, k, v=v, positions=np.array([0, 0], dtype=np.int32), k_cache=k_cache, v_cache=v_cache,
           slot_mapping=np.array([2, 0], dtype=np.int32), k_scale=0.5, v_scale=2.0)
    assert np.all(k_cache[[0, 2]] == 0x7E) and np.all(k_cache[1] == 0x5A)
    # slot 2 <- token 0: 0, 0.5, 1.5, 5.5; slot 0 <- token 1: -0.5, saturated, NaN, 2^-11 (rounds to 0)
    np.testing.assert_array_equal(v_cache[2, 0], [0x00, 0x30, 0x3C, 0x4B])
    np.testing.assert_array_equal(v_cache[0, 0], [0xB0, 0x7E, 0x7F, 0x00])
    assert np.all(v_cache[1] == 0x5A)
    with pytest.raises(ValueError, match=r"k_scale: error: k_scale \(0\) must be finite and > 0"):
        kernel(q, k, positions=np.array([0, 0], dtype=np.int32), k_cache=k_cache,
               slot_mapping=np.array([2, 0], dtype=np.int32), k_scale=0.0)
    f32 = ropegen.compile(SPEC.replace("{layout: paged_nhd, page_size: 2}", "{layout: contiguous}"))
    with pytest.raises(ValueError, match="k_scale: error: k_scale is for fp8 KV caches"):
        f32(q, k, positions=np.array([0, 0], dtype=np.int32), k_cache=np.zeros((3, 1, 8), dtype=np.float32),
            slot_mapping=np.array([2, 0], dtype=np.int32), k_scale=2.0)


def test_cache_positions_place_tokens_that_rotate_elsewhere():
    """Paged: tokens rotated at positions 10, 11 go to entries 0, 1 (FlashInfer's
    fused op: positions place, pos_ids rotate); out_k's rows land there."""
    kernel = ropegen.compile(SPEC)
    q, k, v = case(2)
    k_cache = np.full((3, 2, 1, 8), 9.0, dtype=np.float32)
    out_k = np.empty_like(k)
    kernel(q, k, positions=np.array([10, 11], dtype=np.int32), out_k=out_k, k_cache=k_cache,
           kv_indices=np.array([2], dtype=np.int32), kv_indptr=np.array([0, 1], dtype=np.int32),
           batch_indices=np.array([0, 0], dtype=np.int32), cache_positions=np.array([0, 1], dtype=np.int32))
    want = np.full_like(k_cache, 9.0)
    want[2, 0], want[2, 1] = out_k[0], out_k[1]
    np.testing.assert_array_equal(k_cache, want)
    with pytest.raises(ValueError, match=r"cache_positions: error: token 1 \(request 0\) is at cache position 2"):
        kernel(q, k, positions=np.array([10, 11], dtype=np.int32), k_cache=k_cache,
               kv_indices=np.array([2], dtype=np.int32), kv_indptr=np.array([0, 1], dtype=np.int32),
               batch_indices=np.array([0, 0], dtype=np.int32), cache_positions=np.array([0, 2], dtype=np.int32))
