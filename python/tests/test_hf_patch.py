"""ropegen.hf.patch / unpatch on tiny random transformers models (CPU, float32).

Per family: logits and a training step's gradients after patching against HF's own float32
model, with a float64 run of the unpatched HF model as the judge: the patched model's error is
within twice HF float32's own error plus 1e-6 of the values' scale; the patch routes every
layer through rope-gen (HF's apply function is not called); unpatch gives bit-identical logits
and puts every forward and apply function back."""
import copy

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import ropegen.hf as hf  # noqa: E402  (needs torch)

transformers.logging.set_verbosity_error()
T = transformers
VOCAB = 128
COMMON = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=256, initializer_range=0.2)  # 0.2: attention is
# sharp enough that a wrong rotation moves logits by O(1) (at 0.02 it moves them by ~4e-3)


def config(family):
    if family == "llama":
        return T.LlamaConfig(**COMMON, rope_parameters=dict(
            rope_type="llama3", rope_theta=10000.0, factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
            original_max_position_embeddings=32))
    if family == "qwen2":
        return T.Qwen2Config(**COMMON, rope_parameters=dict(
            rope_type="yarn", rope_theta=10000.0, factor=4.0, original_max_position_embeddings=64))
    if family == "phi3":  # long list when the call's max position + 1 > 16
        return T.Phi3Config(**COMMON, pad_token_id=0, original_max_position_embeddings=16, rope_parameters=dict(
            rope_type="longrope", rope_theta=10000.0, original_max_position_embeddings=16,
            short_factor=[1.0 + 0.1 * i for i in range(8)], long_factor=[2.0 + 0.5 * i for i in range(8)]))
    if family == "gpt_neox":  # rotary_dim 4 of head_dim 16
        return T.GPTNeoXConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                               num_attention_heads=4, max_position_embeddings=256, initializer_range=0.2,
                               rope_parameters=dict(rope_type="default", rope_theta=10000.0,
                                                    partial_rotary_factor=0.25))
    if family == "gptj":  # interleaved, rotary_dim 8 of head_dim 16
        return T.GPTJConfig(vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4, rotary_dim=8, n_positions=256,
                            initializer_range=0.2)
    if family == "deepseek_v3":  # MLA: rope on the last 8 of 24 qk dims, interleaved in, half out; YaRN
        return T.DeepseekV3Config(
            vocab_size=VOCAB, hidden_size=64, intermediate_size=128, moe_intermediate_size=32, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=4, n_routed_experts=4, num_experts_per_tok=2,
            n_shared_experts=1, n_group=1, topk_group=1, first_k_dense_replace=1, q_lora_rank=32, kv_lora_rank=16,
            qk_rope_head_dim=8, qk_nope_head_dim=16, v_head_dim=16, max_position_embeddings=256,
            rope_interleave=True, initializer_range=0.2, experts_implementation="eager",  # eager: float64 judge
            rope_parameters=dict(rope_type="yarn", rope_theta=10000.0, factor=4.0, original_max_position_embeddings=64,
                                 mscale=1.0, mscale_all_dim=1.0, beta_fast=32, beta_slow=1))
    if family == "gemma3":  # sliding layers: default theta 1e4; full layers: linear x8, theta 1e6
        return T.Gemma3TextConfig(
            vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, max_position_embeddings=256, sliding_window=8, initializer_range=0.2,
            layer_types=["sliding_attention", "full_attention"],
            rope_parameters={"sliding_attention": dict(rope_type="default", rope_theta=10000.0),
                             "full_attention": dict(rope_type="linear", rope_theta=1000000.0, factor=8.0)})
    if family == "qwen3":  # per-head q_norm / k_norm (x̂·w) fused into the RoPE kernel
        return T.Qwen3Config(**COMMON, head_dim=16, rope_parameters=dict(rope_type="default", rope_theta=10000.0))
    if family == "glm4_moe":  # per-head norms, then RoPE of half the head (partial_rotary_factor 0.5)
        return T.Glm4MoeConfig(**COMMON, head_dim=16, moe_intermediate_size=32, n_routed_experts=4,
                               num_experts_per_tok=2, n_shared_experts=1, first_k_dense_replace=1, n_group=1,
                               topk_group=1, use_qk_norm=True, experts_implementation="eager",
                               rope_parameters=dict(rope_type="default", rope_theta=10000.0,
                                                    partial_rotary_factor=0.5))
    if family == "olmo2":  # q_norm / k_norm over the whole projection: HF's norms, rope-gen's RoPE
        return T.Olmo2Config(**COMMON, rope_parameters=dict(rope_type="default", rope_theta=10000.0))
    if family == "qwen2_vl":  # M-RoPE sections (2, 3, 3) pairs
        return T.Qwen2VLConfig(
            text_config=dict(COMMON, rope_parameters=dict(rope_type="default", rope_theta=10000.0,
                                                          mrope_section=[2, 3, 3])),
            vision_config=dict(depth=1, embed_dim=32, hidden_size=64, num_heads=2, mlp_ratio=2),
            initializer_range=0.2)
    raise AssertionError(family)


def build(family):
    torch.manual_seed(0)
    cfg = config(family)
    model = T.Qwen2VLForConditionalGeneration(cfg) if family == "qwen2_vl" else T.AutoModelForCausalLM.from_config(cfg)
    return model.eval()


def inputs(family, seq):
    gen = torch.Generator().manual_seed(1)
    kwargs = {"input_ids": torch.randint(0, VOCAB, (2, seq), generator=gen)}
    if family == "qwen2_vl":  # [3, B, S] ids whose t, h, w axes differ, as an image's tokens do
        p = torch.arange(seq)
        kwargs["position_ids"] = torch.stack([p, p // 2, (p * 7) % seq])[:, None, :].expand(3, 2, seq)
    return kwargs


def run(model, kwargs):
    """(logits, {parameter name: gradient}) of one training step's backward."""
    model.zero_grad(set_to_none=True)
    logits = model(**kwargs).logits
    labels = torch.randint(0, VOCAB, logits.shape[:-1], generator=torch.Generator().manual_seed(2))
    torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), labels.flatten()).backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    return logits.detach(), grads


def max_diff(a, b):
    return float((a.detach().double() - b.detach().double()).abs().max())


def grad_diff(a, b):
    assert a.keys() == b.keys()
    return max(max_diff(a[n], b[n]) for n in a)


def hf_apply_functions(model):
    """{(module globals id, name): (module globals, name)} of the apply functions its attentions call."""
    found = {}
    for module in model.modules():
        forward = getattr(type(module).forward, "__wrapped__", type(module).forward)
        g = getattr(forward, "__globals__", {})
        for name in ("apply_rotary_pos_emb", "apply_rotary_pos_emb_interleave"):
            if name in getattr(getattr(forward, "__code__", None), "co_names", ()) and name in g and \
                    "Vision" not in type(module).__name__:
                found[(id(g), name)] = (g, name)
    return list(found.values())


class Counter:
    def __init__(self):
        self.n = 0

    def wrap(self, fn):
        def counted(*args, **kwargs):
            self.n += 1
            return fn(*args, **kwargs)
        counted.__signature__ = __import__("inspect").signature(fn)
        return counted


CASES = [("llama", 12), ("qwen2", 12), ("phi3", 12), ("phi3", 40), ("gpt_neox", 12), ("gptj", 12),
         ("deepseek_v3", 12), ("gemma3", 12), ("qwen2_vl", 12), ("qwen3", 12), ("glm4_moe", 12), ("olmo2", 12)]
FUSED_NORMS = {"gemma3", "qwen3", "glm4_moe"}  # per-head q_norm / k_norm: run inside the RoPE kernel


@pytest.mark.parametrize("family,seq", CASES, ids=[f"{f}-S{s}" for f, s in CASES])
def test_patch_matches_hf_and_unpatch_restores(family, seq, monkeypatch):
    model = build(family)
    kwargs = inputs(family, seq)
    judge_logits, judge_grads = run(copy.deepcopy(model).double(), kwargs)

    hf_calls, kernel_calls = Counter(), Counter()
    for g, name in hf_apply_functions(model):  # counted, so we see whether HF's path runs
        monkeypatch.setitem(g, name, hf_calls.wrap(g[name]))
    monkeypatch.setattr(hf._Positions, "rotate", kernel_calls.wrap(hf._Positions.rotate))
    fused_calls, take = Counter(), hf._hf_norm.take

    def counted_take(q, k):  # RoPE calls that ran deferred norms
        norms = take(q, k)
        fused_calls.n += norms is not None
        return norms
    monkeypatch.setattr(hf._hf_norm, "take", counted_take)
    hf_logits, hf_grads = run(model, kwargs)
    assert hf_calls.n > 0 and kernel_calls.n == 0
    forwards = {id(m): m.__dict__.get("forward") for m in model.modules()}
    globals_before = {(id(g), n): g[n] for g, n in hf_apply_functions(model)}

    assert hf.patch(model) is model and hf.is_patched(model)
    hf_calls.n = kernel_calls.n = fused_calls.n = 0  # patch() compared HF's rotation with rope-gen's
    try:
        logits, grads = run(model, kwargs)
        assert hf_calls.n == 0, "HF's apply function ran in a patched model"
        per_layer = 2 if family == "gptj" else 1  # GPT-J rotates k and q in two calls
        layers = model.config.get_text_config().num_hidden_layers
        assert kernel_calls.n == per_layer * layers
        assert fused_calls.n == (layers if family in FUSED_NORMS else 0)
    finally:
        hf.unpatch(model)

    err_hf, err = max_diff(hf_logits, judge_logits), max_diff(logits, judge_logits)
    gerr_hf, gerr = grad_diff(hf_grads, judge_grads), grad_diff(grads, judge_grads)
    print(f"\n{family} S={seq}: logits |patched-HF| {max_diff(logits, hf_logits):.2e}, |patched-f64| {err:.2e}, "
          f"|HF-f64| {err_hf:.2e}; grads |patched-HF| {grad_diff(grads, hf_grads):.2e}, |patched-f64| {gerr:.2e}, "
          f"|HF-f64| {gerr_hf:.2e}")
    assert err <= 2 * err_hf + 1e-6 * float(judge_logits.abs().max())
    assert gerr <= 2 * gerr_hf + 1e-6 * max(float(g.abs().max()) for g in judge_grads.values())

    assert not hf.is_patched(model)
    assert {id(m): m.__dict__.get("forward") for m in model.modules()} == forwards
    assert {(id(g), n): g[n] for g, n in hf_apply_functions(model)} == globals_before
    hf_calls.n = 0
    again, _ = run(model, kwargs)
    assert torch.equal(again, hf_logits) and hf_calls.n > 0


def test_qk_norm_fusion_can_be_declined_and_is_declined_for_hooked_norms(monkeypatch):
    """fuse_qk_norm=False, or a forward hook on a norm when patching: HF's norms run, rope-gen's RoPE after
    them; a hook added after patching that replaces a norm's output is an error naming the attention, never
    an unnormalised q."""
    model = build("qwen3")
    kwargs = inputs("qwen3", 12)
    hf_logits = model(**kwargs).logits
    norm_calls = Counter()
    attention = model.model.layers[0].self_attn
    for norm in (attention.q_norm, attention.k_norm):
        monkeypatch.setattr(norm, "forward", norm_calls.wrap(norm.forward))
    for fuse, hooked in ((False, False), (True, True)):
        hook = attention.q_norm.register_forward_hook(lambda m, i, out: out * 1.0) if hooked else None
        hf.patch(model, fuse_qk_norm=fuse)
        try:
            norm_calls.n = 0
            assert max_diff(model(**kwargs).logits, hf_logits) <= 1e-5
            assert norm_calls.n == 2  # layer 0's q_norm and k_norm ran as HF's
        finally:
            hf.unpatch(model)
            if hook is not None:
                hook.remove()
    hf.patch(model)
    try:
        norm_calls.n = 0
        assert max_diff(model(**kwargs).logits, hf_logits) <= 1e-5 and norm_calls.n == 0  # fused
        attention.q_norm.register_forward_hook(lambda m, i, out: out * 1.0)
        with pytest.raises(ValueError, match=r"model.layers.0.self_attn \(Qwen3Attention\): apply_rotary_pos_emb "
                                             r"was not given q_norm's and k_norm's outputs as they are"):
            model(**kwargs)
    finally:
        hf.unpatch(model)


def test_patching_one_model_leaves_another_of_its_class_alone(monkeypatch):
    patched, other = build("llama"), build("llama")
    kwargs = inputs("llama", 12)
    before = other(**kwargs).logits
    hf_calls = Counter()
    (g, name), = hf_apply_functions(other)
    monkeypatch.setitem(g, name, hf_calls.wrap(g[name]))
    hf.patch(patched)
    try:
        hf_calls.n = 0
        assert torch.equal(other(**kwargs).logits, before)
        assert hf_calls.n == other.config.num_hidden_layers  # the other model still runs HF's function
        hf.patch(other)  # two patched models share the dispatcher
        hf.unpatch(patched)
        assert g[name].__wrapped__.__name__ == "counted"  # still installed for `other`
        hf.unpatch(other)
    finally:
        for m in (patched, other):
            if hf.is_patched(m):
                hf.unpatch(m)
    assert g[name].__name__ == "counted"  # the last unpatch put back what was there


def test_patch_twice_and_unpatch_unpatched_are_errors():
    model = build("llama")
    with pytest.raises(ValueError, match="is not patched"):
        hf.unpatch(model)
    hf.patch(model)
    try:
        with pytest.raises(ValueError, match="already patched"):
            hf.patch(model)
    finally:
        hf.unpatch(model)


def test_refuses_a_model_without_rope():
    model = T.AutoModelForCausalLM.from_config(T.GPT2Config(vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4,
                                                            n_positions=64))
    with pytest.raises(ValueError, match=r"GPT2LMHeadModel has no rotary position embedding"):
        hf.patch(model)
    assert not hf.is_patched(model)


def test_refuses_complex_freqs_cis_rope():
    """DeepSeek-V2's rotary module returns complex freqs_cis, applied by apply_rotary_emb(xq, xk,
    freqs_cis): not the (cos, sin) form this module routes."""
    model = T.AutoModelForCausalLM.from_config(T.DeepseekV2Config(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=128, moe_intermediate_size=32, num_hidden_layers=1,
        num_attention_heads=4, num_key_value_heads=4, n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1,
        first_k_dense_replace=1, q_lora_rank=None, kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=16,
        v_head_dim=16, max_position_embeddings=256))
    with pytest.raises(ValueError, match=r"DeepseekV2Attention calls apply_rotary_emb\(xq, xk, freqs_cis\)"):
        hf.patch(model)
    assert not hf.is_patched(model)


def test_refuses_a_rotary_module_that_disagrees_with_its_config():
    """The spec comes from the config; a rotary module whose frequencies differ (edited here, as
    a remote-code model's own init could) is caught by patch()'s comparison, before any change."""
    model = build("qwen2")
    rotary = model.model.rotary_emb
    rotary.inv_freq.mul_(1.01)
    with pytest.raises(ValueError, match=r"model.rotary_emb \(Qwen2RotaryEmbedding.*does not reproduce "
                                         r".*modeling_qwen2.apply_rotary_pos_emb: max \|diff\|"):
        hf.patch(model)
    assert not hf.is_patched(model) and "forward" not in rotary.__dict__


@pytest.mark.parametrize("family", ["llama", "qwen3"])
def test_torch_compile_traces_a_patched_model_in_one_graph(family):
    """The tag is a trace-time Python object: dynamo follows it into ropegen.torch's op
    (fullgraph: no break), and the ids stay graph inputs (other positions, same graph).
    Qwen3: the deferred norms too (bit-identical to eager, which runs them fused)."""
    model = hf.patch(build(family))
    try:
        compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
        for shift in (0, 30):
            kwargs = inputs(family, 12)
            kwargs["position_ids"] = (torch.arange(12) + shift)[None].expand(2, 12)
            eager = model(**kwargs).logits
            assert max_diff(compiled(**kwargs).logits, eager) <= (0 if family == "qwen3" else 1e-6)
    finally:
        hf.unpatch(model)


def test_gptj_refusals_are_value_errors_naming_the_model():
    """GPT-J keeps its (sin, cos) table in a rotary module without a config (transformers 5.24) or in its
    attention (up to 5.23): a table that disagrees with the config, or a module in another form, is a
    ValueError naming the model, and nothing is patched."""
    model = build("gptj")
    owners = [m for m in model.modules() if isinstance(getattr(m, "embed_positions", None), torch.Tensor)]
    assert owners
    with torch.no_grad():
        for m in owners:
            m.embed_positions.mul_(1.01)
    with pytest.raises(ValueError, match=r"GPTJ.*does not reproduce .*modeling_gptj.apply_rotary_pos_emb: max "):
        hf.patch(model)
    assert not hf.is_patched(model)
    model = build("gptj")
    for m in model.modules():
        if isinstance(getattr(m, "embed_positions", None), torch.Tensor):
            del m.embed_positions  # neither form any more
    with pytest.raises(ValueError, match=r"ropegen.hf.patch: GPTJForCausalLM"):
        hf.patch(model)
    assert not hf.is_patched(model)
    assert all("forward" not in m.__dict__ for m in model.modules())
