"""Schema constraints inside the jitted sampler: the token mask and the state update.

A batch's schemas (`schema_dfa.TokenDFA`, one per row or None) are joined into one table,
`Constraints`, whose state 0 is the free state: every token allowed, every token leading
back to it, cost 0. Rows without a schema sit in it for good, and a constrained row returns
to it after its stop token. Per step, in the decode loop, with no host round trip:

  allowed = next_state[state, token_class] >= 0  and  cost[next] < tokens left
  state   = next_state[state, token_class[token]]

"tokens left" counts the token being chosen, so after it cost[next] - 1 < tokens left - 1
more must still fit: a constrained answer always closes before max_new_tokens. The free
state allows every token (cost 0), so masking a free row leaves its logits as they were;
a batch with no schema at all skips the mask entirely (`decode(..., constraints=None)`).

Shapes are rounded up to powers of two (`bucket`) so that new schemas of similar size reuse
the compiled sampler.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from harnessrl_jax.rollout.schema_dfa import END, NEVER, TokenDFA

MIN_BUCKET = 64


def bucket(n: int, minimum: int = MIN_BUCKET) -> int:
  """The power of two >= max(n, minimum)."""
  return max(minimum, 1 << max(0, int(n) - 1).bit_length())


@struct.dataclass
class Constraints:
  """The joined table of a batch (see the module docstring)."""

  next_state: jax.Array   # [S, C] int32, -1: not allowed; row 0 the free state
  token_class: jax.Array  # [V] int32
  cost: jax.Array         # [S] int32


def join(dfas: Sequence[TokenDFA | None]) -> tuple[Constraints, np.ndarray]:
  """(the batch's Constraints as NumPy arrays, each row's initial state [B] int32).

  At least one row needs a schema; all were compiled for the same vocabulary (the model's
  logits width). Rows sharing a schema share its states. Token classes are refined
  jointly: two ids share a class iff every schema in the batch groups them together.
  """
  unique: dict[str, TokenDFA] = {}
  for d in dfas:
    if d is not None:
      unique.setdefault(d.key, d)
  parts = list(unique.values())
  if not parts or len({d.token_class.shape[0] for d in parts}) != 1:
    raise ValueError("token_mask.join: needs schemas compiled for one vocabulary")
  stacked = np.stack([d.token_class for d in parts], axis=1)         # [V, k]
  combos, token_class = np.unique(stacked, axis=0, return_inverse=True)
  token_class = token_class.reshape(-1).astype(np.int32)
  total = 1 + sum(d.num_states for d in parts)
  table = np.full((bucket(total), bucket(len(combos))), -1, np.int32)
  cost = np.full((table.shape[0],), NEVER, np.int32)
  table[0, :] = 0
  cost[0] = 0
  offset, start = 1, {}
  for k, d in enumerate(parts):
    block = d.next_state[:, combos[:, k]]                              # [S_k, C_joint]
    block = np.where(block >= 0, block + offset, np.where(block == END, 0, -1))
    table[offset:offset + d.num_states, :len(combos)] = block
    cost[offset:offset + d.num_states] = d.cost
    start[d.key] = offset + d.initial
    offset += d.num_states
  initial = np.asarray([0 if d is None else start[d.key] for d in dfas], np.int32)
  return Constraints(table, token_class, cost), initial


def allowed(c: Constraints, state: jax.Array, tokens_left: jax.Array) -> jax.Array:
  """[B, V] bool: the tokens each row may sample now. `tokens_left` [B] or scalar counts
  the token being chosen."""
  nxt = c.next_state[state][:, c.token_class]                        # [B, V]
  left = jnp.broadcast_to(jnp.asarray(tokens_left, jnp.int32), state.shape)
  return (nxt >= 0) & (c.cost[jnp.maximum(nxt, 0)] < left[:, None])


def advance(c: Constraints, state: jax.Array, tokens: jax.Array) -> jax.Array:
  """[B] each row's state after its sampled token (a masked sample never leaves -1)."""
  return jnp.maximum(c.next_state[state, c.token_class[tokens]], 0)
