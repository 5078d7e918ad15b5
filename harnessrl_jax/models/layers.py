"""Building blocks of the decoder: linear, RMSNorm, RoPE, grouped-query attention and the
gated MLP (SwiGLU, or GeGLU for Gemma). `block.py` composes them into a residual block.

Every `nnx.Param` carries logical axis names in its `out_sharding` metadata (created with
eager sharding off, so building a model needs no mesh); `sharding.py` maps them to mesh axes.
Logical axes: vocab, embed, q_heads (num_heads*head_dim), kv_heads (num_kv_heads*head_dim),
mlp, norm, head_dim.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from harnessrl_jax.models.config import ModelConfig

# Finite rather than -inf so a query with no visible key (a padding row) gives a uniform
# softmax instead of NaNs.
_MASKED = -1e30


def param(rngs: nnx.Rngs | None, shape: tuple[int, ...], axes: tuple[str, ...], dtype,
          init: str) -> nnx.Param:
  """A parameter with logical axes; init "normal" (std 0.02, as HF initialises), "ones", "zeros"."""
  if init == "ones":
    value = jnp.ones(shape, dtype)
  elif init == "zeros":
    value = jnp.zeros(shape, dtype)
  else:
    value = (0.02 * jax.random.normal(rngs.params(), shape, jnp.float32)).astype(dtype)
  return nnx.Param(value, out_sharding=axes, eager_sharding=False)


class Linear(nnx.Module):
  """y = x @ kernel (+ bias); kernel is [in, out] (HF stores the transpose)."""

  def __init__(self, d_in: int, d_out: int, axes: tuple[str, str], cfg: ModelConfig, *,
               bias: bool = False, rngs: nnx.Rngs):
    self.dtype = jnp.dtype(cfg.dtype)
    self.kernel = param(rngs, (d_in, d_out), axes, jnp.dtype(cfg.param_dtype), "normal")
    self.bias = (param(rngs, (d_out,), axes[1:], jnp.dtype(cfg.param_dtype), "zeros")
                 if bias else None)

  def __call__(self, x: jax.Array) -> jax.Array:
    # As one 2-D matmul: XLA:CPU runs the kernel gradient of a [B, T, D] x [D, F] dot
    # (a contraction over two dims) ~1.5x slower than the same dot on [B * T, D].
    lead = x.shape[:-1]
    y = jnp.dot(x.reshape(-1, x.shape[-1]).astype(self.dtype),
                self.kernel[...].astype(self.dtype)).reshape(*lead, -1)
    if self.bias is not None:
      y = y + self.bias[...].astype(self.dtype)
    return y


class RMSNorm(nnx.Module):
  """x / rms(x) * weight, computed in float32 and returned in the activation dtype.

  Gemma stores the weight as an offset from 1 (initialised to 0) and multiplies in float32
  before the cast; Llama/Qwen cast first, then multiply. Both as HF does.
  """

  def __init__(self, dim: int, cfg: ModelConfig, axis_name: str = "norm"):
    self.eps = cfg.rms_norm_eps
    self.dtype = jnp.dtype(cfg.dtype)
    self.offset = cfg.zero_centred_norms
    self.weight = param(None, (dim,), (axis_name,), jnp.dtype(cfg.param_dtype),
                        "zeros" if self.offset else "ones")

  def __call__(self, x: jax.Array) -> jax.Array:
    x32 = x.astype(jnp.float32)
    x32 = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + self.eps)
    if self.offset:
      return (x32 * (1.0 + self.weight[...].astype(jnp.float32))).astype(self.dtype)
    return self.weight[...].astype(self.dtype) * x32.astype(self.dtype)


def softcap(x: jax.Array, cap: float | None) -> jax.Array:
  """cap * tanh(x / cap) (Gemma's soft-capping of logits); x when cap is None."""
  return x if cap is None else cap * jnp.tanh(x / cap)


def rope_inv_freq(cfg: ModelConfig, layer_type: str = "full_attention") -> np.ndarray:
  """Inverse frequencies [head_dim/2] (float32) of one layer type: sliding layers use
  `rope_local_theta` unscaled; full layers `rope_theta` with llama3 or linear scaling."""
  dim = cfg.rotary_dim
  sliding = layer_type == "sliding_attention"
  theta = cfg.rope_local_theta if sliding else cfg.rope_theta
  inv_freq = 1.0 / (theta ** (np.arange(0, dim, 2, dtype=np.int64).astype(np.float32) / dim))
  inv_freq = inv_freq.astype(np.float32)
  scaling = None if sliding else cfg.rope_scaling
  if scaling is not None and scaling.get("rope_type") == "linear":
    # Position interpolation: positions divided by `factor`, i.e. every frequency.
    inv_freq = (inv_freq / np.float32(scaling["factor"])).astype(np.float32)
  if scaling is not None and scaling.get("rope_type") == "llama3":
    # Llama 3.1 scaling: long wavelengths are divided by `factor`, short ones kept, and the
    # band between is interpolated smoothly (wavelength thresholds from the original context).
    factor = float(scaling["factor"])
    low, high = float(scaling["low_freq_factor"]), float(scaling["high_freq_factor"])
    old_ctx = float(scaling["original_max_position_embeddings"])
    wavelen = 2 * math.pi / inv_freq
    low_wavelen, high_wavelen = old_ctx / low, old_ctx / high
    scaled = np.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
    smooth = (old_ctx / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
    inv_freq = np.where(medium, smoothed, scaled).astype(np.float32)
  return inv_freq


def rope_cos_sin(positions: jax.Array, inv_freq: np.ndarray, dtype) -> tuple[jax.Array, jax.Array]:
  """cos, sin [B, T, head_dim] for integer positions [B, T] (halves repeated, as HF)."""
  angles = positions.astype(jnp.float32)[..., None] * jnp.asarray(inv_freq)[None, None, :]
  angles = jnp.concatenate([angles, angles], axis=-1)
  return jnp.cos(angles).astype(dtype), jnp.sin(angles).astype(dtype)


def apply_rope(x: jax.Array, cos: jax.Array, sin: jax.Array) -> jax.Array:
  """Rotates x [B, T, heads, head_dim] with the split-halves convention of HF checkpoints;
  cos/sin [B, T, r] with r < head_dim (partial rotary) rotate the first r dims only."""
  r = cos.shape[-1]
  if r < x.shape[-1]:
    return jnp.concatenate([apply_rope(x[..., :r], cos, sin), x[..., r:]], axis=-1)
  half = r // 2
  rotated = jnp.concatenate([-x[..., half:], x[..., :half]], axis=-1)
  return x * cos[:, :, None, :] + rotated * sin[:, :, None, :]


class Attention(nnx.Module):
  """Grouped-query self-attention with optional q/k/v bias (Qwen2), QK-norm (Qwen3, Gemma,
  Qwen3.5), Gemma's query scale and Qwen3.5's output gate. Sliding-window layers differ
  only in the mask and RoPE tables their caller passes.

  Output gate (cfg.attn_output_gate): q_proj yields [query_h, gate_h] per head h (2 * hd
  columns each, HF's layout); the attention output is multiplied by sigmoid(gate) before
  o_proj.
  """

  def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
    self.cfg = cfg
    d, hd = cfg.hidden_size, cfg.head_dim
    q_width = cfg.num_heads * hd * (2 if cfg.attn_output_gate else 1)
    self.q_proj = Linear(d, q_width, ("embed", "q_heads"), cfg,
                         bias=cfg.attention_bias, rngs=rngs)
    self.k_proj = Linear(d, cfg.num_kv_heads * hd, ("embed", "kv_heads"), cfg,
                         bias=cfg.attention_bias, rngs=rngs)
    self.v_proj = Linear(d, cfg.num_kv_heads * hd, ("embed", "kv_heads"), cfg,
                         bias=cfg.attention_bias, rngs=rngs)
    self.o_proj = Linear(cfg.num_heads * hd, d, ("q_heads", "embed"), cfg, rngs=rngs)
    if cfg.qk_norm:
      self.q_norm = RMSNorm(hd, cfg, "head_dim")
      self.k_norm = RMSNorm(hd, cfg, "head_dim")
    else:
      self.q_norm = self.k_norm = None

  def __call__(self, x: jax.Array, cos: jax.Array, sin: jax.Array, allowed: jax.Array,
               kv: tuple[jax.Array, jax.Array, int, jax.Array] | None):
    """x [B,T,D]; allowed [B,T,S] (query t may see key/slot s).

    kv: None (keys are this call's tokens) or (k_cache, v_cache, layer, index, decode, ring)
    with caches [L,B,S,K,hd]: this call's K/V are written at slots [index, index+T) of
    `layer`, and the queries read every slot. decode True: the caches are a DecodeCache's
    (k [L,B,K,S,hd], v [L,B,K,hd,S]), read whole and in place. ring True: the caches are
    window-sized rings (kv_cache module docstring) with S = W entries; the queries read the
    ring as it was before this call, then this call's T tokens (allowed [B,T,W+T]), and the
    last min(T, W) of them are written at entries (slot % W).
    Returns (out [B,T,D], updated (k_cache, v_cache) or None).
    """
    cfg = self.cfg
    b, t, _ = x.shape
    gate = None
    if cfg.attn_output_gate:
      q, gate = jnp.split(self.q_proj(x).reshape(b, t, cfg.num_heads, 2 * cfg.head_dim), 2, -1)
      gate = jax.nn.sigmoid(gate.reshape(b, t, cfg.num_heads * cfg.head_dim))
    else:
      q = self.q_proj(x).reshape(b, t, cfg.num_heads, cfg.head_dim)
    k = self.k_proj(x).reshape(b, t, cfg.num_kv_heads, cfg.head_dim)
    v = self.v_proj(x).reshape(b, t, cfg.num_kv_heads, cfg.head_dim)
    if self.q_norm is not None:
      q, k = self.q_norm(q), self.k_norm(k)
    q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
    groups = cfg.num_heads // cfg.num_kv_heads
    # Query head h uses KV head h // groups (HF's repeat_kv order).
    q = q.reshape(b, t, cfg.num_kv_heads, groups, cfg.head_dim)
    if kv is not None and kv[5]:
      return self._ring_attention(q, k, v, gate, allowed, kv)
    if kv is not None and kv[4]:
      k_cache, v_cache, layer, index, _, _ = kv
      k_cache = jax.lax.dynamic_update_slice(
          k_cache, jnp.transpose(k, (0, 2, 1, 3))[None].astype(k_cache.dtype),
          (layer, 0, 0, index, 0))
      v_cache = jax.lax.dynamic_update_slice(
          v_cache, jnp.transpose(v, (0, 2, 3, 1))[None].astype(v_cache.dtype),
          (layer, 0, 0, 0, index))
      scores = jnp.einsum("btkgd,bksd->bkgts", q, k_cache[layer].astype(x.dtype),
                          preferred_element_type=jnp.float32)
      out = jnp.einsum("bkgts,bkds->btkgd", self._probs(scores, allowed, x.dtype),
                       v_cache[layer].astype(x.dtype))
      return self._output(out, gate), (k_cache, v_cache)
    new_kv = None
    if kv is not None:
      k_cache, v_cache, layer, index, _, _ = kv
      start = (layer, 0, index, 0, 0)
      k_cache = jax.lax.dynamic_update_slice(k_cache, k[None].astype(k_cache.dtype), start)
      v_cache = jax.lax.dynamic_update_slice(v_cache, v[None].astype(v_cache.dtype), start)
      k, v = k_cache[layer].astype(x.dtype), v_cache[layer].astype(x.dtype)
      new_kv = (k_cache, v_cache)
    scores = jnp.einsum("btkgd,bskd->bkgts", q, k, preferred_element_type=jnp.float32)
    out = jnp.einsum("bkgts,bskd->btkgd", self._probs(scores, allowed, x.dtype), v)
    return self._output(out, gate), new_kv

  def _ring_attention(self, q, k, v, gate, allowed, kv):
    """Attention over a window-sized ring plus this call's tokens (see __call__)."""
    ring_k, ring_v, layer, index, decode, _ = kv
    t, dtype = k.shape[1], q.dtype
    old_k, old_v = ring_k[layer].astype(dtype), ring_v[layer].astype(dtype)
    # The ring's entry axis in each layout: KVCache [B,W,K,hd]; DecodeCache k [B,K,W,hd],
    # v [B,K,hd,W] (read in place, as decode attention reads the full cache).
    old_spec = ("bkwd", "bkdw") if decode else ("bwkd", "bwkd")
    scores = jnp.concatenate([
        jnp.einsum(f"btkgd,{old_spec[0]}->bkgtw", q, old_k, preferred_element_type=jnp.float32),
        jnp.einsum("btkgd,bskd->bkgts", q, k, preferred_element_type=jnp.float32)], axis=-1)
    probs = self._probs(scores, allowed, dtype)
    window = old_k.shape[2] if decode else old_k.shape[1]
    out = (jnp.einsum(f"bkgtw,{old_spec[1]}->btkgd", probs[..., :window], old_v)
           + jnp.einsum("bkgts,bskd->btkgd", probs[..., window:], v))
    # Only the last W new tokens can be read later; writing just those keeps the scatter's
    # entries distinct.
    n = min(t, window)
    entries = jnp.mod(index + t - n + jnp.arange(n), window)
    new_k, new_v = k[:, t - n:].astype(ring_k.dtype), v[:, t - n:].astype(ring_v.dtype)
    layer_k, layer_v = ring_k[layer], ring_v[layer]
    if decode:
      layer_k = layer_k.at[:, :, entries].set(jnp.transpose(new_k, (0, 2, 1, 3)))
      layer_v = layer_v.at[..., entries].set(jnp.transpose(new_v, (0, 2, 3, 1)))
    else:
      layer_k = layer_k.at[:, entries].set(new_k)
      layer_v = layer_v.at[:, entries].set(new_v)
    return self._output(out, gate), (ring_k.at[layer].set(layer_k), ring_v.at[layer].set(layer_v))

  def _output(self, out: jax.Array, gate: jax.Array | None) -> jax.Array:
    """o_proj of the heads' outputs [B,T,K,G,hd], gated first when configured."""
    b, t = out.shape[:2]
    out = out.reshape(b, t, self.cfg.num_heads * self.cfg.head_dim)
    return self.o_proj(out if gate is None else out * gate.astype(out.dtype))

  def _probs(self, scores: jax.Array, allowed: jax.Array, dtype) -> jax.Array:
    """softmax over the keys of scores [B,K,G,T,S] * scale, masked where not allowed."""
    scores = scores * self.cfg.attention_scale
    scores = jnp.where(allowed[:, None, None, :, :], scores, _MASKED)
    return jax.nn.softmax(scores, axis=-1).astype(dtype)


_ACTIVATIONS = {"silu": jax.nn.silu,
                "gelu_pytorch_tanh": lambda x: jax.nn.gelu(x, approximate=True)}


class MLP(nnx.Module):
  """Gated MLP: down(act(gate(x)) * up(x)); SwiGLU (silu) or GeGLU (tanh gelu, Gemma)."""

  def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
    self.act = _ACTIVATIONS[cfg.hidden_act]
    d, f = cfg.hidden_size, cfg.intermediate_size
    self.gate_proj = Linear(d, f, ("embed", "mlp"), cfg, rngs=rngs)
    self.up_proj = Linear(d, f, ("embed", "mlp"), cfg, rngs=rngs)
    self.down_proj = Linear(f, d, ("mlp", "embed"), cfg, rngs=rngs)

  def __call__(self, x: jax.Array) -> jax.Array:
    return self.down_proj(self.act(self.gate_proj(x)) * self.up_proj(x))
