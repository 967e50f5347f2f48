#!/usr/bin/env python3
"""Notebook-style: swap Hugging Face LlamaAttention's RoPE for a rope-gen
kernel and check the logits of a tiny randomly initialised Llama (llama3
scaling, GQA) are unchanged. Needs torch and transformers (e.g. the venv made
by tests/golden/make_golden.py --venv) and the binding: pip install ./python.

    python examples/llama_swap_rope.py
"""
import torch
import transformers.models.llama.modeling_llama as modeling
from transformers import LlamaConfig, LlamaForCausalLM

import ropegen

torch.manual_seed(0)
config = LlamaConfig(vocab_size=512, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                     rope_theta=500000.0, rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                                        "high_freq_factor": 4.0, "original_max_position_embeddings": 1024})
model = LlamaForCausalLM(config).eval()
tokens = torch.randint(0, 512, (2, 33))
positions = torch.arange(33)[None].expand(2, 33) + torch.tensor([[0], [1500]])  # the second row decodes late
with torch.no_grad():
    reference = model(tokens, position_ids=positions).logits

# The same RoPE as a rope-gen spec (`rope-gen from-hf config.json` writes this too).
rope = ropegen.compile({
    "name": "tiny_llama3", "head_dim": 64, "layout": "bhsd", "positions": "explicit",
    "frequency": {"theta": 500000},
    "scaling": {"type": "llama3", "factor": 8, "original_max_position": 1024},
})

# HF computes cos/sin once per forward and passes them to every layer's
# apply_rotary_pos_emb; rope-gen needs the positions instead, so the rotary
# module hands them through the cos slot.
modeling.LlamaRotaryEmbedding.forward = lambda self, x, position_ids: (position_ids, position_ids)
modeling.apply_rotary_pos_emb = lambda q, k, cos, sin, unsqueeze_dim=1: rope(q, k, positions=cos)
with torch.no_grad():
    swapped = model(tokens, position_ids=positions).logits

difference = (swapped - reference).abs().max().item()
print(f"max |logits difference| = {difference:.3g} over {reference.numel()} logits")
# HF's float32 angles drift by ~1e-4 rad at position 1500; rope-gen's do not.
assert difference < 1e-3, "logits changed"
print("PASS: rope-gen reproduces the model's logits")
