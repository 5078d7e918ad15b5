"""`TrainState` (params, optimiser state, step counters, frozen reference) and the optimiser."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import ml_collections
import optax
from flax import struct

from harnessrl_jax.errors import ConfigError


@struct.dataclass
class TrainState:
  """Everything `train_step` reads and returns; a pytree of arrays.

  Attributes:
    step: int32, update attempts so far (skipped ones included).
    params: the policy's trainable parameters (`nnx.State` of a Decoder).
    opt_state: optax state for `params`.
    ref_params: frozen reference parameters (None: the batch brings ref log-probs or
      beta is 0). Never updated.
    skipped_steps: int32, updates skipped because the loss or gradient was not finite.
  """

  step: jax.Array
  params: Any
  opt_state: Any
  ref_params: Any
  skipped_steps: jax.Array


def lr_schedule(rl: ml_collections.ConfigDict) -> optax.Schedule:
  """Linear warmup from 0 over rl.warmup_steps, then constant or cosine to 0 at total_steps."""
  lr, warmup = float(rl.learning_rate), int(rl.warmup_steps)
  if rl.lr_schedule == "constant":
    if warmup <= 0:
      return optax.constant_schedule(lr)
    return optax.join_schedules(
        [optax.linear_schedule(0.0, lr, warmup), optax.constant_schedule(lr)], [warmup])
  if rl.lr_schedule == "cosine":
    if int(rl.total_steps) <= warmup:
      raise ConfigError(f"config.rl.total_steps = {rl.total_steps} must exceed "
                        f"config.rl.warmup_steps = {warmup} for the cosine schedule")
    return optax.warmup_cosine_decay_schedule(0.0, lr, max(warmup, 0), int(rl.total_steps))
  raise ConfigError(f"config.rl.lr_schedule = {rl.lr_schedule!r}: expected 'constant' or "
                    "'cosine'")


def _decay_mask(params: Any) -> Any:
  # Matrices decay; norm scales and biases (1-D) do not, as is usual for AdamW.
  return jax.tree.map(lambda p: p.ndim >= 2, params)


def make_optimizer(rl: ml_collections.ConfigDict) -> optax.GradientTransformation:
  """Global-norm clipping, then AdamW on the schedule of `lr_schedule`."""
  if float(rl.max_grad_norm) <= 0:
    raise ConfigError(f"config.rl.max_grad_norm = {rl.max_grad_norm}: must be > 0")
  return optax.chain(
      optax.clip_by_global_norm(float(rl.max_grad_norm)),
      optax.adamw(lr_schedule(rl), b1=float(rl.adam_b1), b2=float(rl.adam_b2),
                  eps=float(rl.adam_eps), weight_decay=float(rl.weight_decay),
                  mask=_decay_mask),
  )


def create_train_state(params: Any, tx: optax.GradientTransformation,
                       ref_params: Any = None) -> TrainState:
  """A fresh state at step 0 (call under jit with out_shardings to place it on a mesh)."""
  return TrainState(step=jnp.zeros((), jnp.int32), params=params, opt_state=tx.init(params),
                    ref_params=ref_params, skipped_steps=jnp.zeros((), jnp.int32))
