"""`TrainState` (params, optimiser state, step counters, frozen reference) and the optimiser."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import struct

from harnessrl_jax.errors import refuse
from harnessrl_jax.rl.config import RLConfig


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


def lr_schedule(rl: Any) -> optax.Schedule:
  """The learning rate of update i (counted from 0).

  A linear warm-up over the first rl.warmup_steps updates that starts at lr / warmup_steps
  (so the first update counts: a warm-up from 0 would spend it at learning rate 0) and
  reaches lr at update warmup_steps - 1; from update warmup_steps on, lr constant, or a
  cosine decay from lr towards 0 at update rl.total_steps.

  `rl`: config.rl (a section, or its `RLConfig`)."""
  o = RLConfig.from_config(rl, check=False)
  refuse(o.optimizer_problems())
  lr, warmup = o.learning_rate, o.warmup_steps
  after = (optax.constant_schedule(lr) if o.lr_schedule == "constant" else
           optax.cosine_decay_schedule(lr, o.total_steps - warmup))
  if warmup <= 0:
    return after
  return optax.join_schedules([optax.linear_schedule(lr / warmup, lr, warmup - 1), after],
                              [warmup])


def _decay_mask(params: Any) -> Any:
  # Matrices decay; norm scales and biases (1-D) do not, as is usual for AdamW.
  return jax.tree.map(lambda p: p.ndim >= 2, params)


def make_optimizer(rl: Any) -> optax.GradientTransformation:
  """Global-norm clipping, then AdamW on the schedule of `lr_schedule`.

  `rl`: config.rl (a section, or its `RLConfig`)."""
  o = RLConfig.from_config(rl, check=False)
  refuse(o.optimizer_problems())
  return optax.chain(
      optax.clip_by_global_norm(o.max_grad_norm),
      optax.adamw(lr_schedule(o), b1=o.adam_b1, b2=o.adam_b2, eps=o.adam_eps,
                  weight_decay=o.weight_decay, mask=_decay_mask),
  )


def create_train_state(params: Any, tx: optax.GradientTransformation,
                       ref_params: Any = None) -> TrainState:
  """A fresh state at step 0 (call under jit with out_shardings to place it on a mesh)."""
  return TrainState(step=jnp.zeros((), jnp.int32), params=params, opt_state=tx.init(params),
                    ref_params=ref_params, skipped_steps=jnp.zeros((), jnp.int32))
