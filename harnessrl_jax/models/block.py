"""`Block`: one residual block of the decoder, its mixer chosen by the layer type.

  attention ("full_attention", "sliding_attention"): layers.Attention
  "linear_attention": linear_attention.GatedDeltaNet (Qwen3.5)

Pre-norm: x + mixer(norm(x)), then x + mlp(norm(x)). Gemma adds a norm on each sublayer's
output: x + post_norm(mixer(input_norm(x))), then x + post_ff_norm(mlp(pre_ff_norm(x))). HF
names differ by family: Llama's `post_attention_layernorm` is the norm before the MLP,
Gemma's the one after attention. Gemma 4 MoE layers add a routed expert block (models/moe.py)
to the MLP's output before its post-norm; Gemma 4 then adds its per-layer input
(per_layer_inputs.PerLayerGate) and multiplies the block's output by `layer_scalar`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from harnessrl_jax.models.architecture import ModelConfig
from harnessrl_jax.models.layers import MLP, Attention, RMSNorm, param
from harnessrl_jax.models.linear_attention import GatedDeltaNet
from harnessrl_jax.models.moe import MoE
from harnessrl_jax.models.per_layer_inputs import PerLayerGate


class Block(nnx.Module):
  """A residual block; see the module docstring. `layer` (its index) matters only for
  Gemma 4, whose last `num_kv_shared_layers` blocks are KV-shared."""

  def __init__(self, cfg: ModelConfig, layer_type: str, *, layer: int = 0, rngs: nnx.Rngs):
    self.layer_type = layer_type
    shared = cfg.kv_source(layer) is not None
    self.input_layernorm = RMSNorm(cfg.hidden_size, cfg)
    if layer_type == "linear_attention":
      self.linear_attn = GatedDeltaNet(cfg, rngs=rngs)
      self.self_attn = None
    else:
      self.self_attn = Attention(cfg, layer_type, shared=shared, rngs=rngs)
      self.linear_attn = None
    self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg)
    self.mlp = MLP(cfg, wide=shared and cfg.double_wide_mlp, rngs=rngs)
    if cfg.gemma_style:
      self.pre_feedforward_layernorm = RMSNorm(cfg.hidden_size, cfg)
      self.post_feedforward_layernorm = RMSNorm(cfg.hidden_size, cfg)
    else:
      self.pre_feedforward_layernorm = self.post_feedforward_layernorm = None
    # Gemma 4 MoE: the dense MLP's output gets its own norm and the experts' is added.
    self.post_feedforward_layernorm_1 = (RMSNorm(cfg.hidden_size, cfg) if cfg.num_experts
                                         else None)
    self.moe = MoE(cfg, rngs=rngs) if cfg.num_experts else None
    self.per_layer_gate = (PerLayerGate(cfg, rngs=rngs) if cfg.per_layer_input_size
                           else None)
    # Gemma 4's scalar per layer (HF: a buffer, loaded from the checkpoint; a parameter here).
    self.layer_scalar = (param(None, (1,), ("norm",), jnp.dtype(cfg.param_dtype), "ones")
                         if cfg.family == "gemma4" else None)

  def __call__(self, x: jax.Array, cos, sin, mask: jax.Array, cache, extra=None):
    """x [B,T,D]. Attention layers: cos/sin their RoPE tables, mask `allowed` [B,T,S], cache
    the KV tuple of `Attention.__call__` or None. Linear layers: cos/sin unused, mask the
    tokens' padding mask [B,T], cache the layer's GatedDeltaNetState or None.
    extra (Gemma 4): (this layer's per-layer input [B,T,P] or None, the keys a KV-shared
    layer reads or None).
    Returns (x', the layer's updated cache or None, the keys its attention read or None)."""
    per_layer_input, keys = extra if extra is not None else (None, None)
    h = self.input_layernorm(x)
    if self.linear_attn is not None:
      h, new_cache = self.linear_attn(h, mask, cache)
      keys = None
    else:
      h, new_cache, keys = self.self_attn(h, cos, sin, mask, cache, keys)
    if self.pre_feedforward_layernorm is None:
      x = x + h
      return x + self.mlp(self.post_attention_layernorm(x)), new_cache, keys
    x = x + self.post_attention_layernorm(h)
    h = self.mlp(self.pre_feedforward_layernorm(x))
    if self.moe is not None:
      h = self.post_feedforward_layernorm_1(h) + self.moe(x)
    x = x + self.post_feedforward_layernorm(h)
    if self.per_layer_gate is not None:
      x = x + self.per_layer_gate(x, per_layer_input)
    if self.layer_scalar is not None:
      x = x * self.layer_scalar[...].astype(x.dtype)
    return x, new_cache, keys
