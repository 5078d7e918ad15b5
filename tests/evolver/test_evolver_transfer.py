"""Offering an accepted rubric repair to the other tasks that share its criterion
(evolver.transfer_tasks): which tasks are siblings, what carries over, and the critic
measuring each offer on a group the frozen policy samples for that task."""

import dataclasses

import jax
import pytest

from harnessrl_jax.data.frozen import FrozenMap
from harnessrl_jax.data.schema import Check, Criterion, Message, Task
from harnessrl_jax.errors import ConfigError, HarnessError
from harnessrl_jax.evolver import Critic, Evolver, RuleAttributor, RuleProposer
from harnessrl_jax.evolver import transfer
from harnessrl_jax.evolver.types import Candidate
from harnessrl_jax.harness import RubricCreate, RubricReweight, RubricRewrite, digest, from_tasks
from harnessrl_jax.judges.config import judge_defaults
from harnessrl_jax.judges.factory import make_judge
from tests.evolver import test_evolver_fixtures as fx

THOROUGH = Criterion("c2", "Is thorough and detailed", 4.0,
                     check=Check("word_count", FrozenMap({"min": 30})))


def task(tid, question, content_word, thorough=THOROUGH):
  return Task(tid, "science", (Message("user", question),), (
      Criterion("c1", f"Mentions {content_word}", 6.0, check=fx.kw(content_word)),
      thorough))


A = task("t-a", "Why do leaves change colour?", "chlorophyll")
B = task("t-b", "Why do trees drop their leaves?", "winter")
C = task("t-c", "Why are leaves green?", "chlorophyll")
D = task("t-d", "Why do leaves fall?", "winter",
         dataclasses.replace(THOROUGH, text="Is detailed"))   # other wording: no sibling

CUT = ("Leaves change colour in autumn because the days get shorter and cooler. The tree "
       "stops making the green pigment that it uses to capture light. As the weeks go by the "
       "other colours in the leaf become easier to")
FINISHED = ("Leaves are green because they hold chlorophyll, a pigment that absorbs red and "
            "blue light and reflects green light. It lets the plant turn sunlight, water and "
            "air into the sugar it lives on, all through the summer.")
RESPONSES = {
    A: ("In autumn chlorophyll breaks down and yellow pigments show through.",
        "Less light means the chlorophyll fades, revealing other pigments.", CUT,
        CUT.replace("Leaves", "Foliage")),
    # B's policy answers cut off half the time: the penalty moves its reward
    B: ("Trees drop leaves to save water in winter.", "In winter water is scarce.",
        CUT.replace("colour", "color"), CUT.replace("Leaves", "Most leaves")),
    # C's answers finish: the penalty changes nothing there
    C: (FINISHED, "Chlorophyll makes them green.", FINISHED.replace("Leaves", "They"),
        "Chlorophyll."),
    D: ("Leaves fall in winter.",) * 4,
}


def program_judge():
  cfg = judge_defaults()
  cfg.backend = "program"
  return make_judge(cfg)


def anchored(t):
  return dataclasses.replace(t, criteria=tuple(dataclasses.replace(c, anchor=True)
                                               for c in t.criteria))


def evolver(judge, tasks, **overrides):
  cfg = fx.settings(**overrides)
  return Evolver(cfg, attributor=RuleAttributor(cfg), proposer=RuleProposer(cfg),
                 critic=Critic(judge, cfg, num_samples=4), tasks=tasks)


def run_step(transfer_tasks, tasks=(A, B, C, D)):
  tasks = [anchored(t) for t in tasks]
  judge = program_judge()
  h = from_tasks(tasks)
  policy = fx.FakePolicy({t.prompt[0].content: RESPONSES[t] for t in (A, B, C, D)})
  groups = fx.record(tasks[:1], h, [RESPONSES[A]], judge)
  res = evolver(judge, tasks, transfer_tasks=transfer_tasks).step(
      h, groups, step=0, key=jax.random.key(0), resample=policy)
  return res, policy


def test_siblings_share_text_and_check():
  h = from_tasks([A, B, C, D])
  assert [t for t, _ in transfer.siblings(h, "t-a", THOROUGH)] == ["t-b", "t-c"]
  other_check = dataclasses.replace(THOROUGH, check=Check("word_count", FrozenMap({"min": 20})))
  assert transfer.siblings(h, "t-a", other_check) == []


def test_an_accepted_penalty_is_offered_and_measured_on_each_sibling():
  res, policy = run_step(transfer_tasks=4)
  by_task = {r.task_id: r for r in res.records}
  assert by_task["t-a"].verdict == "accepted"
  source = by_task["t-a"].candidate
  assert source.kind == "rubric:negative" and source.ops[0].check.type == "cut_off"
  # B exploits the criterion now: the offer lowers its reward and is accepted
  b = by_task["t-b"]
  assert b.verdict == "accepted" and b.note.startswith("offered from task 't-a'")
  (op,) = b.candidate.ops
  assert op == RubricCreate("t-b", "c2-hack", source.ops[0].text, -10.0, ("evolver", "hack"),
                            Check("cut_off"))
  assert b.measurement.delta == pytest.approx(5.0, abs=1e-3)   # 2 of 4 lose 10 of 100
  # C's answers finish: Delta 0, rejected by (i); D has no sibling criterion
  c = by_task["t-c"]
  assert c.verdict == "rejected" and c.measurement.reasons[0].startswith("(i) sign")
  assert "t-d" not in by_task
  h = res.harness
  assert [x.id for x in h.criteria("t-b")] == ["c1", "c2", "c2-hack"]
  assert [x.id for x in h.criteria("t-c")] == ["c1", "c2"]
  # the siblings were sampled in one batched call, with their training prompts
  assert [p[-1].content for p in policy.calls[-2:]] == [B.prompt[0].content,
                                                        C.prompt[0].content]
  assert res.accounting["critic"]["rollouts"] == 8
  assert [r.measurement["offered_from"] for r in res.history if r.op.task_id == "t-b"] \
      == ["t-a"]


def test_off_by_default_and_bounded_by_transfer_tasks():
  off, policy = run_step(transfer_tasks=0)
  assert {r.task_id for r in off.records} == {"t-a"} and len(policy.calls) == 0
  one, _ = run_step(transfer_tasks=1)
  assert [r.task_id for r in one.records if r.task_id != "t-a"] == ["t-b"]


def test_deterministic():
  a, _ = run_step(transfer_tasks=4)
  b, _ = run_step(transfer_tasks=4)
  assert a.digest == b.digest == digest(a.harness)
  assert [r.to_json() for r in a.records] == [r.to_json() for r in b.records]


def test_needs_the_training_tasks():
  with pytest.raises(HarnessError, match="transfer_tasks > 0 needs the training tasks"):
    evolver(program_judge(), (), transfer_tasks=2)
  with pytest.raises(ConfigError, match="transfer_tasks"):
    fx.settings(transfer_tasks=-1)


# ---- what carries over


def test_a_penalty_is_not_offered_twice():
  h = from_tasks([A, B])
  op = RubricCreate("t-a", "c2-hack", "Runs on ...", -10.0, ("evolver", "hack"), Check("cut_off"))
  cand = Candidate("rubric", "t-a", "c2", (op,), "rubric:negative")
  first = transfer.retarget(cand, h, THOROUGH, "t-b", THOROUGH, "q")
  assert first.ops[0].criterion_id == "c2-hack" and first.task_id == "t-b"
  from harnessrl_jax.harness import apply_all  # pylint: disable=g-import-not-at-top
  h2 = apply_all(h, first.ops)
  assert transfer.retarget(cand, h2, THOROUGH, "t-b", THOROUGH, "q") is None
  # nor where a penalty with the same check is already there under other words
  other = dataclasses.replace(op, criterion_id="c1-hack", text="Stops mid-sentence")
  h3 = apply_all(h, (dataclasses.replace(other, task_id="t-b"),))
  assert transfer.retarget(cand, h3, THOROUGH, "t-b", THOROUGH, "q") is None


def test_a_tightened_check_is_derived_again_from_the_siblings_prompt():
  stock = Criterion("c2", "Acknowledges the question", 4.0, anchor=False,
                    check=Check("keyword_present", FrozenMap({"keywords": ["sorry"],
                                                             "mode": "any"})))
  a, b = task("t-a", "Why do volcanoes erupt?", "magma", stock), \
      task("t-b", "How do glaciers move?", "ice", stock)
  h = from_tasks([a, b])
  rewrite = RubricRewrite("t-a", "c2", "x", Check("keywords_in_same_sentence", FrozenMap(
      {"keywords": ["sorry"], "with": ["volcanoes", "erupt"]})))
  cand = Candidate("rubric", "t-a", "c2", (rewrite,), "rubric:tighten")
  out = transfer.retarget(cand, h, stock, "t-b", stock, b.user_text)
  (op,) = out.ops
  assert op.task_id == "t-b" and tuple(op.check.args["with"]) == ("glaciers", "move")
  assert "glaciers" in op.text
  # an anchor is never rewritten; a reweight depends on the task's own weights
  assert transfer.retarget(cand, h, stock, "t-b", dataclasses.replace(stock, anchor=True),
                           b.user_text) is None
  halve = Candidate("rubric", "t-a", "c2", (RubricReweight("t-a", "c2", 2.0),),
                    "rubric:reweight")
  assert transfer.retarget(halve, h, stock, "t-b", stock, b.user_text) is None


def test_without_the_critic_offers_are_accepted_unmeasured():
  tasks = [anchored(t) for t in (A, B, C, D)]
  judge = program_judge()
  h = from_tasks(tasks)
  policy = fx.FakePolicy({t.prompt[0].content: RESPONSES[t] for t in (A, B, C, D)})
  groups = fx.record(tasks[:1], h, [RESPONSES[A]], judge)
  cfg = fx.settings(transfer_tasks=4)
  ev = Evolver(cfg, attributor=RuleAttributor(cfg), proposer=RuleProposer(cfg),
               critic=Critic(judge, cfg, num_samples=4, measure_effect=False), tasks=tasks)
  res = ev.step(h, groups, step=0, key=jax.random.key(0), resample=policy)
  assert [(r.task_id, r.verdict) for r in res.records] == [
      ("t-a", "accepted"), ("t-b", "accepted"), ("t-c", "accepted")]
  assert policy.calls == []   # nothing sampled
