"""Batched rollouts of a `Decoder`: prefill once per prompt, then J samples in one compiled loop.

`generate` pads the prompts (length bucket, batch multiple), places them on the mesh, and runs
one jitted program: prefill of all prompt tokens but the last, the prefilled cache repeated
J times (prompts are prefilled once, not J times), then `decode_loop.decode`. The cache is
created inside that program and lives only in the loop carry, so XLA updates it in place;
parameters come in as arguments (the learner's current arrays, never copied or baked in).

Row order of every output: prompt i's samples are rows i*J .. i*J + J - 1. Sample j of
prompt i uses fold_in(key, row) for its randomness, so it does not depend on how many other
prompts are in the batch or on the mesh. With one key per prompt (a key array [num_prompts])
sample j of prompt i uses fold_in(key[i], j): what prompt i alone would get from key[i], so
calls made one prompt at a time can be batched into one (the critic's re-samples).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx, struct
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from harnessrl_jax.errors import HarnessError
from harnessrl_jax.models import sharding as model_sharding
from harnessrl_jax.models.kv_cache import (DecodeCache, grow, init_cache, map_rows,
                                           to_decode_cache)
from harnessrl_jax.rollout import batching, decode_loop, token_mask
from harnessrl_jax.rollout.config import DECODE_PHASE_TOKENS, RolloutConfig
from harnessrl_jax.rollout.sampling import SamplingParams
from harnessrl_jax.rollout.schema_dfa import TokenDFA

BATCH_AXES = ("data", "fsdp")  # mesh axes the rollout batch is split over (those present)

@struct.dataclass
class RolloutBatch:
  """Sampled responses, B = num_prompts * J rows (prompt i's samples at rows i*J..i*J+J-1).

  Attributes:
    prompt_tokens: [B, P] int32, left-padded.
    prompt_mask: [B, P] bool.
    response_tokens: [B, N] int32, pad id after each response's end.
    response_mask: [B, N] bool, True on the response (including a final EOS/stop token).
    logprobs: [B, N] float32, log softmax(logits / T) of each sampled token (the old-policy
      log-probs for the learner), 0 where response_mask is False.
    lengths: [B] int32, response lengths.
    finish_reason: [B] int32, index into FINISH_REASONS.
  """

  FINISH_REASONS: ClassVar[tuple[str, ...]] = ("stop", "length")

  prompt_tokens: jax.Array
  prompt_mask: jax.Array
  response_tokens: jax.Array
  response_mask: jax.Array
  logprobs: jax.Array
  lengths: jax.Array
  finish_reason: jax.Array

  def full_sequences(self) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Prompt and response side by side: tokens, mask and positions, each [B, P + N].

    Positions count real tokens only (left padding), as in the rollout, so a teacher-forced
    forward pass on these reproduces the sampler's logits.
    """
    tokens = jnp.concatenate([self.prompt_tokens, self.response_tokens], axis=1)
    mask = jnp.concatenate([self.prompt_mask, self.response_mask], axis=1)
    return tokens, mask, _positions(mask)


def _positions(mask: jax.Array) -> jax.Array:
  return jnp.maximum(jnp.cumsum(mask.astype(jnp.int32), axis=1) - 1, 0)


def _batch_axes(mesh: Mesh | None) -> tuple[str, ...]:
  return tuple(a for a in BATCH_AXES if mesh is not None and a in mesh.axis_names)


def _batch_divisor(mesh: Mesh | None) -> int:
  return math.prod(mesh.shape[a] for a in _batch_axes(mesh)) if mesh is not None else 1


def _constrain(x: jax.Array, mesh: Mesh | None, batch_dim: int) -> jax.Array:
  """Splits dim `batch_dim` over the batch axes; other dims are left to the compiler."""
  axes = _batch_axes(mesh)
  if not axes:
    return x
  spec = [P.UNCONSTRAINED] * x.ndim
  spec[batch_dim] = axes
  return jax.lax.with_sharding_constraint(x, NamedSharding(mesh, P(*spec)))


def decode_phases(model, width: int, max_new_tokens: int, phase_tokens: int,
                  mesh: Mesh | None = None, slice_layers: bool = True
                  ) -> list[decode_loop.Phase]:
  """The decode loop's phases: `phase_tokens` steps each; entering phase i grows the
  cache (a DecodeCache) to the slots filled by the phase's end (step t writes slot
  width - 1 + t), and attention reads exactly those.

  Attention over the cache costs time linear in the slots read, so this reads on average
  about half the generated part instead of all of it; each phase compiles its own loop and
  re-sizes the cache once.

  slice_layers (CPU): stacked (scanned) layer weights are sliced once here, not once per
  token (see `Decoder.layer_states`). Off (accelerators): the layer scan reads the stack in
  place. Slicing there would hold a second copy of the weights in device memory and unroll
  every layer into every phase's loop: the paper-scale rollout (32 layers, 64 phases) was
  still compiling for H100 after 13 minutes that way.
  """
  apply_fn = functools.partial(model, layer_params=model.layer_states() if slice_layers
                               else None)
  phases, done = [], 0
  while done < max_new_tokens:
    steps = min(phase_tokens, max_new_tokens - done)
    done += steps
    enter = functools.partial(_grow_cache, max_len=width - 1 + done, mesh=mesh)
    phases.append(decode_loop.Phase(steps, apply_fn, enter))
  return phases


def _grow_cache(cache: DecodeCache, *, max_len: int, mesh: Mesh | None) -> DecodeCache:
  return map_rows(grow(cache, max_len), lambda x, axis: _constrain(x, mesh, axis))


def _rollout_program(graphdef, params, tokens, mask, key, constraints, states, *,
                     sampling: SamplingParams,
                     num_samples: int, pad_id: int, eos_token_ids: tuple[int, ...] | None,
                     mesh: Mesh | None, phase_tokens: int,
                     slice_layers: bool = True) -> RolloutBatch:
  with model_sharding.rows_on(mesh):   # the decoder keeps rows split (constrain_rows)
    model = nnx.merge(graphdef, params)
    cfg = model.cfg
    eos = cfg.eos_token_ids if eos_token_ids is None else eos_token_ids
    stop_ids = tuple(dict.fromkeys(eos + sampling.stop_token_ids))
    rows, width = tokens.shape
    positions = _positions(mask)
    # The last prompt token is fed by the decode loop's first step, which yields the logits
    # of the first response token; the prefill's own logits are unused and compiled away.
    # Prefill fills the prompt's width - 1 slots; each decode phase then grows the cache.
    # Sliding-window layers keep window-sized rings instead (memory follows the window).
    cache = init_cache(cfg, rows, width - 1, ring=True)
    if width > 1:
      _, cache = model(tokens[:, :-1], positions[:, :-1], mask[:, :-1], cache)
    rep = lambda x, axis: jnp.repeat(x, num_samples, axis=axis)
    cache = to_decode_cache(map_rows(cache, rep))
    if key.ndim:   # one key per prompt
      keys = jax.vmap(lambda k: decode_loop.row_keys(k, num_samples))(key).reshape(-1)
    else:
      keys = decode_loop.row_keys(key, rows * num_samples)
    phases = decode_phases(model, width, sampling.max_new_tokens, phase_tokens, mesh,
                           slice_layers)
    out, _ = decode_loop.decode(phases, cache,
                                rep(tokens[:, -1], 0), rep(positions[:, -1], 0),
                                keys, sampling, stop_ids, pad_id, constraints,
                                None if states is None else rep(states, 0))
    n = sampling.max_new_tokens
    return RolloutBatch(
        prompt_tokens=rep(tokens, 0), prompt_mask=rep(mask, 0),
        response_tokens=out.tokens,
        response_mask=jnp.arange(n)[None, :] < out.lengths[:, None],
        logprobs=out.logprobs, lengths=out.lengths, finish_reason=out.finish_reason)


# The jitted program `generate_padded` runs (harnessrl_jax.aot compiles it for accelerators).
rollout_jit = jax.jit(_rollout_program,
                      static_argnames=("graphdef", "sampling", "num_samples", "pad_id",
                                       "eos_token_ids", "mesh", "phase_tokens",
                                       "slice_layers"))


def on_cpu(params) -> bool:
  """Whether `params` (arrays, or ShapeDtypeStructs with shardings) live on CPU devices:
  the rollout slices layer weights there only (`decode_phases`)."""
  sharding = getattr(jax.tree.leaves(params)[0], "sharding", None)
  devices = jax.devices() if sharding is None else sharding.device_set
  return next(iter(devices)).platform == "cpu"


def _as_key(key) -> jax.Array:
  if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
    return key
  return jax.random.wrap_key_data(key)  # a raw uint32[2] key from jax.random.PRNGKey


def generate_padded(graphdef, params, tokens, mask, sampling: SamplingParams, key: jax.Array,
                    *, num_samples: int = 1, pad_id: int = 0,
                    eos_token_ids: Sequence[int] | None = None,
                    mesh: Mesh | None = None,
                    phase_tokens: int = DECODE_PHASE_TOKENS,
                    constraints: token_mask.Constraints | None = None,
                    states=None) -> RolloutBatch:
  """Rollouts for already left-padded prompts; every row of `tokens` is a prompt.

  Args:
    graphdef, params: `nnx.split(decoder)`; params may be sharded (they are used in place).
    tokens: [B, P] int32 left-padded prompts; the last column must be a real token.
    mask: [B, P] bool.
    sampling: static settings; a new value compiles a new program.
    key: PRNG key (new-style or raw uint32[2]), or one per row of `tokens` ([B] new-style
      or [B, 2] raw): see the module docstring.
    num_samples: J samples per prompt.
    pad_id: written after each response's end.
    eos_token_ids: ids that end a response (with sampling.stop_token_ids); None: the model
      config's. Pass the PromptBuilder's, which adds the chat format's end-of-turn tokens.
    mesh: optional; the batch is split over its ('data', 'fsdp') axes, so B must divide.
    phase_tokens: decode steps per phase (`decode_phases`); outputs do not depend on it.
    constraints, states: schema constraints (`token_mask.join`) and each prompt's initial
      state [B] (its J samples share it); None: unconstrained.

  Returns:
    A RolloutBatch with B * J rows.
  """
  if num_samples < 1:
    raise HarnessError(f"rollout: num_samples={num_samples}; need >= 1")
  if phase_tokens < 1:
    raise HarnessError(f"rollout: decode_phase_tokens={phase_tokens}; need >= 1")
  mask_np = np.asarray(mask)
  if not mask_np[:, -1].all():
    raise HarnessError("rollout: prompts must be left-padded (the last column of the prompt "
                       "mask is False in some row)")
  divisor = _batch_divisor(mesh)
  if tokens.shape[0] % divisor:
    raise HarnessError(f"rollout: {tokens.shape[0]} prompts do not split over the mesh batch "
                       f"axes ({divisor} ways); pad the batch to a multiple of {divisor}")
  if mesh is not None and _batch_axes(mesh):
    sharding = NamedSharding(mesh, P(_batch_axes(mesh), None))
    tokens = jax.device_put(jnp.asarray(tokens, jnp.int32), sharding)
    mask = jax.device_put(jnp.asarray(mask_np), sharding)
  if constraints is not None:
    constraints = jax.tree.map(jnp.asarray, constraints)
    states = jnp.asarray(states, jnp.int32)
  key = _as_key(key)
  if key.ndim and key.shape != (tokens.shape[0],):
    raise HarnessError(f"rollout: {key.shape[0]} keys for {tokens.shape[0]} prompts; pass one "
                       "key, or one per prompt")
  return rollout_jit(graphdef, params, jnp.asarray(tokens, jnp.int32), jnp.asarray(mask),
                      key, constraints, states, sampling=sampling, num_samples=int(num_samples),
                      pad_id=int(pad_id), mesh=mesh, phase_tokens=int(phase_tokens),
                      slice_layers=on_cpu(params),
                      eos_token_ids=None if eos_token_ids is None else tuple(
                          int(t) for t in eos_token_ids))


def generate(graphdef, params, prompts: Sequence[Sequence[int]], sampling: SamplingParams,
             key: jax.Array, *, num_samples: int = 1, pad_id: int = 0,
             eos_token_ids: Sequence[int] | None = None,
             prompt_buckets: Sequence[int] = (64, 128, 256, 512), batch_multiple: int = 1,
             mesh: Mesh | None = None,
             phase_tokens: int = DECODE_PHASE_TOKENS,
             schemas: Sequence[TokenDFA | None] | None = None,
             pad_multiple: int = 0) -> RolloutBatch:
  """Rollouts for token-id prompts: J samples each, rows grouped by prompt.

  Prompts are left-padded to the smallest bucket that fits the longest one, and their number
  rounded up to a multiple of `batch_multiple` (and of the mesh's batch split) with filler
  rows whose outputs are dropped; keep both fixed across calls and the program compiles once.
  `schemas`: per prompt, the automaton its answers must follow (rollout/schema_dfa.py) or
  None; answers under one are complete before max_new_tokens (token_mask.py).
  `pad_multiple` > 0: pad to the longest prompt rounded up to it where that is below the
  bucket (`batching.pad_prompts`): less prefill and attention, a compile per new width.
  """
  multiple = math.lcm(max(1, int(batch_multiple)), _batch_divisor(mesh))
  padded = batching.pad_prompts(prompts, prompt_buckets, pad_id, multiple, pad_multiple)
  key = _as_key(key)
  if key.ndim:   # one key per prompt: filler rows reuse the first (their outputs are dropped)
    if key.shape != (len(prompts),):
      raise HarnessError(f"rollout: {key.shape[0]} keys for {len(prompts)} prompts; pass one "
                         "key, or one per prompt")
    filler = padded.tokens.shape[0] - len(prompts)
    key = jnp.concatenate([key, jnp.repeat(key[:1], filler)]) if filler else key
  constraints = states = None
  if schemas is not None and any(d is not None for d in schemas):
    if len(schemas) != len(prompts):
      raise HarnessError(f"rollout: {len(schemas)} schemas for {len(prompts)} prompts")
    for i, d in enumerate(schemas):
      if d is not None and d.min_tokens > sampling.max_new_tokens:
        raise HarnessError(f"rollout: prompt {i}'s schema needs at least {d.min_tokens} "
                           f"tokens; max_new_tokens is {sampling.max_new_tokens}")
    filler = [None] * (padded.tokens.shape[0] - len(schemas))
    constraints, states = token_mask.join(list(schemas) + filler)
  out = generate_padded(graphdef, params, padded.tokens, padded.mask, sampling, key,
                        num_samples=num_samples, pad_id=pad_id, eos_token_ids=eos_token_ids,
                        mesh=mesh, phase_tokens=phase_tokens, constraints=constraints,
                        states=states)
  real = padded.num_prompts * num_samples
  if real == padded.tokens.shape[0] * num_samples:
    return out
  return jax.tree.map(lambda x: x[:real], out)


class Sampler:
  """`generate` with the per-run settings bound: model structure, padding, buckets, mesh.

  Hold one per run and call it with the learner's current params each step.
  """

  def __init__(self, graphdef, *, pad_id: int, eos_token_ids: Sequence[int] | None = None,
               prompt_buckets: Sequence[int] = (64, 128, 256, 512), batch_multiple: int = 1,
               num_samples: int = 1, mesh: Mesh | None = None,
               phase_tokens: int = DECODE_PHASE_TOKENS):
    self.graphdef = graphdef
    self.phase_tokens = int(phase_tokens)
    self.pad_id = int(pad_id)
    self.eos_token_ids = None if eos_token_ids is None else tuple(eos_token_ids)
    self.prompt_buckets = tuple(int(b) for b in prompt_buckets)
    self.batch_multiple = int(batch_multiple)
    self.num_samples = int(num_samples)
    self.mesh = mesh

  @classmethod
  def from_config(cls, graphdef, rollout_cfg, *, pad_id: int,
                  eos_token_ids: Sequence[int] | None = None, batch_multiple: int = 1,
                  mesh: Mesh | None = None) -> Sampler:
    """Reads config.rollout's prompt_buckets, num_samples and decode_phase_tokens (a
    ConfigDict or a `RolloutConfig`); ids from the PromptBuilder."""
    r = RolloutConfig.from_config(rollout_cfg)
    return cls(graphdef, pad_id=pad_id, eos_token_ids=eos_token_ids,
               prompt_buckets=r.prompt_buckets, batch_multiple=batch_multiple,
               num_samples=r.num_samples, mesh=mesh, phase_tokens=r.decode_phase_tokens)

  def __call__(self, params, prompts: Sequence[Sequence[int]], sampling: SamplingParams,
               key: jax.Array, num_samples: int | None = None,
               pad_multiple: int = 0) -> RolloutBatch:
    return generate(self.graphdef, params, prompts, sampling, key,
                    num_samples=self.num_samples if num_samples is None else num_samples,
                    pad_id=self.pad_id, eos_token_ids=self.eos_token_ids,
                    prompt_buckets=self.prompt_buckets,
                    batch_multiple=self.batch_multiple, mesh=self.mesh,
                    phase_tokens=self.phase_tokens, pad_multiple=pad_multiple)
