"""The decode loop: one `lax.while_loop` that feeds a token, samples the next, and stops.

Model-agnostic: it takes `apply_fn(tokens[B,1], positions[B,1], attention_mask[B,1], cache)
-> (logits[B,1,V], cache)` and any cache pytree, so it is tested with toy logit functions as
well as the decoder. Call it inside `jit`: the cache is a loop carry, updated in place.

The steps may be split into phases, each its own loop with its own apply_fn and an
optional function that re-sizes the cache on entry: the sampler uses this to let phase i
attend only to the cache slots filled by its end (attention cost is linear in the slots
read; a single loop would read the whole buffer every step).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from harnessrl_jax.rollout import token_mask
from harnessrl_jax.rollout.sampling import SamplingParams, sample_tokens

ApplyFn = Callable[[jax.Array, jax.Array, jax.Array, Any], tuple[jax.Array, Any]]

FINISH_STOP = 0    # an EOS or stop token was sampled (it is part of the response)
FINISH_LENGTH = 1  # max_new_tokens reached first


class DecodeOutput(NamedTuple):
  tokens: jax.Array         # [B, N] int32, pad_id after the end of each response
  logprobs: jax.Array       # [B, N] float32, 0 after the end
  lengths: jax.Array        # [B] int32, response tokens including a final stop token
  finish_reason: jax.Array  # [B] int32, FINISH_STOP or FINISH_LENGTH


class Phase(NamedTuple):
  steps: int         # decode steps this phase runs (at most)
  apply_fn: ApplyFn  # the model step used during them
  enter: Callable[[Any], Any] | None = None  # applied to the cache before the phase


def row_keys(key: jax.Array, num_rows: int, first_row: int = 0) -> jax.Array:
  """One key per batch row, from the row's index: a row's samples do not depend on the batch."""
  rows = jnp.arange(first_row, first_row + num_rows, dtype=jnp.uint32)
  return jax.vmap(jax.random.fold_in, in_axes=(None, 0))(key, rows)


def decode(apply_fn: ApplyFn | Sequence[Phase], cache: Any, first_tokens: jax.Array,
           first_positions: jax.Array, keys: jax.Array, params: SamplingParams,
           stop_ids: tuple[int, ...], pad_id: int,
           constraints: token_mask.Constraints | None = None,
           states: jax.Array | None = None) -> tuple[DecodeOutput, Any]:
  """Samples up to params.max_new_tokens tokens per row.

  Args:
    apply_fn: one decoding step of the model (see the module docstring), or phases whose
      steps add up to params.max_new_tokens, run in order.
    cache: the cache after prefilling everything before `first_tokens`.
    first_tokens: [B] the last prompt token of each row (not yet in the cache).
    first_positions: [B] its position id.
    keys: [B] per-row keys (`row_keys`); step t uses fold_in(keys[b], t).
    params: sampling settings (static).
    stop_ids: EOS and stop token ids (static); sampling one ends the row.
    pad_id: written after the end of each response.
    constraints: optional schema constraints of the batch (token_mask.py); None: none, and
      the loop is exactly the unconstrained one.
    states: [B] each row's initial constraint state (0: unconstrained), with constraints.

  Returns:
    A DecodeOutput and the final cache. The loop exits early once every row has stopped.
  """
  phases = _phases(apply_fn, params.max_new_tokens)
  stop = jnp.asarray(stop_ids if stop_ids else (-1,), dtype=jnp.int32)
  step_fn = functools.partial(_decode_step, keys=keys, params=params, stop=stop,
                              pad_id=pad_id, constraints=constraints)
  carry = _initial_carry(cache, first_tokens, first_positions, params.max_new_tokens, pad_id,
                         constraints, states)
  end = 0
  for phase in phases:
    if phase.steps:
      end += phase.steps
      if phase.enter is not None:
        carry = (carry[0], phase.enter(carry[1])) + carry[2:]
      carry = jax.lax.while_loop(functools.partial(_running, end),
                                 functools.partial(step_fn, phase.apply_fn), carry)
  _, cache, _, _, tokens, logprobs, done, lengths = carry[:8]
  finish = jnp.where(done, FINISH_STOP, FINISH_LENGTH).astype(jnp.int32)
  out = DecodeOutput(tokens=tokens, logprobs=logprobs, lengths=lengths, finish_reason=finish)
  return out, cache


def _phases(apply_fn: ApplyFn | Sequence[Phase], steps: int) -> list[Phase]:
  """The phases to run: one phase of all `steps` for a single apply_fn; phases must add
  up to `steps`."""
  phases = [Phase(steps, apply_fn)] if callable(apply_fn) else list(apply_fn)
  if sum(p.steps for p in phases) != steps:
    raise ValueError(f"decode phases cover {sum(p.steps for p in phases)} steps; "
                     f"max_new_tokens is {steps}")
  return phases


# The loop carry: (step, cache, last tokens [B], their positions [B], out_tokens [B,N],
# out_logprobs [B,N], done [B], lengths [B]), then the constraint states [B] if any.
def _initial_carry(cache: Any, first_tokens: jax.Array, first_positions: jax.Array,
                   steps: int, pad_id: int, constraints: token_mask.Constraints | None,
                   states: jax.Array | None) -> tuple:
  """The carry before the first step: nothing sampled, no row done."""
  batch = first_tokens.shape[0]
  carry = (
      jnp.int32(0), cache, first_tokens.astype(jnp.int32), first_positions.astype(jnp.int32),
      jnp.full((batch, steps), pad_id, dtype=jnp.int32),
      jnp.zeros((batch, steps), dtype=jnp.float32),
      jnp.zeros((batch,), dtype=bool),
      jnp.zeros((batch,), dtype=jnp.int32),
  )
  if constraints is not None:
    carry += (jnp.asarray(states, jnp.int32),)
  return carry


def _running(end: int, carry: tuple) -> jax.Array:
  """The loop condition: steps left in this phase and a row still sampling."""
  step, done = carry[0], carry[6]
  return (step < end) & ~jnp.all(done)


def _decode_step(model_step: ApplyFn, carry: tuple, *, keys: jax.Array,
                 params: SamplingParams, stop: jax.Array, pad_id: int,
                 constraints: token_mask.Constraints | None) -> tuple:
  """One step: feed the last tokens, sample the next (within the constraints), write them
  where rows are still active, mark rows that sampled a stop token done."""
  step, cache, inputs, positions, out_tokens, out_logprobs, done, lengths = carry[:8]
  batch, steps = out_tokens.shape
  fold = jax.vmap(jax.random.fold_in, in_axes=(0, None))
  logits, cache = model_step(inputs[:, None], positions[:, None],
                             jnp.ones((batch, 1), dtype=bool), cache)
  allowed = None
  if constraints is not None:
    allowed = token_mask.allowed(constraints, carry[8], steps - step)
  tokens, logprobs = sample_tokens(logits[:, -1], fold(keys, step.astype(jnp.uint32)),
                                   params, allowed)
  grammar = ()
  if constraints is not None:
    grammar = (token_mask.advance(constraints, carry[8], tokens),)
  active = ~done
  tokens = jnp.where(active, tokens, pad_id)
  logprobs = jnp.where(active, logprobs, 0.0)
  out_tokens = jax.lax.dynamic_update_slice(out_tokens, tokens[:, None], (0, step))
  out_logprobs = jax.lax.dynamic_update_slice(out_logprobs, logprobs[:, None], (0, step))
  lengths = lengths + active.astype(jnp.int32)
  done = done | (active & jnp.isin(tokens, stop))
  return (step + 1, cache, tokens, positions + 1, out_tokens, out_logprobs, done,
          lengths) + grammar
