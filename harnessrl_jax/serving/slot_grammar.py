"""Schema constraints of the serving engine's decode slots: one table per slot.

The in-process sampler joins a batch's schemas into one table (rollout/token_mask.py); the
serving engine's batch changes one slot at a time, so each slot keeps its own table (the
`token_mask.join` of its request's schema alone) and its own state and token budget, written
by insert and read by every generate step, on the device:

  next_state [slots, S, C]   cost [slots, S]   token_class [slots, V]
  state [slots]              left [slots]: tokens the request may still emit

Row 0 of every slot's table is the free state (all tokens allowed, cost 0), so a request
without a schema, or a slot never used, decodes exactly as without constraints. S and C
are the largest buckets any request has needed so far: a larger schema grows every slot's
table once (a new generate program), smaller ones are padded to it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from harnessrl_jax.rollout import token_mask
from harnessrl_jax.rollout.schema_dfa import NEVER

UNLIMITED = 1 << 30   # `left` of a request without a schema


@struct.dataclass
class SlotGrammar:
  next_state: jax.Array   # [slots, S, C] int32
  cost: jax.Array         # [slots, S] int32
  token_class: jax.Array  # [slots, V] int32
  state: jax.Array        # [slots] int32
  left: jax.Array         # [slots] int32

  @property
  def shape(self) -> tuple[int, int]:
    return self.next_state.shape[1], self.next_state.shape[2]


def empty(slots: int, vocab_size: int, states: int = 0, classes: int = 0) -> SlotGrammar:
  """Every slot free; tables of [states, classes] rounded up to buckets."""
  states, classes = token_mask.bucket(states), token_mask.bucket(classes)
  table = np.full((slots, states, classes), -1, np.int32)
  table[:, 0, :] = 0
  cost = np.full((slots, states), NEVER, np.int32)
  cost[:, 0] = 0
  return SlotGrammar(jnp.asarray(table), jnp.asarray(cost),
                     jnp.zeros((slots, vocab_size), jnp.int32),
                     jnp.zeros((slots,), jnp.int32), jnp.full((slots,), UNLIMITED, jnp.int32))


def grow(g: SlotGrammar, states: int, classes: int) -> SlotGrammar:
  """`g` with tables of at least [states, classes] (padding: not allowed, cost NEVER)."""
  s, c = g.shape
  ds, dc = max(0, states - s), max(0, classes - c)
  if not ds and not dc:
    return g
  return g.replace(
      next_state=jnp.pad(g.next_state, ((0, 0), (0, ds), (0, dc)), constant_values=-1),
      cost=jnp.pad(g.cost, ((0, 0), (0, ds)), constant_values=NEVER))


@jax.jit
def _write(g: SlotGrammar, slot, table, cost, token_class, state, left) -> SlotGrammar:
  return g.replace(next_state=g.next_state.at[slot].set(table), cost=g.cost.at[slot].set(cost),
                   token_class=g.token_class.at[slot].set(token_class),
                   state=g.state.at[slot].set(state), left=g.left.at[slot].set(left))


@jax.jit
def _free(g: SlotGrammar, slot) -> SlotGrammar:
  return g.replace(state=g.state.at[slot].set(0), left=g.left.at[slot].set(UNLIMITED))


def assign(g: SlotGrammar, slot: int, dfa, max_tokens: int) -> SlotGrammar:
  """`g` with `slot` holding a request under `dfa` (a schema_dfa.TokenDFA) that may emit
  max_tokens tokens, or a free request (dfa None)."""
  slot = jnp.asarray(slot, jnp.int32)
  if dfa is None:
    return _free(g, slot)
  c, initial = token_mask.join([dfa])
  g = grow(g, *c.next_state.shape)
  s, k = g.shape
  table = np.full((s, k), -1, np.int32)
  table[:c.next_state.shape[0], :c.next_state.shape[1]] = c.next_state
  cost = np.full((s,), NEVER, np.int32)
  cost[:c.cost.shape[0]] = c.cost
  return _write(g, slot, jnp.asarray(table), jnp.asarray(cost), jnp.asarray(c.token_class),
                jnp.asarray(initial[0]), jnp.asarray(max_tokens, jnp.int32))


def allowed(g: SlotGrammar) -> jax.Array:
  """[slots, V] bool: the tokens each slot may emit now (see token_mask.allowed)."""
  rows = g.next_state[jnp.arange(g.state.shape[0]), g.state]          # [slots, C]
  nxt = jnp.take_along_axis(rows, g.token_class, axis=1)               # [slots, V]
  cost = jnp.take_along_axis(g.cost, jnp.maximum(nxt, 0), axis=1)
  return (nxt >= 0) & (cost < g.left[:, None])


def advance(g: SlotGrammar, tokens: jax.Array) -> SlotGrammar:
  """Each slot's state after its emitted token, one token less left."""
  slots = jnp.arange(g.state.shape[0])
  nxt = g.next_state[slots, g.state, g.token_class[slots, tokens]]
  return g.replace(state=jnp.maximum(nxt, 0), left=g.left - 1)
