"""The key/value cache the decoder reads and writes during prefill and decode.

Shapes: k, v [attention layers, batch, max_len, num_kv_heads, head_dim] (every layer but
linear_attention ones, in order); mask [batch, max_len] (True where a slot holds a real
token); index: the next slot to write (int32 scalar, the same for every row: rows are aligned
by left-padding the prompt); linear: one GatedDeltaNetState per linear_attention layer (a
constant size whatever the length: conv [batch, K-1, C], recurrent [batch, Hv, dk, dv]).

Ring (`init_cache(..., ring=True)`): the sliding_attention layers keep their K/V in
ring_k, ring_v [sliding layers, batch, W, num_kv_heads, head_dim] (W = sliding_window): slot s
lives in entry s % W, so memory follows the window, not the context; k, v then hold only the
other attention layers. Which slot an entry holds follows from `index` alone (`ring_slots`).
Without ring, sliding layers read their window from the full-length k, v through the mask
(Gemma 4 always rings them: its full layers' heads differ in size, and k, v hold those).
KV-shared layers (Gemma 4) have no entries: they read their source layer's.
Size max_len for the prompt plus every token to be generated: a write past the end cannot
raise inside jit (dynamic_update_slice clamps its start) and would overwrite earlier slots.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from harnessrl_jax.models.architecture import ModelConfig
from harnessrl_jax.models.linear_attention import GatedDeltaNetState, zero_state


@struct.dataclass
class KVCache:
  k: jax.Array
  v: jax.Array
  mask: jax.Array
  index: jax.Array
  linear: tuple[GatedDeltaNetState, ...] = ()
  ring_k: jax.Array | None = None
  ring_v: jax.Array | None = None

  @property
  def max_len(self) -> int:
    return self.mask.shape[1]


def init_cache(cfg: ModelConfig, batch: int, max_len: int, dtype=None, *,
               ring: bool = False) -> KVCache:
  """An empty cache: every slot masked out, index 0. `dtype` defaults to `cfg.dtype`.
  ring: sliding_attention layers get a window-sized ring (module docstring)."""
  dtype = jnp.dtype(dtype or cfg.dtype)
  # Gemma 4's sliding and full layers differ in head sizes, so they cannot share one array:
  # its sliding layers always keep rings.
  ring = ring or cfg.family == "gemma4"
  ringed = cfg.ring_layers if ring else ()
  full = [i for i in cfg.attention_layers if i not in ringed]
  kind = "full_attention" if cfg.family == "gemma4" else "sliding_attention"
  shape = (len(full), batch, max_len, cfg.kv_heads_of(kind), cfg.head_dim_of(kind))
  ring_shape = (len(ringed), batch, cfg.sliding_window or 0, cfg.num_kv_heads, cfg.head_dim)
  return KVCache(k=jnp.zeros(shape, dtype), v=jnp.zeros(shape, dtype),
                 mask=jnp.zeros((batch, max_len), bool), index=jnp.zeros((), jnp.int32),
                 # conv history in the activation dtype: it is what the layer carries.
                 linear=tuple(zero_state(cfg, batch) for _ in cfg.linear_layers),
                 ring_k=jnp.zeros(ring_shape, dtype) if ringed else None,
                 ring_v=jnp.zeros(ring_shape, dtype) if ringed else None)


def ring_slots(index: jax.Array, window: int) -> tuple[jax.Array, jax.Array]:
  """(slot held by each ring entry [W] int32, whether it holds one [W] bool) once slots
  [0, index) are written: entry w holds the latest slot s < index with s % W == w."""
  w = jnp.arange(window)
  last = index - 1
  return last - jnp.mod(last - w, window), w <= last


@struct.dataclass
class DecodeCache:
  """A KVCache in the layouts decode attention reads in place: k [L, B, kv_heads, S,
  head_dim], v [L, B, kv_heads, head_dim, S]; mask and index as in KVCache.

  XLA:CPU otherwise copies each layer's K and V into these layouts at every decoded token
  (measured: 21.5 -> 14.7 ms of attention per SmolLM2 step at 143 slots). The sampler
  converts its prefilled cache once and grows it per decode phase (`grow`), so attention
  reads only slots that can be filled.
  """
  k: jax.Array
  v: jax.Array
  mask: jax.Array
  index: jax.Array
  linear: tuple[GatedDeltaNetState, ...] = ()
  ring_k: jax.Array | None = None   # [sliding layers, B, kv_heads, W, head_dim]
  ring_v: jax.Array | None = None   # [sliding layers, B, kv_heads, head_dim, W]

  @property
  def max_len(self) -> int:
    return self.mask.shape[1]


def to_decode_cache(cache: KVCache) -> DecodeCache:
  """The same slots and contents in the decode layouts (one copy)."""
  ringed = cache.ring_k is not None
  return DecodeCache(k=jnp.transpose(cache.k, (0, 1, 3, 2, 4)),
                     v=jnp.transpose(cache.v, (0, 1, 3, 4, 2)),
                     mask=cache.mask, index=cache.index, linear=cache.linear,
                     ring_k=jnp.transpose(cache.ring_k, (0, 1, 3, 2, 4)) if ringed else None,
                     ring_v=jnp.transpose(cache.ring_v, (0, 1, 3, 4, 2)) if ringed else None)


def map_rows(cache: KVCache | DecodeCache, fn) -> KVCache | DecodeCache:
  """`cache` with fn(array, batch_axis) applied to every per-row array (e.g. repeat each
  prompt's row J times, or select rows)."""
  ringed = cache.ring_k is not None
  return cache.replace(k=fn(cache.k, 1), v=fn(cache.v, 1), mask=fn(cache.mask, 0),
                       linear=jax.tree.map(lambda x: fn(x, 0), cache.linear),
                       ring_k=fn(cache.ring_k, 1) if ringed else None,
                       ring_v=fn(cache.ring_v, 1) if ringed else None)


def grow(cache: DecodeCache, max_len: int) -> DecodeCache:
  """`cache` with empty (masked) slots appended up to `max_len` (one copy)."""
  extra = max_len - cache.max_len
  if extra < 0:
    raise ValueError(f"grow: the cache has {cache.max_len} slots, more than {max_len}")
  pad = lambda x, axis: jnp.pad(x, [(0, extra if a == axis else 0) for a in range(x.ndim)])
  return cache.replace(k=pad(cache.k, 3), v=pad(cache.v, 4), mask=pad(cache.mask, 1))
