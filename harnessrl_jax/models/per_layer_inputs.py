"""Gemma 4's per-layer inputs (HF: Per-Layer Embeddings, `hidden_size_per_layer_input` P).

Before the first layer, each token gets one P-vector per layer (`PerLayerInputs`):
  (norm(reshape(x @ W_proj / sqrt(D))) + embed_per_layer[token] * sqrt(P)) / sqrt(2)
where x is the (scaled) token embedding, W_proj [D, L*P], embed_per_layer [V_p, L*P]
(both packed over the L layers) and norm an RMSNorm over P. Inside layer i, after the MLP
(`PerLayerGate`): x + norm(up(act(gate(x)) * input_i)), gate [D, P], up [P, D].
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from harnessrl_jax.models.architecture import ModelConfig
from harnessrl_jax.models.layers import _ACTIVATIONS, Linear, RMSNorm, param


class PerLayerInputs(nnx.Module):
  """The per-layer inputs [B,T,L,P] of a batch of tokens (module docstring); HF names."""

  def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
    self.cfg = cfg
    width = cfg.num_layers * cfg.per_layer_input_size
    self.embed_tokens_per_layer = param(rngs, (cfg.per_layer_vocab_size, width),
                                        ("vocab", "per_layer"), jnp.dtype(cfg.param_dtype),
                                        "normal")
    self.per_layer_model_projection = Linear(cfg.hidden_size, width, ("embed", "per_layer"),
                                             cfg, rngs=rngs)
    self.per_layer_projection_norm = RMSNorm(cfg.per_layer_input_size, cfg)

  def __call__(self, tokens: jax.Array, embeddings: jax.Array) -> jax.Array:
    """tokens [B,T] int32, embeddings [B,T,D] (scaled, activation dtype) -> [B,T,L,P]."""
    cfg = self.cfg
    shape = (*tokens.shape, cfg.num_layers, cfg.per_layer_input_size)
    table = self.embed_tokens_per_layer[...]
    # Scaled in the table's dtype, as HF's scaled embedding.
    by_token = jnp.take(table, tokens, axis=0) * jnp.asarray(
        cfg.per_layer_input_size ** 0.5, table.dtype)
    projected = self.per_layer_model_projection(embeddings) * jnp.asarray(
        cfg.hidden_size ** -0.5, embeddings.dtype)
    projected = self.per_layer_projection_norm(projected.reshape(shape))
    return ((projected + by_token.reshape(shape).astype(projected.dtype))
            * jnp.asarray(2.0 ** -0.5, projected.dtype))


class PerLayerGate(nnx.Module):
  """A layer's use of its per-layer input: norm(up(act(gate(x)) * input)) (HF names)."""

  def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
    self.act = _ACTIVATIONS[cfg.hidden_act]
    d, p = cfg.hidden_size, cfg.per_layer_input_size
    self.per_layer_input_gate = Linear(d, p, ("embed", "per_layer"), cfg, rngs=rngs)
    self.per_layer_projection = Linear(p, d, ("per_layer", "embed"), cfg, rngs=rngs)
    self.post_per_layer_input_norm = RMSNorm(d, cfg)

  def __call__(self, x: jax.Array, per_layer_input: jax.Array) -> jax.Array:
    h = self.act(self.per_layer_input_gate(x)) * per_layer_input.astype(x.dtype)
    return self.post_per_layer_input_norm(self.per_layer_projection(h))
