"""Properties of the rule attributor and the evolver step on random groups: labels follow
their definitions, evidence is quoted verbatim, and every step leaves a valid harness
whose history matches the accepted candidates."""

import jax
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from harnessrl_jax.data.reward import rubric_reward
from harnessrl_jax.data.schema import Criterion, Message, Task
from harnessrl_jax.evolver import Critic, Evolver, Group, RuleAttributor, RuleProposer
from harnessrl_jax.evolver.critic import mean_reward
from harnessrl_jax.harness import digest, from_tasks, invariant_problems
from harnessrl_jax.memory import make_draw
from tests.evolver import test_evolver_fixtures as fx

SENTENCES = ("Rain falls from clouds.", "All requirements met.", "Great question!",
             "Evaporation lifts water.", "This is filler text that goes on.",
             "Condensation forms clouds.", "I hope this helps.")


@st.composite
def scenario(draw):
  k = draw(st.integers(1, 4))
  j = draw(st.integers(2, 6))
  weights = draw(st.lists(st.sampled_from([-3.0, 1.0, 2.0, 5.0]), min_size=k, max_size=k))
  if not any(w > 0 for w in weights):
    weights[0] = 4.0
  scores = np.array(draw(st.lists(st.lists(st.integers(0, 1), min_size=j, max_size=j),
                                  min_size=k, max_size=k)), np.float32)
  # Mostly scored; now and then a cell without a verdict.
  scored = np.array(draw(st.lists(st.lists(st.sampled_from([True] * 5 + [False]),
                                           min_size=j, max_size=j), min_size=k, max_size=k)))
  responses = [" ".join(draw(st.lists(st.sampled_from(SENTENCES), min_size=1, max_size=4)))
               for _ in range(j)]
  history = draw(st.lists(st.lists(st.integers(0, 1), min_size=k, max_size=k), max_size=2))
  return weights, scores, scored, responses, history


def build(weights, scores, scored, responses):
  task = Task("t", "science", (Message("user", "Describe the water cycle."),),
              tuple(Criterion(f"c{i}", f"Criterion number {i}", w, anchor=i == 0)
                    for i, w in enumerate(weights)))
  h = from_tasks([task])
  crit = h.criteria("t")
  w = np.array([[c.weight for c in crit]], np.float32)
  r = rubric_reward(scores[None], scored[None], w, np.ones_like(w, bool))
  return task, h, Group(task, crit, tuple(responses), scores, scored,
                        np.asarray(r.reward[0], np.float64))


@settings(max_examples=40, deadline=None)
@given(scenario())
def test_rule_labels_follow_their_definitions(case):
  weights, scores, scored, responses, history = case
  _, h, g = build(weights, scores, scored, responses)
  mem = fx.new_memory(h)
  for step, row in enumerate(history):
    sat_prev = np.repeat(np.array(row)[:, None], len(responses), 1)
    # stored as judge scores: a penalty is "satisfied" when NOT met
    raw = np.where(np.array(weights)[:, None] < 0, 1 - sat_prev, sat_prev)
    mem.add_draw(make_draw("t", step, [c.id for c in g.criteria],
                           [c.weight for c in g.criteria], raw, np.ones_like(raw, bool),
                           g.rewards))
  att, cost = RuleAttributor(fx.settings()).attribute(g, h, mem, step=len(history))
  assert cost.llm_requests == 0
  assert [lab.criterion_id for lab in att.labels] == [c.id for c in g.criteria]
  sat = g.satisfied()
  for k, lab in enumerate(att.labels):
    assert 0.0 <= lab.confidence <= 1.0
    n, n_sat = int((sat[k] >= 0).sum()), int((sat[k] == 1).sum())
    reached_before = any(row[k] for row in history)
    if n == 0:
      assert lab.label == "agree" and lab.confidence == 0.0
    elif n_sat == 0:
      assert lab.label == ("agree" if reached_before else "blind")
    elif n_sat == n:
      assert lab.label == "saturated"
    else:
      assert lab.label in ("spurious", "agree")
    for e in lab.evidence:
      assert any(e in r for r in responses)


@settings(max_examples=25, deadline=None)
@given(scenario())
def test_evolver_step_keeps_a_valid_harness_and_a_matching_history(case):
  weights, scores, scored, responses, _ = case
  _, h, g = build(weights, scores, scored, responses)
  cfg = fx.settings()
  policy = lambda prompts, key, n: [list(responses)[:n] for _ in prompts]
  ev = Evolver(cfg, attributor=RuleAttributor(cfg), proposer=RuleProposer(cfg),
               critic=Critic(fx.judge(), cfg, num_samples=len(responses)))
  res = ev.step(h, [g], step=0, key=jax.random.key(0), memory=fx.new_memory(h),
                resample=policy)
  assert invariant_problems(res.harness) == []
  assert res.digest == digest(res.harness)
  accepted = [r for r in res.records if r.verdict == "accepted"]
  assert len(res.history) == sum(len(r.candidate.ops) for r in accepted)
  for r in accepted:
    lo_hi = r.measurement.band
    assert r.measurement.delta > 0
    assert lo_hi is None or lo_hi[0] <= r.measurement.delta <= lo_hi[1]
  routes = [r.route for r in res.records if r.verdict in ("accepted", "noop")]
  assert len(routes) == len(set(routes))   # each loop ends once
  for r in res.records:
    if r.route == "rubric" and r.measurement is not None and r.measurement.r_old is not None:
      assert r.measurement.r_old == np.float64(mean_reward(g.criteria, g.scores, g.scored))
