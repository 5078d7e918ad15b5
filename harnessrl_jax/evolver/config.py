"""Defaults of the evolver sub-config (`config.evolver`), merged into the one config tree.

Reward quantities here are in points: reward x Lambda (harness.total_weight, 100), so a
band of [10.2, 28.0] means "the candidate moved the group's mean reward by 10.2 to 28
points".
"""

from __future__ import annotations

import ml_collections

BACKENDS = ("rule", "llm")


def evolver_defaults() -> ml_collections.ConfigDict:
  """The evolver's documented defaults.

  Fields:
    enabled: run the evolver after each RL update (False: plain GRPO with H_0).
    attributor / proposer: "rule" (deterministic, from scores and memory) or "llm" (the
      judge clients' TextClient, JSON answers parsed strictly).
    llm_backend: the TextClient backend for "llm" roles ("" -> the judge's).
    llm_max_tokens: answer length of one attributor / proposer call.
    llm_fallback_to_rule: an LLM answer that fails strict parsing (after one re-ask)
      falls back to the rule backend for that task; False leaves the task unlabelled.
    rounds: B, proposer -> critic rounds per (task, route) before a noop is recorded.
    guidance_band / rubric_band: acceptance bands in points (paper cold start values);
      `calibration_path` (calibration.json written by `python -m harnessrl_jax.calibrate`)
      replaces them and the sampling ladder when set.
    calibration_path: "" -> use the bands above; else read bands and ladder from there.
    memory_window: steps over which a reversal of an accepted update needs new evidence
      (condition iv), and how far back "recently" reaches.
    saturated_history: earlier consecutive all-satisfied draws needed for full
      confidence in "saturated"; blind likewise counts earlier all-missed draws.
    min_confidence: labels below it are recorded but not acted on.
    length_ratio: "separated mainly by length": every satisfying response longer than
      every other and the mean length ratio at least this.
    phrase_share: a generic phrase counts as the separator when it occurs in at least this
      share of satisfying responses and in none of the others.
    disagreement_points: a criterion disagrees with the rest of the rubric when the rest
      of the rubric scores its satisfying responses this many points LOWER on average.
    resample_j: J of the critic's guidance re-sample (0: rollout.num_samples).
    negative_weight: points of a penalty criterion created for a detected hack.
    async_evolver: run step t's evolver while the RL update of step t+1 proceeds (the
      harness used for sampling is then one step stale); see evolver.AsyncEvolver.
    calibrate_tasks: tasks of the training pool the cold-start pass measures (0: all).
    calibrate_min_band: the lowest lower bound a band may get, in points (a greedy,
      cached judge regrades with zero variation; a zero bound would accept any change).
  """
  c = ml_collections.ConfigDict()
  c.enabled = True
  c.attributor = "rule"
  c.proposer = "rule"
  c.llm_backend = ""
  c.llm_max_tokens = 512
  c.llm_fallback_to_rule = True
  c.rounds = 3
  c.guidance_band = (10.2, 28.0)
  c.rubric_band = (3.1, 28.0)
  c.calibration_path = ""
  c.memory_window = 20
  c.saturated_history = 1
  c.min_confidence = 0.5
  c.length_ratio = 1.5
  c.phrase_share = 0.75
  c.disagreement_points = 10.0
  c.resample_j = 0
  c.negative_weight = 10.0
  c.async_evolver = False
  c.calibrate_tasks = 0
  c.calibrate_min_band = 1.0
  return c
