"""Each vLLM RoPE class rope-gen serves, layer by layer: the served layer (its
kernel chosen as specs.ROWS says) against vLLM's own forward_native of the same
parameters, float32, positions below 512 (where vLLM's float32 angles are good
to ~1e-4, far below what a wrong frequency or factor shows); fused_qk_norm_rope
against vLLM's RMSNorm and RoPE forward_native; and register()
as vLLM calls it, in fresh processes."""
import os
import subprocess
import sys

import pytest

pytest.importorskip("vllm.model_executor", reason="vLLM is not installed here: `make test-vllm` runs these in .venv-vllm")
import torch  # noqa: E402
import vllm.model_executor.layers.rotary_embedding as rotary  # noqa: E402
from vllm.config import VllmConfig, set_current_vllm_config  # noqa: E402

from ropegen.vllm.layers import served_class  # noqa: E402
from ropegen.vllm.specs import ROWS  # noqa: E402

F32 = torch.float32

# (id, vLLM class, constructor arguments, kernel rope-gen gives it)
CASES = [
    ("plain-neox", "RotaryEmbedding", (64, 32, 1024, 10000.0, True, F32), "computing"),
    ("plain-gptj", "RotaryEmbedding", (64, 64, 1024, 10000.0, False, F32), "computing"),
    ("linear", "LinearScalingRotaryEmbedding", (64, 64, 512, 10000.0, True, [2.0], F32), "computing"),
    ("linear-lora-factors", "LinearScalingRotaryEmbedding", (64, 64, 128, 10000.0, True, [1.0, 4.0], F32), "table"),
    ("ntk", "NTKScalingRotaryEmbedding", (64, 64, 1024, 10000.0, True, 2.0, F32), "computing"),
    ("ntk-mixed", "NTKScalingRotaryEmbedding", (64, 64, 1024, 10000.0, True, 2.0, F32, 0.5), "computing"),
    ("dynamic-ntk", "DynamicNTKScalingRotaryEmbedding", (64, 64, 1024, 256, 10000.0, True, 4.0, F32), "computing"),
    ("dynamic-ntk-alpha", "DynamicNTKAlphaRotaryEmbedding", (64, 64, 1024, 10000.0, True, 2.0, F32), "computing"),
    ("llama3", "Llama3RotaryEmbedding", (64, 64, 1024, 500000.0, True, F32, 8.0, 1.0, 4.0, 64), "computing"),
    ("llama3-two-bands", "Llama3RotaryEmbedding", (64, 64, 1024, 500000.0, True, F32, 8.0, 1.0, 1.0, 64), "computing"),
    ("yarn", "YaRNScalingRotaryEmbedding", (64, 48, 64, 10000.0, True, 8.0, F32), "computing"),
    ("deepseek-yarn", "DeepseekScalingRotaryEmbedding", (32, 32, 64, 10000.0, False, 8.0, F32), "computing"),
    ("gemma4-proportional", "Gemma4RotaryEmbedding", (64, 32, 1024, 10000.0, True, F32), "computing"),
]


@pytest.fixture(autouse=True)
def vllm_config():
    """vLLM's layers read the engine's config when built: a default one, as vLLM's own layer tests do."""
    with set_current_vllm_config(VllmConfig()):
        yield


def _layer(cls_name, args, served, **kwargs):
    cls = getattr(rotary, cls_name)
    return (served_class(cls) if served else cls)(*args, **kwargs)


def _inputs(t=37, hq=4, hk=2, head=64, max_pos=512, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randint(0, max_pos, (t,), generator=g), torch.randn(t, hq * head, generator=g),
            torch.randn(t, hk * head, generator=g))


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_served_layer_matches_vllms(case):
    _, cls_name, args, kernel = case
    theirs, ours = _layer(cls_name, args, False), _layer(cls_name, args, True)
    assert ours.ropegen.kernel == kernel, ours.ropegen
    positions, q, k = _inputs(head=args[0], max_pos=min(512, ours.cos_sin_cache.shape[0]))
    if cls_name.startswith("Deepseek"):  # MLA passes q_pe / k_pe as [T, H, rope dims]
        q, k = q.view(q.shape[0], -1, args[0]), k.view(k.shape[0], -1, args[0])
    want_q, want_k = theirs.forward_native(positions, q.clone(), k.clone())
    got_q, got_k = ours.forward_cpu(positions, q.clone(), k.clone())
    assert (got_q - want_q).abs().max() < 1e-3 and (got_k - want_k).abs().max() < 1e-3
    # A wrong frequency shows: the pairs turn by as much as the positions say.
    assert (want_q - q).abs().max() > 0.1


@pytest.mark.parametrize("interleaved", [False, True], ids=["sections", "interleaved"])
@pytest.mark.parametrize("yarn", [None, 4.0], ids=["plain", "yarn"])
def test_mrope_three_ids_and_text_only(interleaved, yarn):
    args = (64, 64, 128, 1000000.0, True, F32)
    # Qwen2-VL's contiguous sections; Qwen3-VL's round robin (n_axes * sections[a] within the pairs)
    sections = [12, 10, 10] if interleaved else [8, 12, 12]
    kwargs = dict(mrope_section=sections, mrope_interleaved=interleaved, scaling_factor=yarn)
    theirs, ours = _layer("MRotaryEmbedding", args, False, **kwargs), _layer("MRotaryEmbedding", args, True, **kwargs)
    assert ours.ropegen.kernel == "computing"
    positions, q, k = _inputs(max_pos=500)
    g = torch.Generator().manual_seed(5)
    for ids in (positions, torch.randint(0, 500, (3, positions.numel()), generator=g)):
        want_q, want_k = theirs.forward_native(ids, q.clone(), k.clone())
        got_q, got_k = ours.forward_cpu(ids, q.clone(), k.clone())
        assert (got_q - want_q).abs().max() < 1e-3 and (got_k - want_k).abs().max() < 1e-3


@pytest.mark.parametrize("inverse", [False, True], ids=["forward", "inverse"])
@pytest.mark.parametrize("with_key", [True, False], ids=["q+k", "q"])
def test_deepseek_v4_rotates_the_tail_of_the_call_head(inverse, with_key):
    """DeepSeek-V4: the last rotary_dim dims of the head it is given, by -angle when inverse."""
    args = (64, 32, 64, 10000.0, False, 4.0, F32)
    theirs = _layer("DeepseekV4ScalingRotaryEmbedding", args, False)
    ours = _layer("DeepseekV4ScalingRotaryEmbedding", args, True)
    assert ours.ropegen.kernel == "computing"
    g = torch.Generator().manual_seed(2)
    positions = torch.randint(0, 256, (9,), generator=g)
    q, k = torch.randn(9, 4, 96, generator=g), torch.randn(9, 1, 96, generator=g)
    key = k.clone() if with_key else None
    want_q, want_k = theirs.forward_native(positions, q.clone(), key, inverse=inverse)
    got_q, got_k = ours.forward_cpu(positions, q.clone(), None if key is None else k.clone(), inverse=inverse)
    assert (got_q - want_q).abs().max() < 1e-3
    if with_key:
        assert (got_k - want_k).abs().max() < 1e-3


def test_table_kernel_reads_the_float32_cache():
    """Several LoRA factors: the table kernel on vLLM's cache, kept in float32
    whatever the model's dtype (vLLM's own is bf16 here)."""
    args = (64, 64, 128, 10000.0, True, [1.0, 4.0], torch.bfloat16)
    ours = _layer("LinearScalingRotaryEmbedding", args, True)
    assert ours.cos_sin_cache.dtype == torch.bfloat16 and ours.ropegen_cos_sin_cache.dtype == F32
    exact = _layer("LinearScalingRotaryEmbedding", args[:-1] + (F32,), False)
    positions, q, k = _inputs(max_pos=640)
    want_q, _ = exact.forward_native(positions, q.clone(), k.clone())
    got_q, _ = ours.forward_cpu(positions, q.bfloat16(), k.bfloat16())
    assert (got_q.float() - want_q).abs().max() < 0.05  # one bf16 rounding of the output


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "f32"])
def test_rope_gen_is_at_least_as_accurate_as_vllms_cache(dtype):
    """The accuracy case for the plugin (bf16_accuracy.py prints the table): at
    every position range up to 32k, rope-gen's computing kernel is closer to a
    float64 rotation than vLLM's kernel on its cache in the model's dtype."""
    import bf16_accuracy
    for _, cls_name, args, inv_freq in bf16_accuracy.LAYERS:
        for bucket, (vllm_err, ours_err) in bf16_accuracy.errors(cls_name, args, inv_freq, dtype, 64).items():
            assert ours_err <= vllm_err, (cls_name, bucket, ours_err, vllm_err)


def test_every_class_of_this_vllm_has_a_row():
    """A vLLM upgrade that adds a RoPE class fails here until specs.ROWS says what it gets."""
    classes = {name for name, obj in vars(rotary).items()
               if isinstance(obj, type) and issubclass(obj, torch.nn.Module) and name != "RotaryEmbeddingBase"}
    assert classes - set(ROWS) == set()


def _register_in_a_fresh_process(plugins):
    code = ("import logging, sys; logging.basicConfig(stream=sys.stdout, level=logging.INFO, format='%(message)s')\n"
            "from ropegen.vllm import register; register()\n"
            "from vllm.model_executor.custom_op import op_registry_oot\n"
            "import vllm.model_executor.layers.rotary_embedding as r\n"
            "print('OOT', sorted(op_registry_oot)); print('PHI3', r.Phi3LongRoPEScaledRotaryEmbedding.__name__)")
    env = {k: v for k, v in os.environ.items() if k != "VLLM_PLUGINS"}
    if plugins is not None:
        env["VLLM_PLUGINS"] = plugins
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout


def test_register_swaps_only_when_named():
    unset = _register_in_a_fresh_process(None)
    assert "OOT []" in unset and "PHI3 Phi3LongRoPEScaledRotaryEmbedding" in unset
    assert "not enabled" in unset
    named = _register_in_a_fresh_process("lora_filesystem_resolver,ropegen")
    served = [name for name, row in ROWS.items() if row.spec or row.table]
    assert f"OOT {sorted(n for n in served if n != 'Phi3LongRoPEScaledRotaryEmbedding')}" in named
    assert "PHI3 RopegenPhi3LongRoPEScaledRotaryEmbedding" in named
    assert "rope-gen serves vLLM's RoPE layers" in named
    assert "DualChunkRotaryEmbedding keeps vLLM's kernel" in named


# torch.ops.ropegen.fused_qk_norm_rope against the reference vLLM's own
# fused-kernel test uses: RMSNorm.forward_native per head of Q and K, then
# RotaryEmbedding.forward_native, on one qkv buffer (V untouched).
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.bfloat16, 2e-2)], ids=["f32", "bf16"])
@pytest.mark.parametrize("is_neox,rotary_dim", [(True, 128), (False, 128), (True, 64)], ids=["neox", "gptj", "partial"])
def test_fused_qk_norm_rope_matches_vllms_rms_norm_and_rope(dtype, tol, is_neox, rotary_dim):
    from vllm.model_executor.layers.layernorm import RMSNorm

    import ropegen.torch  # noqa: F401  (registers the op)
    t, hq, hk, hv, d, eps = 19, 4, 2, 2, 128, 1e-6
    g = torch.Generator().manual_seed(3)
    qkv = torch.randn(t, (hq + hk + hv) * d, generator=g).to(dtype)
    positions = torch.randint(0, 4096, (t,), generator=g)
    norms = [RMSNorm(d, eps=eps).to(dtype) for _ in range(2)]
    for norm in norms:
        with torch.no_grad():
            norm.weight.copy_((torch.rand(d, generator=g) + 0.5).to(dtype))
    rope = rotary.RotaryEmbedding(d, rotary_dim, 4096, 1000000.0, is_neox, dtype)
    q, k, v = qkv.split([hq * d, hk * d, hv * d], dim=-1)
    q = norms[0].forward_native(q.reshape(t, hq, d)).reshape(t, hq * d)
    k = norms[1].forward_native(k.reshape(t, hk, d)).reshape(t, hk * d)
    want_q, want_k = rope.forward_native(positions, q, k)
    ours = qkv.clone()
    torch.ops.ropegen.fused_qk_norm_rope(ours, hq, hk, hv, d, eps, norms[0].weight.data, norms[1].weight.data,
                                         rope.cos_sin_cache, is_neox, positions)
    got_q, got_k, got_v = ours.split([hq * d, hk * d, hv * d], dim=-1)
    torch.testing.assert_close(got_q.float(), want_q.float(), atol=tol, rtol=tol)
    torch.testing.assert_close(got_k.float(), want_k.float(), atol=tol, rtol=tol)
    assert torch.equal(got_v, v)
