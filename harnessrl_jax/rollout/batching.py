"""Prompt batching: left padding to a length bucket and a batch multiple, so shapes repeat.

Every distinct (prompt length, batch size) is a new compilation of the rollout. Rounding the
length up to one of a few buckets (config.rollout.prompt_buckets) and the batch up to a fixed
multiple makes steady-state training reuse one compiled program.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from harnessrl_jax.errors import ConfigError, HarnessError


@dataclasses.dataclass(frozen=True)
class PaddedPrompts:
  """Left-padded prompts.

  Attributes:
    tokens: [B_pad, L] int32, real tokens right-aligned.
    mask: [B_pad, L] bool, True on real tokens.
    num_prompts: how many leading rows are real prompts; the rest are filler rows.
  """

  tokens: np.ndarray
  mask: np.ndarray
  num_prompts: int


def bucket_length(length: int, buckets: Sequence[int]) -> int:
  """The smallest bucket >= length."""
  sizes = sorted(int(b) for b in buckets)
  if not sizes or sizes[0] < 1:
    raise ConfigError(f"rollout.prompt_buckets={tuple(buckets)}: need positive lengths")
  for size in sizes:
    if length <= size:
      return size
  raise HarnessError(
      f"a prompt has {length} tokens, more than the largest bucket {sizes[-1]} in "
      "rollout.prompt_buckets: add a larger bucket or shorten the prompt")


def round_up(n: int, multiple: int) -> int:
  return -(-n // multiple) * multiple


def pad_prompts(prompts: Sequence[Sequence[int]], buckets: Sequence[int], pad_id: int,
                batch_multiple: int = 1, pad_multiple: int = 0) -> PaddedPrompts:
  """Left-pads token-id lists to a common bucketed length and a batch multiple.

  pad_multiple > 0: the width is the longest prompt rounded up to this multiple where that
  is below the bucket (for a fixed prompt set, such as a held-out evaluation's, which then
  compiles once at its own width).

  Filler rows (added to reach the batch multiple) hold one real pad token, so every row
  has a token to attend to; their outputs are dropped by the caller.
  """
  if not prompts:
    raise HarnessError("rollout: no prompts given")
  lengths = [len(p) for p in prompts]
  for i, n in enumerate(lengths):
    if n == 0:
      raise HarnessError(f"rollout: prompt {i} is empty; every prompt needs >= 1 token")
  width = bucket_length(max(lengths), buckets)
  if pad_multiple > 0:
    width = min(width, round_up(max(lengths), int(pad_multiple)))
  rows = round_up(len(prompts), max(1, int(batch_multiple)))
  tokens = np.full((rows, width), pad_id, dtype=np.int32)
  mask = np.zeros((rows, width), dtype=bool)
  for i, prompt in enumerate(prompts):
    tokens[i, width - len(prompt):] = np.asarray(prompt, dtype=np.int32)
    mask[i, width - len(prompt):] = True
  mask[len(prompts):, -1] = True
  return PaddedPrompts(tokens=tokens, mask=mask, num_prompts=len(prompts))
