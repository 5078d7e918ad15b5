"""`build_evolver`: roles built once from the typed config, shaped by config.ablation
(no attribute swapping), the step's policy passed per call, and per-step accounting
summed from the costs each role returns."""

import dataclasses

import jax
import pytest

from harnessrl_jax.config import base_config, validate
from harnessrl_jax.errors import ConfigError, HarnessError
from harnessrl_jax.evolver import (AblationConfig, EvolverConfig, build_evolver,
                                   evolver_defaults)
from harnessrl_jax.harness import digest, from_tasks
from tests.evolver import test_evolver_fixtures as fx


def tree(**ablation):
  c = base_config()
  c.rollout.num_samples = 4
  for k, v in ablation.items():
    setattr(c.ablation, k, v)
  return c


def recorded(tasks, responses):
  h = from_tasks(tasks)
  j = fx.judge()
  return h, j, fx.record(tasks, h, responses, j)


def test_no_critic_accepts_structurally_valid_candidates_unmeasured():
  h, j, groups = recorded([fx.BLIND], [fx.BLIND_RESPONSES])
  policy = fx.FakePolicy(fx.PROMPTS, follows=False)   # guidance would not raise reward
  full = build_evolver(tree(), judge=j).step(h, groups, step=0, key=jax.random.key(0),
                                             resample=policy)
  assert [r.verdict for r in full.records] == ["rejected", "rejected", "noop"]
  calls = len(policy.calls)
  ev = build_evolver(tree(critic=False), judge=j)
  before = dict(vars(ev.critic))
  res = ev.step(h, groups, step=0, key=jax.random.key(0), resample=policy)
  (rec,) = res.records
  assert rec.verdict == "accepted" and rec.candidate.kind == "guidance:criterion"
  assert rec.measurement.delta == 0.0 and rec.measurement.band is None
  assert len(policy.calls) == calls             # the policy was never queried
  assert res.accounting["critic"] == {"calls": 1, "llm_requests": 0, "judge_cells": 0,
                                      "rollouts": 0,
                                      "wall_s": res.accounting["critic"]["wall_s"],
                                      "unscored": {"count": 0, "share": 0.0, "cells": 0,
                                                   "causes": {}}}
  assert vars(ev.critic) == before and not hasattr(ev.critic, "resample")


def test_routes_ablation_proposes_only_on_the_kept_routes():
  tasks = [fx.BLIND, fx.SATURATED, fx.SPURIOUS]
  h, j, groups = recorded(tasks, [fx.BLIND_RESPONSES, fx.SATURATED_RESPONSES,
                                  fx.SPURIOUS_RESPONSES])
  policy = fx.FakePolicy(fx.PROMPTS)
  ev = build_evolver(tree(routes=("rubric",)), judge=j)
  assert ev.proposer.routes == {"rubric"}
  res = ev.step(h, groups, step=0, key=jax.random.key(0), memory=fx.new_memory(h),
                resample=policy)
  by_route = {}
  for r in res.records:
    by_route.setdefault(r.route, []).append(r.verdict)
  assert by_route == {"guidance": ["noop"], "sampling": ["noop"], "rubric": ["accepted"]}
  assert all(r.note.startswith("no candidate accepted after 0") for r in res.records
             if r.route != "rubric")
  assert policy.calls == [] and res.harness.guidance("t-blind") == ()
  assert res.harness.level("t-sat") == 0


def test_unknown_route_or_backend_is_a_config_error_at_the_boundary():
  with pytest.raises(ConfigError, match="config.ablation.routes"):
    build_evolver(tree(routes=("rubric", "memory")), judge=None)
  ev = evolver_defaults()
  ev.proposer = "gpt"
  with pytest.raises(ConfigError, match="config.evolver.proposer = 'gpt'"):
    EvolverConfig.from_config(ev)
  ev = evolver_defaults()
  ev.guidance_band = (5.0, 1.0)
  with pytest.raises(ConfigError, match="config.evolver.guidance_band"):
    EvolverConfig.from_config(ev)
  assert EvolverConfig.from_config(evolver_defaults()).max_unscored_share == 0.1
  c = base_config()
  c.evolver.max_unscored_share = 1.5
  with pytest.raises(ConfigError, match=r"^config.evolver.max_unscored_share = 1.5: must be "
                                        r"in \[0, 1\]"):
    validate(c)
  ab = AblationConfig.from_config(base_config().ablation)
  assert ab.routes == ("rubric", "guidance", "sampling") and ab.critic and ab.memory
  with pytest.raises(dataclasses.FrozenInstanceError):
    ab.critic = False


def test_guidance_without_the_steps_policy_is_refused():
  h, j, groups = recorded([fx.BLIND], [fx.BLIND_RESPONSES])
  ev = build_evolver(tree(), judge=j)
  with pytest.raises(HarnessError, match="resample"):
    ev.step(h, groups, step=0, key=jax.random.key(0))


def test_each_step_reports_its_own_costs():
  h, j, groups = recorded([fx.BLIND], [fx.BLIND_RESPONSES])
  c = tree()
  c.evolver.attributor = "llm"
  good = ('{"labels": [{"criterion_id": "c1", "label": "agree", "confidence": 0.7, '
          '"evidence": [], "wording": ""}, {"criterion_id": "c2", "label": "blind", '
          '"confidence": 0.9, "evidence": [], "wording": ""}]}')
  client = fx.ScriptedClient([good, good])
  ev = build_evolver(c, judge=j, client=client)
  policy = fx.FakePolicy(fx.PROMPTS)
  runs = [ev.step(h, groups, step=s, key=jax.random.key(0), resample=policy)
          for s in range(2)]
  assert runs[0].digest == runs[1].digest != digest(h)
  for res in runs:   # the same work twice: the same costs, not a running total
    acc = res.accounting
    assert acc["attributor"]["calls"] == 1 and acc["attributor"]["llm_requests"] == 1
    assert acc["proposer"]["calls"] == 1 and acc["proposer"]["llm_requests"] == 0
    assert (acc["critic"]["calls"], acc["critic"]["rollouts"],
            acc["critic"]["judge_cells"]) == (1, 4, 8)
