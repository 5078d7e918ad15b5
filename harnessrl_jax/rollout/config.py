"""The `rollout` config section: its documented defaults and `RolloutConfig`, its typed view.

`SamplingParams.from_config` and `Sampler.from_config` build from this section through the
view; the sampling settings' admissible values (`sampling_problems`) are written once here
and shared with `SamplingParams`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import ml_collections

from harnessrl_jax.config_view import section_view

# Decode steps per phase (see engine.decode_phases): shorter phases read fewer empty cache
# slots but compile more loops. Measured on SmolLM2 at 128 new tokens in docs/performance.md.
DECODE_PHASE_TOKENS = 32
EVAL_PAD_MULTIPLE = 16


def rollout_defaults() -> ml_collections.ConfigDict:
  """The rollout section's documented defaults.

  Fields:
    num_samples: J, rollouts per task (paper: 8).
    max_new_tokens: the longest response.
    temperature: sampling temperature; the learner scores the sampled responses at this
      temperature too (their log-probs under the law that sampled them).
    top_p: nucleus mass; 1.0: no nucleus cut.
    top_k: keep the k likeliest tokens; 0: no top-k cut.
    prompt_buckets: prompt lengths round up to these, so new lengths do not recompile.
    decode_phase_tokens: decode steps per phase; each phase reads only the filled cache.
    eval_pad_multiple: held-out evaluations (a fixed prompt set, greedy) pad their prompts to
      the longest one rounded up to this multiple, not to the bucket: one compile per run at
      that width, and no prefill or attention on the columns in between (the default's 50
      held-out prompts: width 80, not 128, the same greedy tokens; times in
      docs/performance.md). 0: the bucket.
  """
  r = ml_collections.ConfigDict()
  r.num_samples = 8
  r.max_new_tokens = 128
  r.temperature = 1.0
  r.top_p = 1.0
  r.top_k = 0
  r.prompt_buckets = (64, 128, 256, 512)
  r.decode_phase_tokens = DECODE_PHASE_TOKENS
  r.eval_pad_multiple = EVAL_PAD_MULTIPLE
  return r


def sampling_problems(temperature: float, top_p: float, top_k: int, max_new_tokens: int,
                      stop_token_ids: Sequence[int] = ()) -> list[str]:
  """What is wrong with these sampling settings, one `field = value: reason` each."""
  out = []
  if not (math.isfinite(temperature) and temperature >= 0):
    out.append(f"temperature = {temperature}: must be a finite number >= 0")
  if not 0.0 < top_p <= 1.0:
    out.append(f"top_p = {top_p}: must be in (0, 1]")
  if int(top_k) != top_k or top_k < 0:
    out.append(f"top_k = {top_k}: must be an integer >= 0 (0 disables it)")
  if int(max_new_tokens) != max_new_tokens or max_new_tokens < 1:
    out.append(f"max_new_tokens = {max_new_tokens}: must be an integer >= 1")
  if any(t < 0 for t in stop_token_ids):
    out.append(f"stop_token_ids = {tuple(stop_token_ids)}: token ids must be >= 0")
  return out


class RolloutConfig(section_view(rollout_defaults, "config.rollout")):
  """`config.rollout`, typed (fields and their meanings: `rollout_defaults`)."""

  def problems(self) -> list[str]:
    out = [f"config.rollout.{p}" for p in sampling_problems(
        self.temperature, self.top_p, self.top_k, self.max_new_tokens)]
    if self.num_samples < 1:
      out.append(f"config.rollout.num_samples = {self.num_samples}: must be >= 1")
    if not self.prompt_buckets or min(self.prompt_buckets) < 1:
      out.append(f"config.rollout.prompt_buckets = {self.prompt_buckets}: need positive "
                 "lengths")
    if self.decode_phase_tokens < 1:
      out.append(f"config.rollout.decode_phase_tokens = {self.decode_phase_tokens}: must be "
                 ">= 1")
    if self.eval_pad_multiple < 0:
      out.append(f"config.rollout.eval_pad_multiple = {self.eval_pad_multiple}: must be >= 0 "
                 "(0: the bucket)")
    return out
