"""Tiny random models, made with transformers and saved locally (no hub access):
one per RoPE variant the vLLM tests serve. Scaled models get an original
context of 32 positions, so the long prompt's positions pass it.

    python models.py DIR [NAME ...]      # writes DIR/NAME/ (config.json, weights)
"""
import os
import sys
from dataclasses import dataclass, field

ORIGINAL = 32          # the scaled models' original context
MAX_POSITIONS = 256    # max_position_embeddings, and vLLM's max_model_len

_SMALL = dict(vocab_size=512, hidden_size=256, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=MAX_POSITIONS, tie_word_embeddings=False)


@dataclass
class Model:
    config: str                      # transformers config class
    kwargs: dict                     # its arguments
    classes: list                    # the vLLM RoPE classes vLLM builds for it
    engine: dict = field(default_factory=dict)  # vLLM engine arguments it needs
    auto: str = "AutoModelForCausalLM"


MODELS = {
    "llama3": Model("LlamaConfig", dict(_SMALL, rope_parameters={
        "rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": ORIGINAL}), ["Llama3RotaryEmbedding"]),
    "qwen2_yarn": Model("Qwen2Config", dict(_SMALL, rope_parameters={
        "rope_type": "yarn", "rope_theta": 1000000.0, "factor": 8.0,
        "original_max_position_embeddings": ORIGINAL}), ["YaRNScalingRotaryEmbedding"]),
    "phi3_longrope": Model("Phi3Config", dict(_SMALL, original_max_position_embeddings=ORIGINAL, pad_token_id=0,
                                         rope_parameters={
        "rope_type": "longrope", "rope_theta": 10000.0,
        "short_factor": [1.0 + 0.05 * i for i in range(32)], "long_factor": [1.0 + 0.9 * i for i in range(32)]}),
        ["Phi3LongRoPEScaledRotaryEmbedding"]),
    # vLLM 0.32 runs GPT-NeoX on its Transformers backend: HF's modelling code
    # rotates, and no vLLM RoPE layer is built (nothing for the plugin to serve).
    "gpt_neox_partial": Model("GPTNeoXConfig", dict(
        vocab_size=512, hidden_size=256, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
        max_position_embeddings=MAX_POSITIONS, rotary_pct=0.25, tie_word_embeddings=False), []),
    # Partial rotary in a model vLLM implements itself: StableLM, a quarter of each head.
    "stablelm_partial": Model("StableLmConfig", dict(_SMALL, partial_rotary_factor=0.25), ["RotaryEmbedding"]),
    "gptj_interleaved": Model("GPTJConfig", dict(
        vocab_size=512, n_embd=256, n_layer=2, n_head=4, n_positions=MAX_POSITIONS, rotary_dim=16,
        tie_word_embeddings=False), ["RotaryEmbedding"]),
    "gemma3_two_thetas": Model("Gemma3TextConfig", dict(
        _SMALL, head_dim=64, sliding_window=16, layer_types=["sliding_attention", "full_attention"],
        rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                         "full_attention": {"rope_type": "linear", "factor": 4.0, "rope_theta": 1000000.0}}),
        ["RotaryEmbedding", "LinearScalingRotaryEmbedding"]),
    "qwen3_qk_norm": Model("Qwen3Config", dict(_SMALL, head_dim=64, rope_parameters={
        "rope_type": "default", "rope_theta": 1000000.0}), ["RotaryEmbedding"]),
    # MLA: vLLM's CPU MLA kernel takes only DeepSeek's latent size, kv_lora_rank + rope dims = 576.
    "deepseek_v2_mla": Model("DeepseekV2Config", dict(
        _SMALL, num_key_value_heads=4, q_lora_rank=None, kv_lora_rank=512, qk_nope_head_dim=64, qk_rope_head_dim=64,
        v_head_dim=64, first_k_dense_replace=2, n_routed_experts=4, num_experts_per_tok=2, n_group=1, topk_group=1,
        moe_intermediate_size=64,
        rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 8.0,
                         "original_max_position_embeddings": ORIGINAL, "beta_fast": 32, "beta_slow": 1,
                         "mscale": 0.707, "mscale_all_dim": 0.707}), ["DeepseekScalingRotaryEmbedding"]),
    # M-RoPE: Qwen2-VL's text model, served text-only (no image or video inputs, so
    # vLLM needs no processor); its positions still come as [3, T].
    "qwen2_vl_mrope": Model("Qwen2VLConfig", dict(
        text_config=dict(_SMALL, rope_parameters={"rope_type": "default", "rope_theta": 1000000.0,
                                                  "mrope_section": [8, 12, 12]}),
        vision_config=dict(depth=1, embed_dim=64, num_heads=2, hidden_size=256, patch_size=14,
                           spatial_merge_size=2, temporal_patch_size=2)),
        ["MRotaryEmbedding"], {"limit_mm_per_prompt": {"image": 0, "video": 0}}, "AutoModelForImageTextToText"),
}


def save(name, directory):
    """Writes the model `name` (random weights, float32, seed 0) into directory."""
    import torch
    import transformers
    m = MODELS[name]
    config = getattr(transformers, m.config)(**m.kwargs)
    torch.manual_seed(0)
    model = getattr(transformers, m.auto).from_config(config, dtype=torch.float32)
    model.save_pretrained(directory)


if __name__ == "__main__":
    for name in sys.argv[2:] or MODELS:
        save(name, os.path.join(sys.argv[1], name))
