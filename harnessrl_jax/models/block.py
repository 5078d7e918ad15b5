"""`Block`: one residual block of the decoder, its mixer chosen by the layer type.

  attention ("full_attention", "sliding_attention"): layers.Attention
  "linear_attention": linear_attention.GatedDeltaNet (Qwen3.5)

Pre-norm: x + mixer(norm(x)), then x + mlp(norm(x)). Gemma adds a norm on each sublayer's
output: x + post_norm(mixer(input_norm(x))), then x + post_ff_norm(mlp(pre_ff_norm(x))). HF
names differ by family: Llama's `post_attention_layernorm` is the norm before the MLP,
Gemma's the one after attention.
"""

from __future__ import annotations

import jax
from flax import nnx

from harnessrl_jax.models.config import ModelConfig
from harnessrl_jax.models.layers import MLP, Attention, RMSNorm
from harnessrl_jax.models.linear_attention import GatedDeltaNet


class Block(nnx.Module):
  """A residual block; see the module docstring."""

  def __init__(self, cfg: ModelConfig, layer_type: str, *, rngs: nnx.Rngs):
    self.layer_type = layer_type
    self.input_layernorm = RMSNorm(cfg.hidden_size, cfg)
    if layer_type == "linear_attention":
      self.linear_attn = GatedDeltaNet(cfg, rngs=rngs)
      self.self_attn = None
    else:
      self.self_attn = Attention(cfg, rngs=rngs)
      self.linear_attn = None
    self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg)
    self.mlp = MLP(cfg, rngs=rngs)
    if cfg.gemma_style:
      self.pre_feedforward_layernorm = RMSNorm(cfg.hidden_size, cfg)
      self.post_feedforward_layernorm = RMSNorm(cfg.hidden_size, cfg)
    else:
      self.pre_feedforward_layernorm = self.post_feedforward_layernorm = None

  def __call__(self, x: jax.Array, cos, sin, mask: jax.Array, cache):
    """x [B,T,D]. Attention layers: cos/sin their RoPE tables, mask `allowed` [B,T,S], cache
    the KV tuple of `Attention.__call__` or None. Linear layers: cos/sin unused, mask the
    tokens' padding mask [B,T], cache the layer's GatedDeltaNetState or None.
    Returns (x', the layer's updated cache or None)."""
    h = self.input_layernorm(x)
    if self.linear_attn is not None:
      h, new_cache = self.linear_attn(h, mask, cache)
    else:
      h, new_cache = self.self_attn(h, cos, sin, mask, cache)
    if self.pre_feedforward_layernorm is None:
      x = x + h
      return x + self.mlp(self.post_attention_layernorm(x)), new_cache
    x = x + self.post_attention_layernorm(h)
    x = x + self.post_feedforward_layernorm(self.mlp(self.pre_feedforward_layernorm(x)))
    return x, new_cache
