"""The learner's input: `RLBatch`, and the pure function that builds it from a rollout.

Layout (B rows = sampled responses; L = P + N; P prompt slots, N response slots):
  tokens          [B, L] int32   left-padded prompt, then the response (pad after its end)
  positions       [B, L] int32   cumsum(attention_mask) - 1, clipped at 0 (as in the rollout)
  attention_mask  [B, L] bool    real prompt tokens and response tokens
  loss_mask       [B, N] float32 1 on scored response tokens (the final EOS included, so the
                                 policy learns where to stop), 0 on padding
  old_logprobs    [B, N] float32 log-probs of the response tokens under the sampling policy
                                 (the rollout's, at the sampling temperature), or None: the
                                 learner recomputes them
  ref_logprobs    [B, N] float32 or None: the learner computes them from frozen ref params
  advantages      [B]    float32 group-relative advantages
  task_weight     [B]    float32 importance weight u = 1 / (N_tasks p) of the row's task
  group_id        [B]    int32   group index in [0, B) (rows drawn for the same task draw)

Per-token RL arrays cover only the response: response token n is tokens[:, P + n] and is
predicted from position P + n - 1, so the learner never computes logits over the prompt.

P is the rollout's prompt bucket; `trim_prompt_padding` cuts it to the batch's longest real
prompt (rounded up) before the update, which then computes on fewer padding columns.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from harnessrl_jax.errors import HarnessError
from harnessrl_jax.rl import advantages as adv_lib


@struct.dataclass
class RLBatch:
  """One GRPO batch; see the module docstring for shapes and meaning."""

  tokens: jax.Array
  positions: jax.Array
  attention_mask: jax.Array
  loss_mask: jax.Array
  old_logprobs: jax.Array | None
  ref_logprobs: jax.Array | None
  advantages: jax.Array
  task_weight: jax.Array
  group_id: jax.Array

  @property
  def prompt_len(self) -> int:
    return self.tokens.shape[1] - self.loss_mask.shape[1]

  @property
  def num_rows(self) -> int:
    return self.tokens.shape[0]


def build_batch(rollout: Any, rewards, group_id, task_prob, num_tasks: int, *,
                advantage: str = "grpo", eps_advantage: float = 1e-6,
                ref_logprobs=None) -> RLBatch:
  """Builds an RLBatch from a rollout result and its rewards (pure; host or jit).

  Args:
    rollout: has prompt_tokens [B,P] (left-padded), prompt_mask [B,P], response_tokens
      [B,N], response_mask [B,N] and logprobs [B,N] (`rollout.sampler.RolloutBatch`).
    rewards: [B] scalar reward of each response.
    group_id: [B] int, the row's group (task draw) in [0, B).
    task_prob: [B] sampling probability p_i of the row's task under p_t.
    num_tasks: N, the number of tasks in the training pool.
    advantage, eps_advantage: config.rl.advantage / eps_advantage.
    ref_logprobs: optional [B,N] reference log-probs.
  """
  b, n = rollout.response_tokens.shape
  for name, x in (("rewards", rewards), ("group_id", group_id), ("task_prob", task_prob)):
    if np.shape(x) != (b,):
      raise HarnessError(f"rl.build_batch: {name} has shape {np.shape(x)}; expected ({b},), "
                         "one entry per rollout row")
  group_id = jnp.asarray(group_id, jnp.int32)
  rewards = jnp.asarray(rewards, jnp.float32)
  resp_mask = jnp.asarray(rollout.response_mask, bool)
  tokens = jnp.concatenate([jnp.asarray(rollout.prompt_tokens, jnp.int32),
                            jnp.asarray(rollout.response_tokens, jnp.int32)], axis=1)
  mask = jnp.concatenate([jnp.asarray(rollout.prompt_mask, bool), resp_mask], axis=1)
  positions = jnp.maximum(jnp.cumsum(mask.astype(jnp.int32), axis=1) - 1, 0)
  adv = adv_lib.advantage_fn(advantage)(rewards, group_id, b, eps_advantage)
  loss_mask = resp_mask.astype(jnp.float32)
  old = jnp.where(resp_mask, jnp.asarray(rollout.logprobs, jnp.float32), 0.0)
  ref = None if ref_logprobs is None else jnp.asarray(ref_logprobs, jnp.float32)
  if ref is not None and ref.shape != (b, n):
    raise HarnessError(f"rl.build_batch: ref_logprobs has shape {ref.shape}; expected {(b, n)}")
  return RLBatch(tokens=tokens, positions=positions, attention_mask=mask, loss_mask=loss_mask,
                 old_logprobs=old, ref_logprobs=ref, advantages=adv,
                 task_weight=adv_lib.importance_weights(jnp.asarray(task_prob), num_tasks),
                 group_id=group_id)


def trim_prompt_padding(batch: RLBatch, multiple: int) -> RLBatch:
  """`batch` without the leading prompt columns that are padding in every row, keeping the
  longest real prompt rounded up to a multiple of `multiple` columns (0: `batch` as it is).

  The loss and its gradients are unchanged up to float rounding: the dropped columns are
  masked keys of every query, and positions (cumsum of the mask) of the kept tokens do not
  move. Each distinct width compiles the update once, so `multiple` trades compiles for
  padding. Host-side (the width must be static); every process of a multi-process run
  holds the same full batch, hence cuts the same columns.
  """
  if multiple <= 0:
    return batch
  p = batch.prompt_len
  real = np.asarray(batch.attention_mask[:, :p]).any(axis=0)
  longest = p - int(np.argmax(real)) if real.any() else 1
  keep = min(p, -(-longest // multiple) * multiple)
  if keep == p:
    return batch
  cut = p - keep
  return batch.replace(tokens=batch.tokens[:, cut:], positions=batch.positions[:, cut:],
                       attention_mask=batch.attention_mask[:, cut:])


def check_shared_prompts(batch: RLBatch, group: int) -> None:
  """HarnessError unless every `group` consecutive rows carry one prompt (tokens and mask):
  what packing them on one prompt (rl.share_prompts) assumes. Host-side, one comparison."""
  if group <= 1:
    return
  p = batch.prompt_len
  for name, x in (("tokens", batch.tokens), ("attention_mask", batch.attention_mask)):
    rows = np.asarray(x)[:, :p]
    if rows.shape[0] % group:
      raise HarnessError(f"rl batch: {rows.shape[0]} rows are not whole groups of {group}")
    grouped = rows.reshape(-1, group, p)
    differ = np.flatnonzero((grouped != grouped[:, :1]).any(axis=(1, 2)))
    if differ.size:
      first = int(differ[0]) * group
      raise HarnessError(f"rl batch: the prompt {name} differ within the group of rows "
                         f"{first}..{first + group - 1}; packing shared prompts "
                         "(config.rl.share_prompts) needs one prompt per group")
