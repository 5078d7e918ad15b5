"""The key/value cache the decoder reads and writes during prefill and decode.

Shapes: k, v [num_layers, batch, max_len, num_kv_heads, head_dim]; mask [batch, max_len]
(True where a slot holds a real token); index: the next slot to write (int32 scalar, the
same for every row: rows are aligned by left-padding the prompt).
Size max_len for the prompt plus every token to be generated: a write past the end cannot
raise inside jit (dynamic_update_slice clamps its start) and would overwrite earlier slots.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from harnessrl_jax.models.config import ModelConfig


@struct.dataclass
class KVCache:
  k: jax.Array
  v: jax.Array
  mask: jax.Array
  index: jax.Array

  @property
  def max_len(self) -> int:
    return self.k.shape[2]


def init_cache(cfg: ModelConfig, batch: int, max_len: int, dtype=None) -> KVCache:
  """An empty cache: every slot masked out, index 0. `dtype` defaults to `cfg.dtype`."""
  dtype = jnp.dtype(dtype or cfg.dtype)
  shape = (cfg.num_layers, batch, max_len, cfg.num_kv_heads, cfg.head_dim)
  return KVCache(k=jnp.zeros(shape, dtype), v=jnp.zeros(shape, dtype),
                 mask=jnp.zeros((batch, max_len), bool), index=jnp.zeros((), jnp.int32))
