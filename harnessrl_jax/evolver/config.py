"""The evolver's config sections: the defaults of `config.evolver`, and the frozen typed
views of `config.evolver` (`EvolverConfig`) and `config.ablation` (`AblationConfig`) that
`build_evolver` builds once and hands to the roles.

Reward quantities here are in points: reward x Lambda (harness.total_weight, 100), so a
band of [10.2, 28.0] means "the candidate moved the group's mean reward by 10.2 to 28
points".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import ml_collections

from harnessrl_jax.errors import ConfigError
from harnessrl_jax.evolver.types import ALL_ROUTES

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
    intervention: the rule attributor tests its "spurious" suspicions by intervention
      (beyond the paper): it edits the suspected surface feature out of the satisfying
      responses (stock sentences, repetition, sentences that do not read as text) and
      regrades them with the judge; "spurious" only when the verdict then flips. Tested:
      every criterion with satisfying and non-satisfying responses that the correlational
      rules call spurious or whose satisfying responses an edit changes. Costs one judge
      call per task with such criteria (docs/evolver.md, Attribution).
    intervention_flip_share: "spurious" needs the verdict to flip (met -> unmet) on MORE
      than this share of the satisfying responses one edit changed (0.5: a majority).
    intervention_rest_points: ... while the rest of the rubric's reward of those edited
      responses falls by at most this many points on average (a larger fall: the edit
      removed real content, not a surface feature).
    resample_j: J of the critic's guidance re-sample (0: rollout.num_samples).
    prefetch_resamples: draw a step's first-round guidance re-samples ahead in one sampler
      call, where the attributor and proposer are the rule ones (evolver/prefetch.py): the
      same decisions up to the float rounding of a larger batch, at about the cost of one
      re-sample instead of one per task. An experiment field, as batch shapes are.
    negative_weight: points of a penalty criterion created for a detected hack.
    transfer_tasks: the most other tasks per step to which the step's accepted rubric
      repairs are offered (beyond the paper; 0: off, the paper's per-task edits). A repair
      is offered to tasks whose rubric holds its target criterion word for word and check
      for check; the critic measures each offer on a group the frozen policy samples for
      that task (one batched call per step) and accepts it under the usual conditions
      (evolver/transfer.py).
    async_evolver: run step t's evolver while the RL update of step t+1 proceeds (the
      harness used for sampling is then one step stale); see evolver.AsyncEvolver.
    calibrate_tasks: tasks of the training pool the cold-start pass measures (0: all).
    calibrate_min_band: the lowest lower bound a band may get, in points (a greedy,
      cached judge regrades with zero variation; a zero bound would accept any change).
    max_unscored_share: the run stops (before the step's checkpoint, like the learner's
      judge.max_unscored_share) when more than this share of the cells the critic had
      judged in one evolver step got no verdict (transport, parse, refused). Below it a
      candidate that lost cells is "unmeasurable", never a rejection. Default 0.1, the
      learner's default: a judge that fails only the critic's requests (e.g. new criterion
      texts) must not go unnoticed while the harness silently stops evolving.
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
  c.intervention = False
  c.intervention_flip_share = 0.5
  c.intervention_rest_points = 10.0
  c.resample_j = 0
  c.prefetch_resamples = True
  c.negative_weight = 10.0
  c.transfer_tasks = 0
  c.async_evolver = False
  c.calibrate_tasks = 0
  c.calibrate_min_band = 1.0
  c.max_unscored_share = 0.1
  return c


def check_band(band, where: str) -> tuple[float, float]:
  """`band` as (lo, hi) in points; ConfigError naming `where` unless 0 <= lo <= hi."""
  lo, hi = (float(x) for x in band)
  if not 0 <= lo <= hi:
    raise ConfigError(f"{where} = [{lo}, {hi}]: need 0 <= lo <= hi (points)")
  return lo, hi


@dataclasses.dataclass(frozen=True)
class EvolverConfig:
  """`config.evolver`, typed and checked once (field meanings: `evolver_defaults`)."""

  enabled: bool
  attributor: str
  proposer: str
  llm_backend: str
  llm_max_tokens: int
  llm_fallback_to_rule: bool
  rounds: int
  guidance_band: tuple[float, float]
  rubric_band: tuple[float, float]
  calibration_path: str
  memory_window: int
  saturated_history: int
  min_confidence: float
  length_ratio: float
  phrase_share: float
  disagreement_points: float
  intervention: bool
  intervention_flip_share: float
  intervention_rest_points: float
  resample_j: int
  negative_weight: float
  transfer_tasks: int
  async_evolver: bool
  calibrate_tasks: int
  calibrate_min_band: float
  max_unscored_share: float
  prefetch_resamples: bool = True

  def __post_init__(self):
    for role in ("attributor", "proposer"):
      if getattr(self, role) not in BACKENDS:
        raise ConfigError(f"config.evolver.{role} = {getattr(self, role)!r}: expected one "
                          f"of {BACKENDS}")
    if self.rounds < 0:
      raise ConfigError(f"config.evolver.rounds = {self.rounds}: must be >= 0")
    if self.transfer_tasks < 0:
      raise ConfigError(f"config.evolver.transfer_tasks = {self.transfer_tasks}: must be "
                        ">= 0 (0: off)")
    for route in ("guidance", "rubric"):
      check_band(getattr(self, f"{route}_band"), f"config.evolver.{route}_band")
    if not 0.0 <= self.intervention_flip_share < 1.0:
      raise ConfigError(f"config.evolver.intervention_flip_share = "
                        f"{self.intervention_flip_share}: must be in [0, 1) (the verdict "
                        "must flip on MORE than this share)")
    if self.intervention_rest_points < 0:
      raise ConfigError(f"config.evolver.intervention_rest_points = "
                        f"{self.intervention_rest_points}: must be >= 0 (points)")
    if not 0.0 <= self.max_unscored_share <= 1.0:
      raise ConfigError(f"config.evolver.max_unscored_share = {self.max_unscored_share}: "
                        "must be in [0, 1] (a share of the critic's judged cells)")

  @classmethod
  def from_config(cls, ev: ml_collections.ConfigDict) -> EvolverConfig:
    return cls(
        enabled=bool(ev.enabled), attributor=str(ev.attributor), proposer=str(ev.proposer),
        llm_backend=str(ev.llm_backend), llm_max_tokens=int(ev.llm_max_tokens),
        llm_fallback_to_rule=bool(ev.llm_fallback_to_rule), rounds=int(ev.rounds),
        guidance_band=tuple(float(x) for x in ev.guidance_band),
        rubric_band=tuple(float(x) for x in ev.rubric_band),
        calibration_path=str(ev.calibration_path), memory_window=int(ev.memory_window),
        saturated_history=int(ev.saturated_history),
        min_confidence=float(ev.min_confidence), length_ratio=float(ev.length_ratio),
        phrase_share=float(ev.phrase_share),
        disagreement_points=float(ev.disagreement_points),
        intervention=bool(ev.intervention),
        intervention_flip_share=float(ev.intervention_flip_share),
        intervention_rest_points=float(ev.intervention_rest_points),
        resample_j=int(ev.resample_j),
        negative_weight=float(ev.negative_weight), transfer_tasks=int(ev.transfer_tasks),
        async_evolver=bool(ev.async_evolver),
        calibrate_tasks=int(ev.calibrate_tasks),
        calibrate_min_band=float(ev.calibrate_min_band),
        max_unscored_share=float(ev.max_unscored_share),
        prefetch_resamples=bool(ev.prefetch_resamples))

  @property
  def bands(self) -> Mapping[str, tuple[float, float]]:
    return {"guidance": self.guidance_band, "rubric": self.rubric_band}


@dataclasses.dataclass(frozen=True)
class AblationConfig:
  """`config.ablation` (defaults in train_config.ablation_defaults), typed and checked.

  The paper's ablations, each a property of a role built once by `build_evolver`:
    routes  the proposer proposes only on these routes; a dropped route's labelled
            criteria end in a noop (guidance-only, rubric-only, ...).
    critic  False: the critic accepts every candidate whose ops apply and keep the harness
            invariants, without measuring it on the policy ("no critic").
    memory  False: the driver passes no memory to the evolver ("no critic and no memory").
  """

  routes: frozenset[str]
  critic: bool
  memory: bool

  def __post_init__(self):
    if not self.routes <= ALL_ROUTES:
      raise ConfigError(f"config.ablation.routes = {tuple(sorted(self.routes))}: each must "
                        f"be one of {sorted(ALL_ROUTES)}")

  @classmethod
  def from_config(cls, ab: ml_collections.ConfigDict) -> AblationConfig:
    return cls(routes=frozenset(str(r) for r in ab.routes), critic=bool(ab.critic),
               memory=bool(ab.memory))
