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

from harnessrl_jax.models.architecture import ModelConfig

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

  Gemma 3 and Qwen3.5 store the weight as an offset from 1 (initialised to 0), Gemma 4 as it
  is; those multiply in float32 before the cast, Llama/Qwen cast first, then multiply. All
  as HF does. scale=False: no weight (Gemma 4's norm on values).
  """

  def __init__(self, dim: int, cfg: ModelConfig, axis_name: str = "norm", *,
               scale: bool = True):
    self.eps = cfg.rms_norm_eps
    self.dtype = jnp.dtype(cfg.dtype)
    self.offset = cfg.zero_centred_norms
    self.in_float32 = cfg.norm_scale_in_float32
    self.weight = (param(None, (dim,), (axis_name,), jnp.dtype(cfg.param_dtype),
                         "zeros" if self.offset else "ones") if scale else None)

  def __call__(self, x: jax.Array) -> jax.Array:
    x32 = x.astype(jnp.float32)
    x32 = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + self.eps)
    if self.weight is None:
      return x32.astype(self.dtype)
    if self.in_float32:
      w = self.weight[...].astype(jnp.float32)
      return (x32 * (1.0 + w if self.offset else w)).astype(self.dtype)
    return self.weight[...].astype(self.dtype) * x32.astype(self.dtype)


def softcap(x: jax.Array, cap: float | None) -> jax.Array:
  """cap * tanh(x / cap) (Gemma's soft-capping of logits); x when cap is None."""
  return x if cap is None else cap * jnp.tanh(x / cap)


def rope_inv_freq(cfg: ModelConfig, layer_type: str = "full_attention") -> np.ndarray:
  """Inverse frequencies [rotary_dim/2] (float32) of one layer type: sliding layers use
  `rope_local_theta` unscaled; full layers `rope_theta` with llama3, linear or proportional
  scaling."""
  sliding = layer_type == "sliding_attention"
  theta = cfg.rope_local_theta if sliding else cfg.rope_theta
  scaling = None if sliding else cfg.rope_scaling
  if scaling is not None and scaling.get("rope_type") == "proportional":
    return _proportional_inv_freq(cfg.head_dim_of(layer_type), theta, scaling)
  dim = cfg.rotary_dim if cfg.family != "gemma4" else cfg.head_dim_of(layer_type)
  inv_freq = 1.0 / (theta ** (np.arange(0, dim, 2, dtype=np.int64).astype(np.float32) / dim))
  inv_freq = inv_freq.astype(np.float32)
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


def _proportional_inv_freq(head_dim: int, theta: float, scaling) -> np.ndarray:
  """Gemma 4's "proportional" RoPE [head_dim/2]: the first partial_rotary_factor of the
  frequency pairs at theta**(-2i/head_dim) (the exponent over the whole head), the rest 0
  (cos 1, sin 0: those dims pass unrotated); all divided by `factor`."""
  rotated = int(float(scaling.get("partial_rotary_factor", 1.0)) * head_dim // 2)
  exponents = np.arange(0, 2 * rotated, 2, dtype=np.int64).astype(np.float32) / head_dim
  inv_freq = np.zeros(head_dim // 2, np.float32)
  inv_freq[:rotated] = 1.0 / (theta ** exponents)
  return (inv_freq / np.float32(scaling.get("factor", 1.0))).astype(np.float32)


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
  Qwen3.5), Gemma 3's query scale, Qwen3.5's output gate and Gemma 4's per-type head sizes,
  value norm, K = V and KV sharing. Sliding-window layers differ only in the mask and RoPE
  tables their caller passes (and, in Gemma 4, in head sizes).

  Output gate (cfg.attn_output_gate): q_proj yields [query_h, gate_h] per head h (2 * hd
  columns each, HF's layout); the attention output is multiplied by sigmoid(gate) before
  o_proj.

  Gemma 4: values get a scale-less RMSNorm; full layers with `attention_k_eq_v` have no
  v_proj (values are k_proj's output, normed as values, unroped). A KV-shared layer
  (`shared=True`) has only q_proj, q_norm and o_proj: it attends over the keys/values another
  layer returned (`keys`, below), under its own mask.
  """

  def __init__(self, cfg: ModelConfig, layer_type: str = "full_attention", *,
               shared: bool = False, rngs: nnx.Rngs):
    self.cfg = cfg
    d = cfg.hidden_size
    self.head_dim = hd = cfg.head_dim_of(layer_type)
    self.kv_heads = cfg.kv_heads_of(layer_type)
    self.shared = shared
    gemma4 = cfg.family == "gemma4"
    q_width = cfg.num_heads * hd * (2 if cfg.attn_output_gate else 1)
    # Created in the order q, k, v, o: a seed gives the same weights as before Gemma 4.
    self.q_proj = Linear(d, q_width, ("embed", "q_heads"), cfg,
                         bias=cfg.attention_bias, rngs=rngs)
    own = not shared   # a KV-shared layer has no key/value weights
    kv_width = self.kv_heads * hd
    self.k_proj = (Linear(d, kv_width, ("embed", "kv_heads"), cfg, bias=cfg.attention_bias,
                          rngs=rngs) if own else None)
    k_eq_v = cfg.attention_k_eq_v and layer_type == "full_attention"
    self.v_proj = (Linear(d, kv_width, ("embed", "kv_heads"), cfg, bias=cfg.attention_bias,
                          rngs=rngs) if own and not k_eq_v else None)
    self.o_proj = Linear(cfg.num_heads * hd, d, ("q_heads", "embed"), cfg, rngs=rngs)
    self.q_norm = RMSNorm(hd, cfg, "head_dim") if cfg.qk_norm else None
    self.k_norm = RMSNorm(hd, cfg, "head_dim") if own and cfg.qk_norm else None
    self.v_norm = RMSNorm(hd, cfg, "head_dim", scale=False) if own and gemma4 else None

  def __call__(self, x: jax.Array, cos: jax.Array, sin: jax.Array, allowed: jax.Array,
               kv: tuple | None, keys: tuple | None = None):
    """x [B,T,D]; allowed [B,T,S] (query t may see key/slot s).

    kv: None (keys are this call's tokens) or (k_cache, v_cache, layer, index, decode, ring)
    with caches [L,B,S,K,hd]: this call's K/V are written at slots [index, index+T) of
    `layer`, and the queries read every slot. decode True: the caches are a DecodeCache's
    (k [L,B,K,S,hd], v [L,B,K,hd,S]), read whole and in place. ring True: the caches are
    window-sized rings (kv_cache module docstring) with S = W entries; the queries read the
    ring as it was before this call, then this call's T tokens (allowed [B,T,W+T]), and the
    last min(T, W) of them are written at entries (slot % W). A KV-shared layer writes
    nothing: kv (its caches unused) only says which of these layouts `keys` are in.
    Returns (out [B,T,D], updated (k_cache, v_cache) or None, keys): keys are the
    keys/values these queries read, for a KV-shared layer: (k, v) [B,S,K,hd] without a
    cache or with a KVCache, the DecodeCache layer's (k, v) in its layouts, or for a ring
    (old ring k, old ring v, new k, new v).
    """
    cfg = self.cfg
    b, t, _ = x.shape
    hd = self.head_dim
    gate = None
    if cfg.attn_output_gate:
      q, gate = jnp.split(self.q_proj(x).reshape(b, t, cfg.num_heads, 2 * hd), 2, -1)
      gate = jax.nn.sigmoid(gate.reshape(b, t, cfg.num_heads * hd))
    else:
      q = self.q_proj(x).reshape(b, t, cfg.num_heads, hd)
    if self.q_norm is not None:
      q = self.q_norm(q)
    q = apply_rope(q, cos, sin)
    decode = kv is not None and kv[4]
    ring = kv is not None and kv[5]
    new_kv = None
    if self.shared:
      if keys is None:
        raise ValueError("a KV-shared attention layer needs the keys of its source layer")
    else:
      k = self.k_proj(x).reshape(b, t, self.kv_heads, hd)
      v = k if self.v_proj is None else self.v_proj(x).reshape(b, t, self.kv_heads, hd)
      if self.k_norm is not None:
        k = self.k_norm(k)
      if self.v_norm is not None:
        v = self.v_norm(v)
      k = apply_rope(k, cos, sin)
      keys, new_kv = self._store(k, v, kv)
    groups = cfg.num_heads // self.kv_heads
    # Query head h uses KV head h // groups (HF's repeat_kv order).
    q = q.reshape(b, t, self.kv_heads, groups, hd)
    if ring:
      out = self._attend_ring(q, keys, allowed, decode)
    elif decode:
      k_layer, v_layer = keys
      scores = jnp.einsum("btkgd,bksd->bkgts", q, k_layer.astype(x.dtype),
                          preferred_element_type=jnp.float32)
      out = jnp.einsum("bkgts,bkds->btkgd", self._probs(scores, allowed, x.dtype),
                       v_layer.astype(x.dtype))
    else:
      k_all, v_all = (a.astype(x.dtype) for a in keys)
      scores = jnp.einsum("btkgd,bskd->bkgts", q, k_all, preferred_element_type=jnp.float32)
      out = jnp.einsum("bkgts,bskd->btkgd", self._probs(scores, allowed, x.dtype), v_all)
    return self._output(out, gate), new_kv, keys

  def _store(self, k: jax.Array, v: jax.Array, kv):
    """(keys the queries read, updated caches or None) for this call's k, v [B,T,K,hd]."""
    if kv is None:
      return (k, v), None
    k_cache, v_cache, layer, index, decode, ring = kv
    if ring:
      return self._write_ring(k, v, kv)
    if decode:
      k_cache = jax.lax.dynamic_update_slice(
          k_cache, jnp.transpose(k, (0, 2, 1, 3))[None].astype(k_cache.dtype),
          (layer, 0, 0, index, 0))
      v_cache = jax.lax.dynamic_update_slice(
          v_cache, jnp.transpose(v, (0, 2, 3, 1))[None].astype(v_cache.dtype),
          (layer, 0, 0, 0, index))
    else:
      start = (layer, 0, index, 0, 0)
      k_cache = jax.lax.dynamic_update_slice(k_cache, k[None].astype(k_cache.dtype), start)
      v_cache = jax.lax.dynamic_update_slice(v_cache, v[None].astype(v_cache.dtype), start)
    return (k_cache[layer], v_cache[layer]), (k_cache, v_cache)

  def _write_ring(self, k, v, kv):
    """Keys of a ring-cached layer (the ring before this call, then this call's k, v) and
    the rings with the last min(T, W) new tokens written at entries slot % W."""
    ring_k, ring_v, layer, index, decode, _ = kv
    t = k.shape[1]
    old_k, old_v = ring_k[layer], ring_v[layer]
    window = old_k.shape[2] if decode else old_k.shape[1]
    # Only the last W new tokens can be read later; writing just those keeps the scatter's
    # entries distinct.
    n = min(t, window)
    entries = jnp.mod(index + t - n + jnp.arange(n), window)
    new_k, new_v = k[:, t - n:].astype(ring_k.dtype), v[:, t - n:].astype(ring_v.dtype)
    if decode:
      layer_k = old_k.at[:, :, entries].set(jnp.transpose(new_k, (0, 2, 1, 3)))
      layer_v = old_v.at[..., entries].set(jnp.transpose(new_v, (0, 2, 3, 1)))
    else:
      layer_k = old_k.at[:, entries].set(new_k)
      layer_v = old_v.at[:, entries].set(new_v)
    return ((old_k, old_v, k, v),
            (ring_k.at[layer].set(layer_k), ring_v.at[layer].set(layer_v)))

  def _attend_ring(self, q, keys, allowed, decode: bool):
    """Attention over a window-sized ring plus this call's tokens (see __call__)."""
    dtype = q.dtype
    old_k, old_v, k, v = (a.astype(dtype) for a in keys)
    # The ring's entry axis in each layout: KVCache [B,W,K,hd]; DecodeCache k [B,K,W,hd],
    # v [B,K,hd,W] (read in place, as decode attention reads the full cache).
    old_spec = ("bkwd", "bkdw") if decode else ("bwkd", "bwkd")
    scores = jnp.concatenate([
        jnp.einsum(f"btkgd,{old_spec[0]}->bkgtw", q, old_k, preferred_element_type=jnp.float32),
        jnp.einsum("btkgd,bskd->bkgts", q, k, preferred_element_type=jnp.float32)], axis=-1)
    probs = self._probs(scores, allowed, dtype)
    window = old_k.shape[2] if decode else old_k.shape[1]
    return (jnp.einsum(f"bkgtw,{old_spec[1]}->btkgd", probs[..., :window], old_v)
            + jnp.einsum("bkgts,bskd->btkgd", probs[..., window:], v))

  def _output(self, out: jax.Array, gate: jax.Array | None) -> jax.Array:
    """o_proj of the heads' outputs [B,T,K,G,hd], gated first when configured."""
    b, t = out.shape[:2]
    out = out.reshape(b, t, self.cfg.num_heads * self.head_dim)
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

  def __init__(self, cfg: ModelConfig, *, wide: bool = False, rngs: nnx.Rngs):
    """wide: twice intermediate_size (Gemma 4's KV-shared layers with double_wide_mlp)."""
    self.act = _ACTIVATIONS[cfg.hidden_act]
    d, f = cfg.hidden_size, cfg.intermediate_size * (2 if wide else 1)
    self.gate_proj = Linear(d, f, ("embed", "mlp"), cfg, rngs=rngs)
    self.up_proj = Linear(d, f, ("embed", "mlp"), cfg, rngs=rngs)
    self.down_proj = Linear(f, d, ("mlp", "embed"), cfg, rngs=rngs)

  def __call__(self, x: jax.Array) -> jax.Array:
    return self.down_proj(self.act(self.gate_proj(x)) * self.up_proj(x))
