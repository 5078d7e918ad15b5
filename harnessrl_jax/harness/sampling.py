"""The sampling dial p_t: weight levels, task probabilities, importance weights, draws.

A task's weight is w_i = ladder[level_i] (ladder 1 -> gamma1 -> gamma2 -> gamma3); its
probability p_i = w_i / sum_l w_l; a drawn task's loss is scaled by u_i = 1 / (N p_i), so
each task's expected contribution equals uniform sampling. The three array functions are
jit-compatible: the harness is a pytree whose `levels` and `ladder` are leaves.
"""

from __future__ import annotations


import jax
import jax.numpy as jnp
import numpy as np

from harnessrl_jax.errors import HarnessError
from harnessrl_jax.harness.state import Harness, check_ladder


def probabilities(h: Harness) -> jax.Array:
  """p, [N] float32."""
  w = jnp.asarray(h.ladder)[jnp.asarray(h.levels)]
  return w / jnp.sum(w)


def importance_weights(h: Harness, task_indices) -> jax.Array:
  """u = 1 / (N p) for each drawn task index, same shape as `task_indices`."""
  p = probabilities(h)
  return 1.0 / (p.shape[0] * p[jnp.asarray(task_indices)])


def draw(h: Harness, key: jax.Array, n: int) -> jax.Array:
  """`n` task indices drawn with replacement from Cat(p), [n] int32."""
  p = probabilities(h)
  return jax.random.choice(key, p.shape[0], (n,), replace=True, p=p).astype(jnp.int32)


def _with_level(h: Harness, task_id: str, delta: int) -> Harness:
  i = h.index(task_id)
  levels = np.array(h.levels)
  new = int(levels[i]) + delta
  top = len(np.asarray(h.ladder)) - 1
  if not 0 <= new <= top:
    raise HarnessError(
        f"task {task_id!r} is at level {int(levels[i])}: the ladder has levels 0..{top}, "
        f"so it cannot move {'down' if delta > 0 else 'up'}")
  levels[i] = new
  levels.flags.writeable = False
  return h.replace(levels=levels)


def level_down(h: Harness, task_id: str) -> Harness:
  """One level down the ladder (a saturated task is sampled less)."""
  return _with_level(h, task_id, +1)


def level_up(h: Harness, task_id: str) -> Harness:
  """One level back up the ladder."""
  return _with_level(h, task_id, -1)


def set_ladder(h: Harness, ladder) -> Harness:
  """Replaces the level weights (cold start); must keep the same number of levels."""
  vals = [float(x) for x in ladder]
  check_ladder(vals)
  if len(vals) != len(np.asarray(h.ladder)):
    raise HarnessError(f"ladder {vals}: has {len(vals)} levels, the harness "
                       f"{len(np.asarray(h.ladder))}; tasks' levels would lose meaning")
  arr = np.asarray(vals, np.float32)
  if np.any(np.diff(arr) >= 0):
    raise HarnessError(f"ladder {vals}: levels collide after rounding to float32")
  arr.flags.writeable = False
  return h.replace(ladder=arr)
