"""The extended GRPO loss (spec Eq. 2) on per-token log-probs: clipped surrogate + beta KL.

Shapes: per-token arrays are [B, N] over response positions, per-sequence arrays [B].
The loss of row b is multiplied by its importance weight u_b and reduced with per-token
weights from `aggregation_weights`. Those weights are computed once over the whole batch,
so the loss of a micro-batch is a plain weighted sum and gradient accumulation over
micro-batches reproduces the full-batch gradient exactly.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import jax
import jax.numpy as jnp
import ml_collections

from harnessrl_jax.errors import ConfigError, refuse


# KL(pi || ref) estimators on samples from pi, with d = log ref - log pi (Schulman 2020).
def kl_k1(logp: jax.Array, ref_logp: jax.Array) -> jax.Array:
  """-d: unbiased, can be negative per token."""
  return logp - ref_logp


def kl_k2(logp: jax.Array, ref_logp: jax.Array) -> jax.Array:
  """d^2 / 2: biased, low variance, non-negative."""
  return 0.5 * jnp.square(ref_logp - logp)


def kl_k3(logp: jax.Array, ref_logp: jax.Array) -> jax.Array:
  """exp(d) - d - 1: unbiased and non-negative."""
  d = ref_logp - logp
  return jnp.expm1(d) - d


KL_ESTIMATORS: dict[str, Callable[[jax.Array, jax.Array], jax.Array]] = {
    "k1": kl_k1, "k2": kl_k2, "k3": kl_k3,
}


def _token_mean_weights(mask: jax.Array, max_len: int) -> jax.Array:
  del max_len
  return mask / jnp.maximum(jnp.sum(mask), 1.0)


def _seq_mean_token_mean_weights(mask: jax.Array, max_len: int) -> jax.Array:
  del max_len
  length = jnp.sum(mask, axis=1, keepdims=True)
  # The mean runs over the batch's B rows (a fixed count keeps u unbiased); an empty
  # response contributes 0.
  return mask / jnp.maximum(length, 1.0) / mask.shape[0]


def _constant_weights(mask: jax.Array, max_len: int) -> jax.Array:
  return mask / (mask.shape[0] * (max_len or mask.shape[1]))


LOSS_AGGREGATIONS: dict[str, Callable[[jax.Array, int], jax.Array]] = {
    "token_mean": _token_mean_weights,
    "seq_mean_token_mean": _seq_mean_token_mean_weights,
    "constant": _constant_weights,
}


def aggregation_weights(loss_mask: jax.Array, mode: str, max_len: int = 0) -> jax.Array:
  """Per-token weights [B, N] so that loss = sum(weights * token_loss).

  token_mean: 1 / (tokens in batch). seq_mean_token_mean: 1 / (B * |o_b|).
  constant (Dr.GRPO): 1 / (B * max_len), max_len 0 meaning N.
  """
  if mode not in LOSS_AGGREGATIONS:
    raise ConfigError(
        f"config.rl.loss_aggregation = {mode!r}: expected one of {sorted(LOSS_AGGREGATIONS)}")
  return LOSS_AGGREGATIONS[mode](loss_mask.astype(jnp.float32), max_len)


@dataclasses.dataclass(frozen=True)
class LossConfig:
  """The loss hyper-parameters (see rl/config.py for defaults and reasons)."""

  clip_eps_low: float = 0.2
  clip_eps_high: float = 0.28
  beta: float = 0.001
  kl_estimator: str = "k3"
  loss_aggregation: str = "seq_mean_token_mean"
  max_response_len: int = 0

  def __post_init__(self):
    problems = []
    if self.kl_estimator not in KL_ESTIMATORS:
      problems.append(f"config.rl.kl_estimator = {self.kl_estimator!r}: expected one of "
                      f"{sorted(KL_ESTIMATORS)}")
    if self.loss_aggregation not in LOSS_AGGREGATIONS:
      problems.append(f"config.rl.loss_aggregation = {self.loss_aggregation!r}: expected "
                      f"one of {sorted(LOSS_AGGREGATIONS)}")
    if not (0 <= self.clip_eps_low < 1 and self.clip_eps_high >= 0):
      problems.append(f"config.rl.clip_eps_low/high = {self.clip_eps_low}/"
                      f"{self.clip_eps_high}: need 0 <= eps_low < 1 and eps_high >= 0")
    if self.beta < 0:
      problems.append(f"config.rl.beta = {self.beta}: must be >= 0")
    if self.max_response_len < 0:
      problems.append(f"config.rl.max_response_len = {self.max_response_len}: must be >= 0 "
                      "(0: the batch's response length)")
    refuse(problems)

  @classmethod
  def from_config(cls, rl: ml_collections.ConfigDict) -> "LossConfig":
    return cls(clip_eps_low=float(rl.clip_eps_low), clip_eps_high=float(rl.clip_eps_high),
               beta=float(rl.beta), kl_estimator=str(rl.kl_estimator),
               loss_aggregation=str(rl.loss_aggregation),
               max_response_len=int(rl.max_response_len))


def clipped_surrogate(logp: jax.Array, old_logp: jax.Array, advantages: jax.Array,
                      eps_low: float, eps_high: float):
  """Per-token PPO loss -min(r A, clip(r, 1 - eps_low, 1 + eps_high) A) and clip flags.

  Returns (loss [B,N], ratio [B,N], clipped_low [B,N] bool, clipped_high [B,N] bool); a
  flag is set where the clipped branch is the active one (zero gradient).
  """
  ratio = jnp.exp(logp - old_logp)
  adv = advantages[:, None]
  unclipped = ratio * adv
  clipped = jnp.clip(ratio, 1.0 - eps_low, 1.0 + eps_high) * adv
  loss = -jnp.minimum(unclipped, clipped)
  clipped_low = (adv < 0) & (ratio < 1.0 - eps_low)
  clipped_high = (adv > 0) & (ratio > 1.0 + eps_high)
  return loss, ratio, clipped_low, clipped_high


def grpo_loss(logp: jax.Array, old_logp: jax.Array, ref_logp: jax.Array | None,
              advantages: jax.Array, task_weight: jax.Array, loss_mask: jax.Array,
              cfg: LossConfig, weights: jax.Array | None = None):
  """The importance-weighted GRPO loss of a (micro-)batch and metric sums.

  Args:
    logp, old_logp, ref_logp: [B, N] log-probs of the response tokens under the policy,
      the policy that sampled them, and the reference (None when cfg.beta == 0).
    advantages, task_weight: [B].
    loss_mask: [B, N], 1 on scored response tokens.
    weights: [B, N] from `aggregation_weights` over the FULL batch (None: this batch).

  Returns:
    (loss, sums): sums holds masked token sums (pg_loss, kl, clip counts, tokens) that
    add across micro-batches; divide by sums["tokens"] for means.
  """
  mask = loss_mask.astype(jnp.float32)
  if weights is None:
    weights = aggregation_weights(mask, cfg.loss_aggregation, cfg.max_response_len)
  weights = weights * task_weight[:, None].astype(jnp.float32)
  pg, ratio, low, high = clipped_surrogate(logp, old_logp, advantages,
                                           cfg.clip_eps_low, cfg.clip_eps_high)
  pg_loss = jnp.sum(weights * pg)
  if cfg.beta > 0:
    if ref_logp is None:
      raise ConfigError("config.rl.beta > 0 needs reference log-probs: give the batch "
                        "ref_logprobs or the train state ref_params")
    kl = KL_ESTIMATORS[cfg.kl_estimator](logp, ref_logp)
    kl_loss = jnp.sum(weights * kl)
  else:
    kl = jnp.zeros_like(logp)
    kl_loss = jnp.zeros((), jnp.float32)
  loss = pg_loss + cfg.beta * kl_loss
  sums = {
      "pg_loss": pg_loss,
      "kl_loss": kl_loss,
      "kl": jnp.sum(mask * jax.lax.stop_gradient(kl)),
      "ratio": jnp.sum(mask * jax.lax.stop_gradient(ratio)),
      "clipped_low": jnp.sum(mask * low),
      "clipped_high": jnp.sum(mask * high),
      "tokens": jnp.sum(mask),
  }
  return loss, sums
