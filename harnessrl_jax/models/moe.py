"""Gemma 4's mixture-of-experts block (`enable_moe_block`), beside each layer's dense MLP.

In a MoE layer the feed-forward part reads, from the residual stream x (attention added):
  dense  = post_ff_norm_1(mlp(pre_ff_norm(x)))
  router : p = softmax(proj(rms(x) * scale / sqrt(D))) (float32), the top_k of p renormalised
           to sum to 1 and multiplied by per_expert_scale of the chosen experts
  sparse = post_ff_norm_2(sum over chosen e of w_e * down_e(act(gate_e(h)) * up_e(h))),
           h = pre_ff_norm_2(x)
  x + post_ff_norm(dense + sparse)
Expert weights keep HF's layout: gate_up_proj [E, 2F, D] (gate rows, then up rows),
down_proj [E, D, F]. Every expert runs on every token and the unchosen ones are weighted 0:
exact, and simple to shard, but E / top_k times the expert FLOPs of a routed kernel.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from harnessrl_jax.models.architecture import ModelConfig
from harnessrl_jax.models.layers import _ACTIVATIONS, Linear, RMSNorm, param


class Router(nnx.Module):
  """Per token, the combine weights [N, E] of its top_k experts (zeros elsewhere)."""

  def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
    self.cfg = cfg
    self.norm = RMSNorm(cfg.hidden_size, cfg, scale=False)
    self.proj = Linear(cfg.hidden_size, cfg.num_experts, ("embed", "experts"), cfg, rngs=rngs)
    pdt = jnp.dtype(cfg.param_dtype)
    self.scale = param(None, (cfg.hidden_size,), ("norm",), pdt, "ones")
    self.per_expert_scale = param(None, (cfg.num_experts,), ("experts",), pdt, "ones")

  def __call__(self, x: jax.Array) -> jax.Array:
    cfg = self.cfg
    h = self.norm(x) * self.scale[...].astype(x.dtype) * jnp.asarray(
        cfg.hidden_size ** -0.5, x.dtype)
    probs = jax.nn.softmax(self.proj(h).astype(jnp.float32), axis=-1)
    weights, index = jax.lax.top_k(probs, cfg.top_k_experts)
    weights = weights / jnp.sum(weights, axis=-1, keepdims=True)
    weights = weights * self.per_expert_scale[...].astype(jnp.float32)[index]
    rows = jnp.arange(x.shape[0])[:, None]
    return jnp.zeros(probs.shape, jnp.float32).at[rows, index].set(weights)


class Experts(nnx.Module):
  """The experts' gated MLPs, every one on every token, summed with the router's weights."""

  def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
    self.act = _ACTIVATIONS[cfg.hidden_act]
    self.dtype = jnp.dtype(cfg.dtype)
    e, f, d = cfg.num_experts, cfg.moe_intermediate_size, cfg.hidden_size
    pdt = jnp.dtype(cfg.param_dtype)
    self.gate_up_proj = param(rngs, (e, 2 * f, d), ("experts", "moe_mlp", "embed"), pdt,
                              "normal")
    self.down_proj = param(rngs, (e, d, f), ("experts", "embed", "moe_mlp"), pdt, "normal")

  def __call__(self, x: jax.Array, combine: jax.Array) -> jax.Array:
    """x [N, D], combine [N, E] float32 -> [N, D]."""
    gate, up = jnp.split(jnp.einsum("nd,efd->nef", x, self.gate_up_proj[...].astype(
        self.dtype)), 2, axis=-1)
    out = jnp.einsum("nef,edf->ned", self.act(gate) * up,
                     self.down_proj[...].astype(self.dtype))
    # Each expert's output weighted in float32 and cast, then summed, as HF accumulates.
    return jnp.sum((out * combine[..., None]).astype(x.dtype), axis=1)


class MoE(nnx.Module):
  """The sparse half of a MoE layer: post_ff_norm_2(experts(pre_ff_norm_2(x), router(x))).
  Its norms are HF's `pre_feedforward_layernorm_2` / `post_feedforward_layernorm_2`, which
  sit on the layer there (hf_io leaves this module's name out)."""

  def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
    self.router = Router(cfg, rngs=rngs)
    self.experts = Experts(cfg, rngs=rngs)
    self.pre_feedforward_layernorm_2 = RMSNorm(cfg.hidden_size, cfg)
    self.post_feedforward_layernorm_2 = RMSNorm(cfg.hidden_size, cfg)

  def __call__(self, x: jax.Array) -> jax.Array:
    """x [B, T, D] (the residual stream) -> [B, T, D]."""
    flat = x.reshape(-1, x.shape[-1])
    out = self.experts(self.pre_feedforward_layernorm_2(flat), self.router(flat))
    return self.post_feedforward_layernorm_2(out).reshape(x.shape)
