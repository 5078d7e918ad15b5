"""Cold start: band and ladder statistics against NumPy, the end-to-end pass on
configs/tiny.py, the command line, and training reading the result."""

import json
import os
import subprocess
import sys

import jax
import numpy as np
import pytest

from harnessrl_jax.errors import ConfigError
from harnessrl_jax.evolver import Critic, build_evolver, read_calibration
from harnessrl_jax.evolver.calibration import (bands_and_ladder, null_measurement,
                                               unsaturated_share)
from harnessrl_jax.harness import SetLadder, apply, from_tasks
from harnessrl_jax.judges.client import TransportError
from harnessrl_jax.judges.grading import grade
from harnessrl_jax.judges.judge import Judge, JudgeError, JudgeSettings
from harnessrl_jax.judges.score_matrix import Unscored
from tests.evolver import test_evolver_fixtures as fx
from repo_paths import REPO



def test_bands_and_ladder_match_numpy():
  rng = np.random.default_rng(0)
  g = rng.uniform(0, 20, 40)
  r = rng.uniform(0, 5, 40)
  ranges = rng.uniform(10, 60, 40)
  shares = np.concatenate([rng.uniform(0.05, 0.95, 30), [0.0, 1.0, np.nan]])
  cal = bands_and_ladder(g, r, ranges, shares, min_band=1.0,
                         default_ladder=(1.0, 0.61, 0.38, 0.17))
  lo_g, lo_r, hi = np.percentile(g, 95), np.percentile(r, 95), np.median(ranges)
  assert cal.bands["guidance"] == pytest.approx((lo_g, hi), abs=1e-5)
  assert cal.bands["rubric"] == pytest.approx((lo_r, hi), abs=1e-5)
  u = shares[np.isfinite(shares) & (shares > 0) & (shares < 1)]
  assert cal.ladder == pytest.approx((1.0, np.percentile(u, 75), np.percentile(u, 50),
                                      np.percentile(u, 25)), abs=1e-5)
  assert cal.ladder_source == "measured over 30 tasks"


def test_degenerate_null_uses_the_floor_and_the_configured_ladder():
  cal = bands_and_ladder([0.0, 0.0], [0.0, 0.0], [0.0, 0.0], [1.0, 1.0], min_band=1.0,
                         default_ladder=(1.0, 0.61, 0.38, 0.17))
  assert cal.bands == {"guidance": (1.0, 1.0), "rubric": (1.0, 1.0)}
  assert cal.ladder == (1.0, 0.61, 0.38, 0.17) and cal.ladder_source.startswith("configured")
  with pytest.raises(ConfigError, match="no task produced a valid reward"):
    bands_and_ladder([], [], [], [], min_band=1.0, default_ladder=(1.0, 0.5))


def test_unsaturated_share_by_hand():
  w = np.array([60.0, 30.0, 10.0, -5.0])
  sat = np.array([[1, 1, 1], [1, 0, 1], [1, -1, 1], [0, 0, 0]])
  # c1 and c3 saturated (unscored cells ignored); c2 not; penalties carry no positive weight.
  assert unsaturated_share(w, sat) == pytest.approx(30.0 / 100.0)


def tiny_config():
  from configs.tiny import get_config  # pylint: disable=g-import-not-at-top
  c = get_config()
  c.judge.backend = "program"
  c.judge.max_unscored_share = 1.0   # criteria without a check stay unscored
  c.rollout.max_new_tokens = 8
  c.rollout.prompt_buckets = (512, 1024)
  return c


def test_calibrate_end_to_end_on_tiny(tmp_path):
  from harnessrl_jax.calibrate import run_calibration  # pylint: disable=g-import-not-at-top
  cal, path = run_calibration(tiny_config(), str(tmp_path), tasks=2)
  assert path == str(tmp_path / "calibration.json")
  obj = json.loads(open(path, encoding="utf-8").read())
  assert obj["format"] == "harnessrl_jax.calibration/1"
  rows = obj["per_task"]
  assert len(rows) == 2
  g = [abs(t["reward_b"] - t["reward_a"]) * 100 for t in rows]
  ranges = [t["range_points"] for t in rows]
  assert obj["stats"]["guidance_null_p95"] == pytest.approx(np.percentile(g, 95), abs=1e-4)
  assert obj["stats"]["median_range"] == pytest.approx(np.median(ranges), abs=1e-4)
  # The program judge is deterministic: regrading changes nothing, the floor applies.
  assert all(t["reward_regrade"] == t["reward_a"] for t in rows)
  assert obj["bands"]["rubric"][0] == 1.0
  # Every judged batch records its cells without a verdict (none: the program judge
  # does not try the criteria it has no check for).
  assert set(obj["unscored"]) == {"group_a", "group_b", "regrade"}
  assert all(u["count"] == 0 and u["causes"] == {} for u in obj["unscored"].values())
  back = read_calibration(str(tmp_path))
  assert back.bands == cal.bands and back.ladder == cal.ladder
  assert back.unscored == cal.unscored
  # Training reads it: the critic's bands and the harness ladder.
  config = tiny_config()
  with config.unlocked():
    config.evolver = fx.config(calibration_path=str(tmp_path))
  ev = build_evolver(config, judge=None)
  assert ev.critic.bands == back.bands and ev.critic.j == config.rollout.num_samples
  # A run whose critic re-samples another number of answers than the band was measured
  # with is refused, naming the file and the fields.
  with config.unlocked():
    config.evolver.resample_j = config.rollout.num_samples + 1
  with pytest.raises(ConfigError, match=r"calibration\.json|resample_j") as err:
    build_evolver(config, judge=None)
  assert str(tmp_path) in str(err.value) and "evolver.resample_j" in str(err.value)
  assert Critic(None, fx.settings()).bands == {"guidance": (10.2, 28.0),
                                                   "rubric": (3.1, 28.0)}
  h = apply(from_tasks([fx.BLIND]), SetLadder(back.ladder))
  assert tuple(np.asarray(h.ladder).tolist()) == pytest.approx(back.ladder)


def test_null_group_b_is_the_critics_resample_size():
  """The guidance null compares a re-sample of evolver.resample_j answers with the recorded
  group of J, as the critic's guidance measurement does (a smaller re-sample is noisier)."""
  h = from_tasks([fx.SPURIOUS])
  judge = Judge(fx.FakeJudgeClient(), use_checks=True,
                settings=JudgeSettings(max_unscored_share=1.0))
  kw = dict(min_band=0.0, default_ladder=(1.0, 0.61, 0.38, 0.17))
  policy = fx.FakePolicy(fx.PROMPTS)   # deterministic: the first n canned responses
  same = null_measurement([fx.SPURIOUS], h, policy, judge, jax.random.key(0), 4, **kw)
  half = null_measurement([fx.SPURIOUS], h, policy, judge, jax.random.key(0), 4,
                          resample_samples=2, **kw)
  a = grade(judge, [fx.SPURIOUS], [list(fx.SPURIOUS_RESPONSES[:4])],
            [h.criteria(fx.SPURIOUS.id)]).rewards[0]
  assert same.per_task[0]["reward_b"] == same.per_task[0]["reward_a"]
  assert half.per_task[0]["reward_a"] == pytest.approx(float(np.mean(a[:4])), abs=1e-6)
  assert half.per_task[0]["reward_b"] == pytest.approx(float(np.mean(a[:2])), abs=1e-6)
  assert half.per_task[0]["reward_b"] != half.per_task[0]["reward_a"]
  assert (half.stats["group_a_samples"], half.stats["group_b_samples"]) == (4, 2)
  assert same.stats["group_b_samples"] == 4


class _DownOnStockPhrases(fx.FakeJudgeClient):
  """The fake judge, failing (transport) on responses that carry a stock phrase."""

  def _complete(self, chats, max_tokens):
    answers = super()._complete(chats, max_tokens)
    return [TransportError("down") if "requirements" in c[-1].content else a
            for c, a in zip(chats, answers)]


def test_calibration_records_and_limits_the_judge_failures_of_each_batch():
  h = from_tasks([fx.SPURIOUS])
  policy = fx.FakePolicy(fx.PROMPTS)
  args = ([fx.SPURIOUS], h, policy)
  kw = dict(min_band=1.0, default_ladder=(1.0, 0.61, 0.38, 0.17))
  lenient = Judge(_DownOnStockPhrases(), use_checks=True,
                  settings=JudgeSettings(max_unscored_share=1.0))
  cal = null_measurement(*args, lenient, jax.random.key(0), 4, **kw)
  # c2 (no check) of the two stock-phrase responses: 2 of the 4 LLM-judged cells per batch
  # (c1 has a check: judged, never lost).
  want = Unscored(8, (("transport", 2),))
  assert cal.unscored == {"group_a": want, "group_b": want, "regrade": want}
  assert cal.to_json()["unscored"]["regrade"] == {"count": 2, "share": 0.25, "cells": 8,
                                                  "causes": {"transport": 2}}
  strict = Judge(_DownOnStockPhrases(), use_checks=True,
                 settings=JudgeSettings(max_unscored_share=0.1))
  with pytest.raises(JudgeError, match=r"^calibration, tasks 1-1: judge program\+fake-judge"
                                       r".*2 of 8 judged cells \(25%\).*transport: 2"):
    null_measurement(*args, strict, jax.random.key(0), 4, **kw)


def test_calibrate_command_line(tmp_path):
  env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS="")
  base = [sys.executable, "-m", "harnessrl_jax.calibrate", "--config=configs/tiny.py",
          f"--workdir={tmp_path}"]
  bad = subprocess.run(base + ["--config.judge.nonsense=1"], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=300)
  assert bad.returncode == 2 and "unknown field" in bad.stderr
  ok = subprocess.run(base + ["--tasks=1", "--config.judge.backend=program",
                              "--config.judge.max_unscored_share=1.0",
                              "--config.rollout.max_new_tokens=4",
                              "--config.rollout.num_samples=2"],
                      cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
  assert ok.returncode == 0, ok.stderr[-2000:]
  assert ok.stdout.strip().endswith("calibration.json")
  assert len(read_calibration(str(tmp_path)).per_task) == 1


def test_missing_calibration_is_a_config_error(tmp_path):
  with pytest.raises(ConfigError, match="run `python -m harnessrl_jax.calibrate`"):
    read_calibration(str(tmp_path))
