"""The evolver's config sections: the defaults of `config.evolver`, and the frozen typed
views of `config.evolver` (`EvolverConfig`) and `config.ablation` (`AblationConfig`) that
`build_evolver` builds once and hands to the roles.

Reward quantities here are in points: reward x Lambda (harness.total_weight, 100), so a
band of [10.2, 28.0] means "the candidate moved the group's mean reward by 10.2 to 28
points".
"""

from __future__ import annotations

from collections.abc import Mapping

import ml_collections

from harnessrl_jax.config_view import section_view
from harnessrl_jax.errors import refuse
from harnessrl_jax.evolver.types import ALL_ROUTES

BACKENDS = ("rule", "llm")


# One long function on purpose: a list of defaults, each with its reason, reads best as one
# list (the typed view takes its fields from it).
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
    intervention_edits: edits whose surface the intervention finds from the group itself,
      tried after its fixed ones (attributor.GROUP_EDITS; issue 46, beyond the paper; ()
      off, the behaviour before they existed): "runon" cuts an unfinished response back
      to the length of the group's longest finished one, "ngram" drops the sentences
      holding n-grams every satisfying response has and no other, outside the prompt's
      words, "inrepeat" says a word repeated within its sentence once. No list of
      phrases: nothing here names the testbed's surfaces.
    intervention_overturns: True (as before): a correlational "spurious" the edits do not
      confirm becomes "agree"; False: it stands, and the test only adds "spurious" labels
      (an edit that cannot expose a hack, e.g. a word count met without finishing, is no
      evidence that there is none; issue 46).
    intervention_untested_stands: False (as before): with intervention_overturns, a
      correlational "spurious" no edit could test (no edit changed a satisfying response)
      becomes "agree" too; True: it stands, and only edits that changed the answers and
      left the verdict standing overturn it (an untested suspicion is not a refuted one;
      issue 46).
    intervention_min_words: an edited response counts as an edit only while it keeps at
      least this many words (0, as before: every edit counts; 1: an edit that removes the
      whole answer, e.g. the filler edit on text that reads as none, takes the answer, not
      a surface, and flips even "the response is not empty"; issue 46).
    accept_test: the critic's condition (ii) lower bound: "band" (the route's band, the
      paper's empirical rule) or "ttest" (evolver/acceptance.py, issue 46, beyond the
      paper: a one-sided t test of Delta > 0 at level accept_alpha, the band's upper bound
      kept), so that a false accept has a stated rate.
    accept_alpha: the "ttest" level: the chance that a candidate that changes nothing is
      accepted by condition (ii).
    guidance_own_memory: a `<reference>` for a penalty may be the policy's own best answer
      to the task in memory that avoids it and incurs no other penalty of the task (issue
      46: the finished answer shown to the policy that rarely samples it; False: as
      before). Tried after the task's reference answer, before the repaired one.
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
  c.intervention_edits = ()
  c.intervention_overturns = True
  c.intervention_untested_stands = False
  c.intervention_min_words = 0
  c.accept_test = "band"
  c.accept_alpha = 0.05
  c.guidance_own_memory = False
  c.resample_j = 0
  c.prefetch_resamples = True
  c.negative_weight = 10.0
  c.transfer_tasks = 0
  c.calibrate_tasks = 0
  c.calibrate_min_band = 1.0
  c.max_unscored_share = 0.1
  return c


def band_problems(band, where: str) -> list[str]:
  """What is wrong with an acceptance band (lo, hi) in points named `where`."""
  vals = [float(x) for x in band]
  if len(vals) != 2 or not 0 <= vals[0] <= vals[1]:
    return [f"{where} = [{', '.join(map(str, vals))}]: need 0 <= lo <= hi (points)"]
  return []


def check_band(band, where: str) -> tuple[float, float]:
  """`band` as (lo, hi) in points; ConfigError naming `where` unless 0 <= lo <= hi."""
  refuse(band_problems(band, where))
  lo, hi = (float(x) for x in band)
  return lo, hi


class EvolverConfig(section_view(evolver_defaults, "config.evolver")):
  """`config.evolver`, typed (fields and their meanings: `evolver_defaults`)."""

  def problems(self) -> list[str]:
    out = []
    for role in ("attributor", "proposer"):
      if getattr(self, role) not in BACKENDS:
        out.append(f"config.evolver.{role} = {getattr(self, role)!r}: expected one of "
                   f"{BACKENDS}")
    if self.rounds < 0:
      out.append(f"config.evolver.rounds = {self.rounds}: must be >= 0")
    if self.transfer_tasks < 0:
      out.append(f"config.evolver.transfer_tasks = {self.transfer_tasks}: must be >= 0 "
                 "(0: off)")
    for route in ("guidance", "rubric"):
      out += band_problems(getattr(self, f"{route}_band"), f"config.evolver.{route}_band")
    if not 0.0 <= self.intervention_flip_share < 1.0:
      out.append(f"config.evolver.intervention_flip_share = {self.intervention_flip_share}: "
                 "must be in [0, 1) (the verdict must flip on MORE than this share)")
    if self.intervention_rest_points < 0:
      out.append(f"config.evolver.intervention_rest_points = "
                 f"{self.intervention_rest_points}: must be >= 0 (points)")
    if not 0.0 <= self.max_unscored_share <= 1.0:
      out.append(f"config.evolver.max_unscored_share = {self.max_unscored_share}: must be in "
                 "[0, 1] (a share of the critic's judged cells)")
    return out

  @property
  def bands(self) -> Mapping[str, tuple[float, float]]:
    return {"guidance": self.guidance_band, "rubric": self.rubric_band}


def ablation_defaults() -> ml_collections.ConfigDict:
  """Switches of the paper's ablations (all on: the full method).

  Fields:
    routes: the evolver routes that may propose updates; a route left out records a noop
      for its labelled criteria ("rubric_only" keeps ("rubric",), ...).
    critic: False accepts every structurally valid candidate without measuring it on the
      policy (the paper's "no critic"); structural validity (anchors, Lambda, caps) stays.
    memory: False runs the evolver without memory: no time index, no donors, no reversal
      check (the paper's "no critic and no memory" with critic False).
  """
  a = ml_collections.ConfigDict()
  a.routes = ("rubric", "guidance", "sampling")
  a.critic = True
  a.memory = True
  return a


class AblationConfig(section_view(ablation_defaults, "config.ablation")):
  """`config.ablation` (defaults and meanings: `ablation_defaults` above), typed.

  The paper's ablations, each a property of a role built once by `build_evolver`:
    routes  the proposer proposes only on these routes; a dropped route's labelled
            criteria end in a noop (guidance-only, rubric-only, ...).
    critic  False: the critic accepts every candidate whose ops apply and keep the harness
            invariants, without measuring it on the policy ("no critic").
    memory  False: the driver passes no memory to the evolver ("no critic and no memory").
  """

  def problems(self) -> list[str]:
    if not set(self.routes) <= ALL_ROUTES:
      return [f"config.ablation.routes = {tuple(self.routes)}: each must be one of "
              f"{sorted(ALL_ROUTES)}"]
    return []
