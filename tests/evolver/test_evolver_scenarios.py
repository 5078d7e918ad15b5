"""Constructed scenarios where the failure class is known: label, route and the critic's
verdict; band rejection with feedback and the noop after B rounds; determinism."""

import dataclasses
import json

import jax
import numpy as np
import pytest

from harnessrl_jax.data.frozen import FrozenMap
from harnessrl_jax.data.schema import Check, Criterion, Message, Task
from harnessrl_jax.evolver import Critic, Evolver, RuleAttributor, RuleProposer
from harnessrl_jax.evolver.critic import unmeasurable_reasons
from harnessrl_jax.evolver.evolve import CriticError
from harnessrl_jax.evolver.types import Cost
from harnessrl_jax.harness import digest, from_tasks
from harnessrl_jax.harness.history import HistoryLog, read_history, replay
from harnessrl_jax.judges.client import TransportError
from harnessrl_jax.judges.judge import Judge, JudgeError
from harnessrl_jax.judges.score_matrix import Unscored
from harnessrl_jax.memory import make_draw
from tests.evolver import test_evolver_fixtures as fx


def run(tasks, responses, *, policy=None, cfg=None, memory=True, key=0, history=None,
        prepare=None, step=5, candidate_log=None, llm_judge=True, judge=None,
        critic_args=None):
  cfg = cfg or fx.settings()
  h = from_tasks(tasks)
  j = judge or fx.judge(with_llm=llm_judge)
  groups = fx.record(tasks, h, responses, j)
  mem = fx.new_memory(h) if memory else None
  if prepare:
    prepare(mem, groups)
  policy = policy or fx.FakePolicy(fx.PROMPTS)
  ev = Evolver(cfg, attributor=RuleAttributor(cfg), proposer=RuleProposer(cfg),
               critic=Critic(j, cfg, num_samples=4, **(critic_args or {})),
               history_log=history, candidate_log=candidate_log)
  return h, groups, mem, ev.step(h, groups, step=step, key=jax.random.key(key), memory=mem,
                                 resample=policy)


def labels(result, task_id):
  att = next(a for a in result.attributions if a.task_id == task_id)
  return {lab.criterion_id: lab for lab in att.labels}


def test_blind_criterion_gets_guidance_accepted_when_it_raises_reward():
  h0, groups, mem, res = run([fx.BLIND], [fx.BLIND_RESPONSES])
  lab = labels(res, "t-blind")
  assert lab["c2"].label == "blind" and lab["c2"].route == "guidance"
  assert lab["c1"].label == "agree"            # split 2/2, no surface signal
  (rec,) = [r for r in res.records if r.verdict != "noop"]
  assert rec.route == "guidance" and rec.verdict == "accepted"
  assert rec.candidate.kind == "guidance:criterion"
  # c2 carries 20 of 100 points; the hint-following policy now meets it in every rollout,
  # c1 unchanged (2 of 4): r_old = 0.4, r_new = 0.6.
  assert rec.measurement.r_old == pytest.approx(0.4, abs=1e-6)
  assert rec.measurement.r_new == pytest.approx(0.6, abs=1e-6)
  assert rec.measurement.delta == pytest.approx(20.0, abs=1e-4)
  assert rec.measurement.rollouts == 4
  fields = dict(res.harness.guidance("t-blind"))
  assert "condensation" in fields["criterion"].lower()
  assert res.accounting["critic"]["rollouts"] == 4
  assert res.accounting["critic"]["judge_cells"] == 8
  # Write-back: the draw, its labels and the accepted op are in memory.
  (d,) = mem.time.draws("t-blind")
  assert d.labels["c2"] == "blind" and d.actions[0]["op"] == "add_guidance"


def test_guidance_that_would_overflow_the_largest_prompt_bucket_is_structural():
  """A candidate whose task's training prompt no longer fits the sampler's largest bucket
  is refused by check (iii) before any re-sample: accepted, it would stop the run at the
  task's next draw (the sampler refuses such prompts)."""
  chars = lambda chat: sum(len(m.content) for m in chat)
  bound = chars(fx.BLIND.prompt) + 5      # the prompt fits; no guidance block does
  policy = fx.FakePolicy(fx.PROMPTS)
  _, _, _, res = run([fx.BLIND], [fx.BLIND_RESPONSES], policy=policy,
                     critic_args={"prompt_tokens": chars, "max_prompt_tokens": bound})
  measured = [r for r in res.records if r.candidate is not None]
  assert measured and all(r.verdict == "rejected" for r in measured)
  for r in measured:
    (reason,) = r.measurement.reasons
    assert reason.startswith("(iii) structural: the task's training prompt would be ")
    assert f"more than the largest prompt bucket {bound}" in reason
  assert policy.calls == [] and res.harness.guidance("t-blind") == ()
  # With room for the block, the same candidate is measured and accepted as before.
  _, _, _, res = run([fx.BLIND], [fx.BLIND_RESPONSES],
                     critic_args={"prompt_tokens": chars, "max_prompt_tokens": 10 * bound})
  assert [r.verdict for r in res.records if r.candidate is not None] == ["accepted"]


def test_blind_guidance_rejected_when_it_does_not_raise_reward():
  policy = fx.FakePolicy(fx.PROMPTS, follows=False)
  _, _, _, res = run([fx.BLIND], [fx.BLIND_RESPONSES], policy=policy)
  assert labels(res, "t-blind")["c2"].label == "blind"
  measured = [r for r in res.records if r.verdict == "rejected"]
  # <criterion>, then <critique> (no donors for <reference> yet); each leaves r unchanged.
  assert [r.candidate.kind for r in measured] == ["guidance:criterion", "guidance:critique"]
  for r in measured:
    assert r.measurement.delta == pytest.approx(0.0, abs=1e-6)
    assert any(s.startswith("(i) sign") for s in r.measurement.reasons)
  assert res.records[-1].verdict == "noop"
  assert res.harness.guidance("t-blind") == ()
  assert res.digest == digest(from_tasks([fx.BLIND]))


def test_saturated_criterion_moves_the_task_one_level_down():
  def history(mem, groups):  # the same criterion was all-satisfied at the previous draw
    g = groups[0]
    mem.add_draw(make_draw(g.task_id, 4, [c.id for c in g.criteria],
                           [c.weight for c in g.criteria], g.scores, g.scored, g.rewards))
  h0, _, _, res = run([fx.SATURATED], [fx.SATURATED_RESPONSES], prepare=history)
  lab = labels(res, "t-sat")
  assert lab["c1"].label == "saturated" and lab["c1"].route == "sampling"
  assert lab["c1"].confidence == 1.0
  (rec,) = [r for r in res.records if r.route == "sampling"]
  assert rec.verdict == "accepted" and rec.candidate.kind == "sampling:level_down"
  ladder = np.asarray(h0.ladder, np.float64)
  assert rec.measurement.delta == pytest.approx(ladder[0] - ladder[1])
  assert rec.measurement.rollouts == 0 and rec.measurement.judge_cells == 0
  assert res.harness.level("t-sat") == 1


def test_saturated_without_history_has_half_confidence_and_reversal_is_refused():
  def undo_history(mem, groups):  # a level-up was accepted 2 steps ago, same label then
    g = groups[0]
    mem.add_draw(make_draw(g.task_id, 3, [c.id for c in g.criteria],
                           [c.weight for c in g.criteria], g.scores * 0, g.scored, g.rewards,
                           labels={"c1": "saturated"},
                           actions=[{"op": "sampling_level_up", "task_id": "t-sat"}]))
  _, _, _, res = run([fx.SATURATED], [fx.SATURATED_RESPONSES], prepare=undo_history)
  assert labels(res, "t-sat")["c1"].label == "saturated"
  assert labels(res, "t-sat")["c1"].confidence == 0.5   # the earlier draw was not saturated
  (rec,) = [r for r in res.records if r.verdict == "rejected"]
  assert any(s.startswith("(iv) reversal") for s in rec.measurement.reasons)
  assert res.harness.level("t-sat") == 0


def test_spurious_criterion_gets_a_rubric_rewrite_accepted_because_it_lowers_reward():
  _, groups, _, res = run([fx.SPURIOUS], [fx.SPURIOUS_RESPONSES])
  g = groups[0]
  np.testing.assert_array_equal(g.scores, [[1, 1, 0, 0], [0, 0, 1, 1]])
  lab = labels(res, "t-spur")["c2"]
  assert lab.label == "spurious" and lab.route == "rubric"
  assert "All requirements met." in lab.evidence
  assert lab.wording == fx.SPURIOUS.criteria[1].text
  signals = dict(lab.signals)
  assert signals["phrase"] and signals["disagree"]
  assert signals["rest_gap_points"] == pytest.approx(-100.0)
  (rec,) = [r for r in res.records if r.route == "rubric"]
  assert rec.verdict == "accepted" and rec.candidate.kind == "rubric:rewrite"
  # 60/40 points: before r = (.6, .6, .4, .4); after the rewrite c2 is met by nobody.
  assert rec.measurement.r_old == pytest.approx(0.5, abs=1e-6)
  assert rec.measurement.r_new == pytest.approx(0.3, abs=1e-6)
  assert rec.measurement.delta == pytest.approx(20.0, abs=1e-4)
  (c2,) = [c for c in res.harness.criteria("t-spur") if c.id == "c2"]
  assert '"All requirements met."' in c2.text and "do not count" in c2.text


def test_out_of_band_candidates_go_back_with_their_measurement_then_noop():
  cfg = fx.settings(rubric_band=(3.1, 4.0))
  _, _, _, res = run([fx.SPURIOUS], [fx.SPURIOUS_RESPONSES], cfg=cfg)
  recs = [r for r in res.records if r.route == "rubric"]
  assert [r.verdict for r in recs] == ["rejected", "rejected", "rejected", "noop"]
  kinds = [r.candidate.kind for r in recs[:3]]
  # The rewrite overshoots (20 points > 4): the proposer reads that and goes gentlest.
  assert kinds == ["rubric:rewrite", "rubric:reweight", "rubric:negative"]
  deltas = [r.measurement.delta for r in recs[:3]]
  # reweight halves c2 (40 -> 20, rescaled to 75/25): every reward keeps its mean 0.5;
  # the -10 penalty hits the two stock-phrase responses: 0.5 - 0.1 * 2/4 = 0.45.
  assert deltas == pytest.approx([20.0, 0.0, 5.0], abs=1e-4)
  assert any(s.startswith("(ii) band") for s in recs[0].measurement.reasons)
  assert any(s.startswith("(i) sign") for s in recs[1].measurement.reasons)
  assert any(s.startswith("(ii) band") for s in recs[2].measurement.reasons)
  assert recs[3].note.startswith("no candidate accepted after 3")
  assert res.digest == digest(from_tasks([fx.SPURIOUS]))


def test_same_inputs_and_keys_give_the_same_next_harness(tmp_path):
  tasks = [fx.BLIND, fx.SATURATED, fx.SPURIOUS]
  resp = [fx.BLIND_RESPONSES, fx.SATURATED_RESPONSES, fx.SPURIOUS_RESPONSES]
  log = HistoryLog(tmp_path / "history.jsonl")
  h0, _, _, a = run(tasks, resp, history=log, candidate_log=str(tmp_path / "cand.jsonl"))
  _, _, _, b = run(tasks, resp)
  assert a.digest == b.digest == digest(a.harness) != digest(h0)
  assert [r.to_json() for r in a.records] == [r.to_json() for r in b.records]
  assert a.counts() == {"accepted": 3}
  # Every candidate is logged with its measurement and verdict.
  lines = [json.loads(x) for x in open(tmp_path / "cand.jsonl", encoding="utf-8")]
  assert [(x["task_id"], x["verdict"], x["measurement"]["delta"]) for x in lines] == [
      (r.task_id, r.verdict, round(r.measurement.delta, 6)) for r in a.records]
  # The history log replays to the same harness.
  assert digest(replay(h0, read_history(tmp_path / "history.jsonl"))) == a.digest


def test_reference_comes_from_a_semantic_donor_then_noop_after_b_rounds():
  other = Task("t-other", "science", (Message("user", "How do clouds form?"),), (
      Criterion("k1", "Mentions condensation", 1.0, check=fx.kw("condensation")),))
  donor = "Clouds form by condensation of water vapour on dust."
  miss = "Clouds are made of cotton."

  def donors(mem, groups):
    mem.add_draw(make_draw("t-other", 1, ["k1"], [100.0], [[1, 0]], [[True, True]],
                           [1.0, 0.0]), [donor, miss])
  policy = fx.FakePolicy(fx.PROMPTS, follows=False)
  tasks = [fx.BLIND, other]
  h = from_tasks(tasks)
  j = fx.judge()
  groups = fx.record([fx.BLIND], h, [fx.BLIND_RESPONSES], j)
  mem = fx.new_memory(h)
  donors(mem, groups)
  cfg = fx.settings()
  ev = Evolver(cfg, attributor=RuleAttributor(cfg), proposer=RuleProposer(cfg),
               critic=Critic(j, cfg, num_samples=4))
  res = ev.step(h, groups, step=5, key=jax.random.key(0), memory=mem, resample=policy)
  recs = [r for r in res.records if r.route == "guidance"]
  assert [r.verdict for r in recs] == ["rejected"] * 3 + ["noop"]
  assert [r.candidate.kind for r in recs[:3]] == [
      "guidance:criterion", "guidance:reference", "guidance:critique"]
  ref = recs[1].candidate.ops[-1].content
  assert donor in ref and miss in ref
  # The critic rendered each candidate into the prompt the policy saw.
  assert [list(fx.guidance_blocks(p)) for p in policy.calls] == [
      ["criterion"], ["reference"], ["critique"]]


def test_padding_gets_its_word_count_check_tightened():
  _, groups, _, res = run([fx.PADDED], [fx.PADDED_RESPONSES])
  np.testing.assert_array_equal(groups[0].scores, [[1, 1, 0, 0], [0, 0, 1, 1]])
  lab = labels(res, "t-pad")
  assert lab["c1"].label == "agree"
  assert lab["c2"].label == "spurious" and lab["c2"].route == "rubric"
  signals = dict(lab["c2"].signals)
  assert signals["by_length"] and not signals["phrase"] and signals["length_ratio"] > 3
  assert "This is an important point to consider." in lab["c2"].evidence
  (rec,) = [r for r in res.records if r.route == "rubric"]
  # c2's word_count check becomes fluent_word_count (and a finished reply): the padded
  # responses say
  # 15 distinct words, not 30, and lose c2's 40 points: r 0.5 -> 0.3.
  assert rec.verdict == "accepted" and rec.candidate.kind == "rubric:tighten"
  assert rec.measurement.delta == pytest.approx(20.0, abs=1e-4)
  (c2,) = [c for c in res.harness.criteria("t-pad") if c.id == "c2"]
  assert c2.check.to_json() == {"type": "all_of", "checks": [
      {"type": "fluent_word_count", "min": 30}, {"type": "ends_complete"}]}
  assert c2.text == ("Is thorough and detailed; only sentences that read as text count "
                     "towards its length, repeated ones once, and a reply cut off "
                     "mid-sentence does not count.")


PADDED_ANCHOR = Task("t-pad", "science", fx.PADDED.prompt,
                     (fx.PADDED.criteria[0],
                      dataclasses.replace(fx.PADDED.criteria[1], anchor=True)))


def test_padding_of_an_anchor_gets_a_penalty_with_a_check_accepted():
  # An anchor may only be reweighted: no tighten. The penalty's check passes on the
  # padded responses (a sentence said twice or more), 10 of 100 points each: 0.5 -> 0.45.
  _, _, _, res = run([PADDED_ANCHOR], [fx.PADDED_RESPONSES])
  (rec,) = [r for r in res.records if r.route == "rubric"]
  assert rec.verdict == "accepted" and rec.candidate.kind == "rubric:negative"
  (op,) = rec.candidate.ops
  assert op.weight == -10.0 and op.check.to_json() == {"type": "repeated_sentences", "min": 2}
  assert rec.measurement.delta == pytest.approx(5.0, abs=1e-4)
  new = [c for c in res.harness.criteria("t-pad") if c.id == "c2-hack"]
  assert new and new[0].weight < 0 and new[0].text.startswith("Repeats a sentence")


# c2 (a sentence-count check, which has no exploit-closing version) is met only by the
# responses that miss c1: spurious by disagreement, with no stock phrase, no repeated
# sentence and no length signal, so no penalty check detects the hack either.
# (c1 disagrees with c2 as much; c2 weighs more, so it is the target.)
TERSE = Task("t-terse", "science", (Message("user", "Why do leaves change colour?"),), (
    Criterion("c1", "Explains that chlorophyll breaks down", 4.0, check=fx.kw("chlorophyll")),
    Criterion("c2", "Gives the cause and an example", 6.0, anchor=False,
              check=Check("sentence_count", FrozenMap({"min": 2}))),
))
TERSE_RESPONSES = (
    "Chlorophyll breaks down in the autumn light.",
    "The chlorophyll fades as the days get shorter.",
    "Leaves change in autumn. Trees get ready.",
    "Colours shift every year. Cold nights come.",
)


def test_candidates_whose_new_criteria_get_no_verdict_are_unmeasurable():
  # Program checks only: the natural-language candidates (the penalty in words, the split
  # parts) carry no check, so they get no verdict at all: unmeasurable (not Delta = 0),
  # and back to the proposer, which tries the next kind. The reweight of c2 (it has a
  # check) is measured: Delta = 0.
  _, _, _, res = run([TERSE], [TERSE_RESPONSES], llm_judge=False)
  assert labels(res, "t-terse")["c2"].label == "spurious"
  recs = [r for r in res.records if r.route == "rubric"]
  assert [r.verdict for r in recs] == ["unmeasurable", "unmeasurable", "rejected", "noop"]
  assert [r.candidate.kind for r in recs[:3]] == [
      "rubric:negative", "rubric:split", "rubric:reweight"]
  assert recs[0].candidate.ops[0].check is None
  assert recs[0].measurement.reasons == (
      "unmeasurable: no verdict on changed criteria c2-hack",)
  assert recs[1].measurement.reasons == (
      "unmeasurable: no verdict on changed criteria c2-a, c2-b",)
  for r in recs[:2]:
    m = r.measurement
    assert m.delta is None and m.unmeasurable and not m.accepted
    assert m.to_json()["delta"] is None and m.to_json()["unmeasurable"] is True
  assert recs[2].measurement.delta == pytest.approx(0.0, abs=1e-3)
  assert recs[2].measurement.reasons[0].startswith("(i) sign")
  # Cells no backend of this judge can score are not judge failures: nothing lost.
  assert res.accounting["critic"]["unscored"]["count"] == 0


class PartlyDownJudge(fx.FakeJudgeClient):
  """The fake judge, but requests whose prompt `fails` matches end in a transport error
  (what the client returns once its retries are spent)."""

  def __init__(self, fails):
    super().__init__()
    self.fails = fails

  def _complete(self, chats, max_tokens):
    answers = super()._complete(chats, max_tokens)
    return [TransportError("judge down for this text") if self.fails(c[-1].content) else a
            for c, a in zip(chats, answers)]


def _rewrites_fail() -> Judge:
  """A judge that scores the seed rubric and the penalty, but no rewritten criterion."""
  return Judge(PartlyDownJudge(lambda user: "do not count" in user), use_checks=True)


def test_a_candidate_whose_measurement_lost_cells_is_unmeasurable_and_fed_back():
  cfg = fx.settings(max_unscored_share=0.5)
  _, _, _, res = run([fx.SPURIOUS], [fx.SPURIOUS_RESPONSES], cfg=cfg, judge=_rewrites_fail())
  recs = [r for r in res.records if r.route == "rubric"]
  assert [(r.verdict, r.candidate.kind) for r in recs] == [
      ("unmeasurable", "rubric:rewrite"), ("accepted", "rubric:negative")]
  m = recs[0].measurement
  assert m.delta is None and m.unmeasurable
  assert m.unscored.to_json() == {"count": 4, "share": 0.5, "cells": 8,
                                  "causes": {"transport": 4}}
  assert m.reasons[0] == ("unmeasurable: 4 of 8 judged cells (50%) have no verdict "
                          "(transport: 4) in the measurement")
  assert not recs[1].measurement.unmeasurable
  assert res.accounting["critic"]["unscored"] == {"count": 4, "share": 4 / 20, "cells": 20,
                                                  "causes": {"transport": 4}}


def test_the_critic_stops_the_step_past_evolver_max_unscored_share(tmp_path):
  log = tmp_path / "candidates.jsonl"
  with pytest.raises(CriticError) as e:
    run([fx.SPURIOUS], [fx.SPURIOUS_RESPONSES], judge=_rewrites_fail(), candidate_log=str(log))
  msg = str(e.value)
  assert isinstance(e.value, JudgeError) and "\n" not in msg
  assert msg.startswith("critic, step 6: 4 of 20 judged cells (20%) have no verdict "
                        "(transport: 4) in its measurements (1 of 2 candidates "
                        "unmeasurable), more than evolver.max_unscored_share=0.1")
  assert e.value.unscored.count == 4
  # The step's records are written before the stop (a resume drops them with the step).
  verdicts = [json.loads(l)["verdict"] for l in log.read_text().splitlines()]
  assert verdicts == ["unmeasurable", "accepted"]


def test_unmeasurable_reasons_by_rule():
  nan = float("nan")
  assert unmeasurable_reasons(Unscored(8), [], 5.0) == ()
  assert unmeasurable_reasons(Unscored(8), [], nan) == (
      "unmeasurable: no reward to compare (no valid rollout before or after)",)
  assert unmeasurable_reasons(Unscored(8, (("parse", 1),)), ["c9"], 0.0) == (
      "unmeasurable: 1 of 8 judged cells (12%) have no verdict (parse: 1) in the measurement",
      "unmeasurable: no verdict on changed criteria c9")


# A penalty every response incurs is blind: its guidance must say to avoid what it names.
PENALISED = Task("t-pen", "science", (Message("user", "Describe the water cycle."),), (
    Criterion("c1", "Mentions evaporation", 8.0, check=fx.kw("evaporation")),
    Criterion("c2", "Hedges with the word basically", -4.0, check=fx.kw("basically")),
))
PENALISED_RESPONSES = tuple(f"Basically, {r[0].lower()}{r[1:]}" for r in fx.BLIND_RESPONSES)


def test_guidance_for_a_penalty_everyone_incurs_says_to_avoid_it():
  policy = fx.FakePolicy({PENALISED.prompt[0].content: PENALISED_RESPONSES}, follows=False)
  _, _, _, res = run([PENALISED], [PENALISED_RESPONSES], policy=policy)
  assert labels(res, "t-pen")["c2"].label == "blind"
  contents = [op.content for r in res.records if r.route == "guidance" and r.candidate
              for op in r.candidate.ops if hasattr(op, "content")]
  assert contents, "no guidance was proposed for the blind penalty"
  assert "must avoid the following: Hedges with the word basically" in contents[0]
  assert "All 4 previous answers did what this task penalises" in contents[-1]
  for text in contents:
    assert "must also do" not in text and "met this requirement" not in text


def test_the_route_targets_the_most_reward_at_stake():
  from harnessrl_jax.evolver.evolve import _targets  # pylint: disable=g-import-not-at-top
  from harnessrl_jax.evolver.types import CriterionLabel  # pylint: disable=g-import-not-at-top
  seen_long = CriterionLabel("light", "blind", 1.0)
  new_heavy = CriterionLabel("heavy", "blind", 0.5)
  weights = {"light": 2.0, "heavy": -10.0}
  assert _targets([seen_long, new_heavy], "guidance", weights, 0.0) == [new_heavy, seen_long]
  # at equal stake the more certain label comes first, then the earlier criterion
  assert _targets([new_heavy, seen_long], "guidance", {"light": 5.0, "heavy": 10.0},
                  0.0) == [seen_long, new_heavy]
  twin = CriterionLabel("twin", "blind", 1.0)
  assert _targets([seen_long, twin], "guidance", {"light": 2.0, "twin": 2.0},
                  0.0) == [seen_long, twin]
  assert _targets([new_heavy, seen_long], "guidance", weights, 0.6) == [seen_long]
  assert _targets([seen_long], "rubric", weights, 0.0) == []


def test_a_target_with_nothing_to_propose_passes_the_route_to_the_next():
  two_blind = Task("t-two", "science", fx.BLIND.prompt, (
      Criterion("c1", "Mentions condensation", 6.0, check=fx.kw("condensation")),
      Criterion("c2", "Mentions precipitation", 2.0, check=fx.kw("precipitation")),
  ))

  class NothingForC1(RuleProposer):

    def __init__(self, config):
      super().__init__(config)
      self.asked = []

    def propose(self, req):
      self.asked.append(req.label.criterion_id)
      if req.label.criterion_id == "c1":
        return None, Cost()
      return super().propose(req)

  cfg = fx.settings()
  h = from_tasks([two_blind])
  j = fx.judge()
  groups = fx.record([two_blind], h, [fx.BLIND_RESPONSES], j)
  proposer = NothingForC1(cfg)
  ev = Evolver(cfg, attributor=RuleAttributor(cfg), proposer=proposer,
               critic=Critic(j, cfg, num_samples=4))
  res = ev.step(h, groups, step=5, key=jax.random.key(0), memory=fx.new_memory(h),
                resample=fx.FakePolicy(fx.PROMPTS))
  assert proposer.asked[:2] == ["c1", "c2"]   # the heavier first, then the next
  assert [(r.criterion_id, r.verdict) for r in res.records] == [("c1", "noop"),
                                                               ("c2", "accepted")]
  assert "precipitation" in dict(res.harness.guidance("t-two"))["criterion"].lower()
