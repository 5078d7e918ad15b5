"""FLOPs of the run's programs counted from the model, not from XLA.

XLA's `cost_analysis()` counts a `lax.scan` or `while_loop` body once, so it under-counts a
scanned decoder, the micro-batch scan and every decode loop by their trip counts. These are
the usual model counts instead (as in MFU figures: what the model needs, not what a schedule
recomputes):
  forward, per token   2 x (matmul weights of the blocks)            the projections and MLPs
                     + 4 x heads x head_dim x keys read, per attention layer  (QK^T and AV)
                     + 2 x D x V where logits are taken                  the unembedding
  backward             2 x forward                                        (the 6N convention)
Remat's recomputed forward is not counted (hardware FLOPs would add one forward of the
blocks). Gated DeltaNet's recurrence (its state update, ~4 x heads x d_k x d_v per token) is
not counted; its projections and short convolution are (they are matmul weights here).
Embedding lookups cost no FLOPs.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax

from harnessrl_jax.models.architecture import ModelConfig


@dataclasses.dataclass(frozen=True)
class ModelShape:
  """What the counts need: matmul weights of the blocks, the unembedding's width and, per
  attention layer, query heads x head_dim and its window (None: full)."""

  block_weights: int
  hidden: int
  vocab: int
  attention: tuple[tuple[int, int | None], ...]

  @classmethod
  def of(cls, cfg: ModelConfig, params: Any) -> ModelShape:
    weights = 0
    for path, leaf in jax.tree_util.tree_leaves_with_path(params):
      name = jax.tree_util.keystr(path)
      if len(leaf.shape) < 2 or "embed" in name or "lm_head" in name:
        continue   # vectors are elementwise; embedding tables are looked up
      weights += math.prod(leaf.shape)
    attention = tuple(
        (cfg.num_heads * cfg.head_dim_of(t), cfg.sliding_window if t == "sliding_attention"
         else None) for t in cfg.layer_types if t != "linear_attention")
    return cls(weights, cfg.hidden_size, cfg.vocab_size, attention)

  def attention_per_token(self, keys: float) -> float:
    """QK^T and AV FLOPs of one query reading `keys` keys in every attention layer."""
    return sum(4 * width * (keys if window is None else min(keys, window))
               for width, window in self.attention)

  def forward(self, tokens: float, keys: float, logit_tokens: float) -> float:
    """One forward pass: `tokens` positions computed, each reading `keys` keys on average,
    logits at `logit_tokens` positions."""
    return (tokens * (2 * self.block_weights + self.attention_per_token(keys))
            + logit_tokens * 2 * self.hidden * self.vocab)


def train_step(shape: ModelShape, *, rows: int, width: int, response: int,
               with_reference: bool) -> float:
  """One GRPO update: forward + backward of the policy over `rows` rows of `width` slots
  (every slot attends over the whole row, as the masked attention computes), logits at the
  `response` positions, plus the reference's forward when beta > 0."""
  forward = shape.forward(rows * width, width, rows * response)
  return 3 * forward + (forward if with_reference else 0.0)


def logprobs(shape: ModelShape, *, rows: int, width: int, response: int) -> float:
  """One forward pass for old or reference log-probs."""
  return shape.forward(rows * width, width, rows * response)


def rollout(shape: ModelShape, *, prompts: int, samples: int, prompt_width: int,
            new_tokens: int) -> float:
  """Prefill of each prompt once (no logits), then `new_tokens` decode steps for every one of
  prompts x samples rows (the upper bound: every row runs to the limit), each step's token
  reading the prompt and the tokens before it."""
  prefill = shape.forward(prompts * prompt_width, prompt_width, 0)
  rows = prompts * samples
  decode = shape.forward(rows * new_tokens, prompt_width + new_tokens / 2, rows * new_tokens)
  return prefill + decode


def prefill(shape: ModelShape, *, rows: int, width: int, logit_rows: int = 0) -> float:
  """A cached forward over `rows` x `width` prompt slots (the logit judge: logits at one
  position per row)."""
  return shape.forward(rows * width, width, logit_rows)


def decode_step(shape: ModelShape, *, rows: int, keys: int) -> float:
  """One generated token for each of `rows` rows reading `keys` cache slots."""
  return shape.forward(rows, keys, rows)
