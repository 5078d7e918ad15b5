"""Group-relative advantages and the sampling importance weight u = 1 / (N p).

Rollouts are rows of a flat batch; `group_id[b]` names the group (task draw) of row b,
an integer in [0, num_groups). Pure jnp functions, jittable with static `num_groups`.
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp

from harnessrl_jax.errors import ConfigError


def _group_stats(rewards: jax.Array, group_id: jax.Array, num_groups: int):
  """Per-row group mean, population std and an "all rewards equal" flag."""
  r = rewards.astype(jnp.float32)
  count = jax.ops.segment_sum(jnp.ones_like(r), group_id, num_groups)
  mean = jax.ops.segment_sum(r, group_id, num_groups) / jnp.maximum(count, 1.0)
  dev = r - mean[group_id]
  var = jax.ops.segment_sum(dev * dev, group_id, num_groups) / jnp.maximum(count, 1.0)
  # Compare max and min, not std to 0: the float mean of equal values can be off by an ulp,
  # and (ulp / eps_A) would be a spurious signal.
  hi = jax.ops.segment_max(r, group_id, num_groups)
  lo = jax.ops.segment_min(r, group_id, num_groups)
  flat = (hi == lo)[group_id]
  return dev, jnp.sqrt(var)[group_id], flat


def grpo_advantages(rewards: jax.Array, group_id: jax.Array, num_groups: int,
                    eps: float = 1e-6) -> jax.Array:
  """A = (r - mean) / (std + eps) within each group; exactly 0 for all-equal groups."""
  dev, std, flat = _group_stats(rewards, group_id, num_groups)
  return jnp.where(flat, 0.0, dev / (std + eps))


def mean_only_advantages(rewards: jax.Array, group_id: jax.Array, num_groups: int,
                         eps: float = 1e-6) -> jax.Array:
  """A = r - mean (Dr.GRPO: no division by std, which over-weights near-flat groups)."""
  del eps
  dev, _, flat = _group_stats(rewards, group_id, num_groups)
  return jnp.where(flat, 0.0, dev)


AdvantageFn = Callable[[jax.Array, jax.Array, int, float], jax.Array]

ADVANTAGE_FNS: dict[str, AdvantageFn] = {
    "grpo": grpo_advantages,
    "mean_only": mean_only_advantages,
}


def advantage_fn(name: str) -> AdvantageFn:
  """Looks up `config.rl.advantage`."""
  if name not in ADVANTAGE_FNS:
    raise ConfigError(f"config.rl.advantage = {name!r}: expected one of {sorted(ADVANTAGE_FNS)}")
  return ADVANTAGE_FNS[name]


def importance_weights(task_prob: jax.Array, num_tasks: int) -> jax.Array:
  """u = 1 / (N p) for each drawn row, p its task's sampling probability under p_t.

  With draws x ~ Cat(p), E[u_x g_x] = sum_i p_i g_i / (N p_i) = (1/N) sum_i g_i: the
  uniform-sampling expectation (spec section 3, Eq. 2).
  """
  return 1.0 / (num_tasks * task_prob.astype(jnp.float32))


def zero_signal_fraction(advantages: jax.Array, group_id: jax.Array,
                         num_groups: int) -> jax.Array:
  """Share of the groups present whose advantages are all 0 (the paper's "no signal")."""
  present = jax.ops.segment_sum(jnp.ones_like(advantages), group_id, num_groups) > 0
  peak = jax.ops.segment_max(jnp.abs(advantages), group_id, num_groups)
  dead = present & (peak == 0)
  return jnp.sum(dead) / jnp.maximum(jnp.sum(present), 1)
