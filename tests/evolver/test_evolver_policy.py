"""The critic's guidance re-sample through the real rollout sampler (random tiny model):
the measurement equals an independent recomputation, and same keys give the same H."""

import jax
import pytest
from flax import nnx

from harnessrl_jax.config import base_config
from harnessrl_jax.data.frozen import FrozenMap
from harnessrl_jax.data.schema import Check, Criterion, Message, Task
from harnessrl_jax.evolver import Critic, Evolver, RuleAttributor, RuleProposer
from harnessrl_jax.evolver.critic import mean_reward
from harnessrl_jax.evolver.measure import sample_groups
from harnessrl_jax.judges.grading import grade
from harnessrl_jax.harness import from_tasks, render_prompt
from harnessrl_jax.harness.ops import apply_all
from harnessrl_jax.models.loading import load_model
from harnessrl_jax.rollout import SamplingParams
from harnessrl_jax.rollout.texts import TextSampler
from tests.evolver import test_evolver_fixtures as fx

J = 4
TASK = Task("t-tiny", "science", (Message("user", "Describe the water cycle."),), (
    # Random bytes hit a lowercase vowel now and then: a criterion with mixed outcomes.
    Criterion("c1", "Uses a vowel", 8.0, check=Check("regex_match",
                                                     FrozenMap({"pattern": "[aeiou]"}))),
    Criterion("c2", "Mentions condensation", 2.0, check=Check(
        "keyword_present", FrozenMap({"keywords": ["condensation"], "mode": "any"}))),
))


@pytest.fixture(scope="module")
def sampler():
  cfg = base_config()
  cfg.model.source = "tiny"
  cfg.rollout.max_new_tokens = 12
  cfg.rollout.prompt_buckets = (64, 512)
  loaded = load_model(cfg.model)
  graphdef, params = nnx.split(loaded.model)
  texts = TextSampler.from_config(graphdef, loaded.prompt_builder, cfg.rollout)
  return texts.resample_fn(params, SamplingParams.from_config(cfg.rollout))


def evolve(sampler, key):
  cfg = fx.settings()
  h = from_tasks([TASK])
  judge = fx.judge(with_llm=False)
  groups, _ = sample_groups([TASK], h, sampler, judge, jax.random.key(7), J)
  ev = Evolver(cfg, attributor=RuleAttributor(cfg), proposer=RuleProposer(cfg),
               critic=Critic(judge, cfg, num_samples=J))
  return h, groups, ev.step(h, groups, step=0, key=jax.random.key(key),
                            memory=fx.new_memory(h), resample=sampler)


def test_guidance_measured_on_the_tiny_policy(sampler):
  h, (group,), res = evolve(sampler, key=3)
  assert len(group.responses) == J and all(isinstance(r, str) for r in group.responses)
  att = {lab.criterion_id: lab for lab in res.attributions[0].labels}
  assert att["c2"].label == "blind" and att["c2"].route == "guidance"
  guided = [r for r in res.records if r.route == "guidance" and r.candidate is not None]
  assert guided, res.records
  first = guided[0]
  assert first.candidate.kind == "guidance:criterion"
  assert first.measurement.rollouts == J
  # Recompute round 0 by hand: same folded key, same rendered prompt, same judge.
  new = apply_all(h, first.candidate.ops)
  prompt = render_prompt(TASK, new, training=True)
  assert "<criterion>" in prompt[-1].content
  k = jax.random.fold_in(jax.random.fold_in(jax.random.fold_in(jax.random.key(3), 0),
                                            1), 0)  # task 0, route "guidance", round 0
  (responses,) = sampler([prompt], k, J)
  r_new = grade(fx.judge(with_llm=False), [TASK], [responses],
                [new.criteria(TASK.id)]).mean_reward(0)
  r_old = mean_reward(group.criteria, group.scores, group.scored)
  assert first.measurement.r_new == pytest.approx(r_new, abs=1e-6)
  # The re-sampled answers are kept, in the record and its log line.
  assert first.measurement.responses == tuple(responses)
  assert first.to_json()["measurement"]["responses"] == list(responses)
  assert first.measurement.delta == pytest.approx((r_new - r_old) * 100, abs=1e-3)
  # The verdict follows the band alone here (no structural problem, no history).
  assert first.measurement.accepted is (10.2 <= first.measurement.delta <= 28.0)
  assert first.verdict == ("accepted" if first.measurement.accepted else "rejected")


def test_same_key_same_next_harness_on_the_tiny_policy(sampler):
  _, _, a = evolve(sampler, key=3)
  _, _, b = evolve(sampler, key=3)
  assert a.digest == b.digest
  assert [r.to_json() for r in a.records] == [r.to_json() for r in b.records]
  assert a.accounting["critic"]["rollouts"] == J * sum(
      1 for r in a.records if r.route == "guidance" and r.candidate is not None)


def test_prefetched_resamples_give_the_same_step_on_the_tiny_policy(sampler):
  """Three tasks, each with a guidance candidate: drawn ahead in one call
  (evolver.prefetch_resamples, the default) or one call per candidate, the step is the
  same, through the real rollout sampler."""
  tasks = [Task(f"t-{w}", "science", (Message("user", f"Describe the {w}."),), TASK.criteria)
           for w in ("water cycle", "moon", "tides")]
  h = from_tasks(tasks)
  judge = fx.judge(with_llm=False)
  groups, _ = sample_groups(tasks, h, sampler, judge, jax.random.key(7), J)
  calls = []

  def counted(chats, key, num_samples):
    calls.append(len(chats))
    return sampler(chats, key, num_samples)

  out = {}
  for prefetch in (False, True):
    cfg = fx.settings(prefetch_resamples=prefetch)
    ev = Evolver(cfg, attributor=RuleAttributor(cfg), proposer=RuleProposer(cfg),
                 critic=Critic(judge, cfg, num_samples=J))
    assert ev.prefetch is prefetch
    calls.clear()
    res = ev.step(h, groups, step=0, key=jax.random.key(3), memory=fx.new_memory(h),
                  resample=counted)
    out[prefetch] = res, list(calls)
  (seq, seq_calls), (pre, pre_calls) = out[False], out[True]
  rounds = [r.round for r in seq.records if r.route == "guidance" and r.candidate is not None]
  # Round 0 of each task is drawn ahead; a later round follows its predecessor's verdict.
  assert rounds.count(0) == 3 and seq_calls == [1] * len(rounds)
  assert pre_calls == [3] + [1] * (len(rounds) - 3)   # one per task: no filler here
  assert pre.digest == seq.digest
  assert [r.to_json() for r in pre.records] == [r.to_json() for r in seq.records]
