"""Oracle agreement and failure classes on hand-built groups with a scripted oracle whose
answers are known; paired bootstrap and permutation test on synthetic data."""

from __future__ import annotations

import itertools
import json
import math
import re

import numpy as np
import pytest

from harnessrl_jax.data.loader import parse_task
from harnessrl_jax.data.schema import Message
from harnessrl_jax.errors import DataError
from harnessrl_jax.eval import oracle, stats
from harnessrl_jax.judges.client import TextClient

_FENCE = re.compile(r"<<<BEGIN RESPONSE ([AB]) \w+>>>\n(.*?)\n<<<END", re.S)


class ScriptedOracle(TextClient):
  """Prefers the response of higher `quality`; "biased" pairs answer A in both orders,
  "garbage" pairs give an unreadable answer."""

  identity = "scripted-oracle"

  def __init__(self, quality, biased=(), garbage=()):
    self.quality, self.biased, self.garbage = quality, set(biased), set(garbage)
    self.seen = []

  def _complete(self, chats, max_tokens):
    out = []
    for chat in chats:
      texts = dict(_FENCE.findall(chat[-1].content))
      a, b = texts["A"], texts["B"]
      self.seen.append((a, b))
      if frozenset((a, b)) in self.garbage:
        out.append("I refuse to choose.")
      elif frozenset((a, b)) in self.biased:
        out.append("Both fine.\nVerdict: A")
      else:
        qa, qb = self.quality[a], self.quality[b]
        out.append("Verdict: " + ("A" if qa > qb else "B" if qb > qa else "tie"))
    return out


def _group(step, names, rewards):
  return oracle.Group(step, f"t{step}", (Message("user", "question"),), tuple(names),
                      tuple(rewards))


def test_failure_classes_on_hand_built_groups():
  # Step 0, J = 5: rewards vs oracle quality; expected class of each of the 10 pairs:
  # (0,1) tie at 0.2 -> blind; (2,4) tie at 0.8 -> saturated; (2,3) oracle tie (position
  # biased: "A" both orders) -> spurious_unordered; (0,4), (1,4), (3,4): reward prefers r4,
  # the oracle the other -> spurious_reversed; (0,2), (0,3), (1,2), (1,3) -> agree.
  g0 = _group(0, ["r0", "r1", "r2", "r3", "r4"], [0.2, 0.2, 0.8, 0.5, 0.8])
  # Step 1: (0,1) agree; pairs with the invalid r2 and the unreadable pair are unjudged.
  g1 = _group(1, ["x0", "x1", "x2"], [0.0, 1.0, float("nan")])
  g2 = _group(1, ["y0", "y1"], [1.0, 0.0])
  quality = {"r0": 1, "r1": 2, "r2": 3, "r3": 3, "r4": 0.5, "x0": 1, "x1": 2, "x2": 0,
             "y0": 1, "y1": 0}
  client = ScriptedOracle(quality, biased=[frozenset(("r2", "r3"))],
                          garbage=[frozenset(("y0", "y1"))])
  out = oracle.analyze([g0, g1, g2], client)
  # Both orders of every pair were asked: 10 + 3 + 1 pairs, twice each.
  assert len(client.seen) == 28
  assert {(a, b) for a, b in client.seen} >= {("r0", "r4"), ("r4", "r0")}
  step0, step1 = out["by_step"]
  assert step0["pairs"] == 10 and step0["unjudged"] == 0
  assert step0["blind"] == pytest.approx(0.1)
  assert step0["saturated"] == pytest.approx(0.1)
  assert step0["spurious_unordered"] == pytest.approx(0.1)
  assert step0["spurious_reversed"] == pytest.approx(0.3)
  assert step0["agree"] == step0["agreement"] == pytest.approx(0.4)
  assert step1["pairs"] == 1 and step1["unjudged"] == 3 and step1["agree"] == 1.0
  assert out["overall"]["agreement"] == pytest.approx(5 / 11)
  assert sum(out["overall"][k] for k in oracle.CLASSES) == pytest.approx(1.0)


def test_group_of_eight_asks_56_requests():
  names = [f"s{i}" for i in range(8)]
  client = ScriptedOracle({n: i for i, n in enumerate(names)})
  rewards = np.linspace(0, 1, 8)[::-1]        # reward order is the reverse of quality
  out = oracle.analyze([_group(3, names, rewards)], client)
  assert len(oracle.pairs(8)) == 28 and len(client.seen) == 56
  assert out["overall"]["spurious_reversed"] == 1.0 and out["overall"]["pairs"] == 28


@pytest.mark.parametrize("text,expected", [
    ("Verdict: A", 1), ("reasoning...\nVerdict: **B**", -1), ("VERDICT: Tie", 0),
    ("Verdict: A\nOn reflection, Verdict: B", -1), ("B", -1), ("no idea", None), ("", None)])
def test_parse_preference(text, expected):
  assert oracle.parse_preference(text) == expected


def test_read_groups_offline(tmp_path):
  task = {"id": "t9", "domain": "medical", "prompt": "q?",
          "criteria": [{"id": "c0", "text": "a", "weight": 3.0},
                       {"id": "c1", "text": "b", "weight": 1.0}]}
  rows = [{"step": 4, "task": task, "responses": ["u", "v"],
           "scores": [[1, None], [0, 1]]},
          {"step": 5, "prompt": [{"role": "user", "content": "q"}], "responses": ["u", "v"],
           "rewards": [0.5, None]},
          {"step": 6, "prompt": "q", "responses": ["u", "v"], "scores": [[1, 0]],
           "weights": [2.0]}]
  path = tmp_path / "groups.jsonl"
  path.write_text("".join(json.dumps(r) + "\n" for r in rows))
  g = oracle.read_groups(str(path))
  # scores[k][j]: c0 = [1, None], c1 = [0, 1] -> u: (3*1 + 1*0)/(3+1) = 0.75; v: c0
  # unscored, so only c1 counts: 1*1/1 = 1.
  assert g[0].rewards == pytest.approx((0.75, 1.0)) and g[0].task_id == "t9"
  assert g[1].rewards[0] == 0.5 and math.isnan(g[1].rewards[1])
  assert g[2].rewards == (1.0, 0.0) and g[2].prompt == (Message("user", "q"),)
  with open(path, "a") as f:   # what a driver writes with group_record reads back
    f.write(json.dumps(oracle.group_record(7, parse_task(task, where="x"), ["p", "q"],
                                           [0.25, float("nan")])) + "\n")
  g = oracle.read_groups(str(path))
  assert g[3].step == 7 and g[3].task_id == "t9" and g[3].rewards[0] == 0.25
  assert math.isnan(g[3].rewards[1]) and g[3].prompt == (Message("user", "q?"),)
  path.write_text(json.dumps({"prompt": "q", "responses": ["a", "b"]}) + "\nnot json\n")
  with pytest.raises(DataError, match=r"groups.jsonl:1: needs \"rewards\"[\s\S]*:2: not JSON"):
    oracle.read_groups(str(path))


def test_bootstrap_known_difference():
  rng = np.random.default_rng(0)
  b = rng.normal(0.5, 1.0, 400)
  a = b + 0.3 + rng.normal(0.0, 0.5, 400)
  ci = stats.paired_bootstrap(a, b, seed=1, num_resamples=4000)
  d = a - b
  assert ci.difference == pytest.approx(d.mean())
  half = 1.96 * d.std(ddof=1) / np.sqrt(d.size)           # normal-theory half width
  assert ci.low == pytest.approx(d.mean() - half, abs=0.15 * half)
  assert ci.high == pytest.approx(d.mean() + half, abs=0.15 * half)
  assert ci.low < 0.3 < ci.high and ci.low > 0
  assert stats.permutation_test(a, b, seed=2, num_permutations=2000) == pytest.approx(1 / 2001)
  assert stats.paired_bootstrap(a, b, seed=1, num_resamples=4000) == ci   # seeded


def test_bootstrap_interval_matches_scipy():
  # One level of items: the same percentile interval as scipy.stats.bootstrap, to within
  # the Monte Carlo error of 20,000 resamples each (the nested seeds-then-tasks version has
  # no scipy counterpart, which is why stats.py keeps its own).
  from scipy import stats as scipy_stats  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(3)
  a, b = rng.normal(1.0, 2.0, 40), rng.normal(0.5, 2.0, 40)
  ours = stats.paired_bootstrap(a, b, seed=0, num_resamples=20_000)
  theirs = scipy_stats.bootstrap((a - b,), np.mean, n_resamples=20_000, method="percentile",
                                 confidence_level=0.95, random_state=1).confidence_interval
  se = (a - b).std(ddof=1) / np.sqrt(a.size)
  assert abs(ours.low - theirs.low) < 0.1 * se and abs(ours.high - theirs.high) < 0.1 * se


def test_null_case_calibrated():
  rng = np.random.default_rng(5)
  rejections, covered = 0, 0
  for _ in range(200):
    a, b = rng.normal(size=40), rng.normal(size=40)
    rejections += stats.permutation_test(a, b, seed=int(rng.integers(1 << 30)),
                                         num_permutations=200) <= 0.05
  for _ in range(100):
    a, b = rng.normal(size=40), rng.normal(size=40)
    ci = stats.paired_bootstrap(a, b, seed=int(rng.integers(1 << 30)), num_resamples=400)
    covered += ci.low <= 0.0 <= ci.high
  assert 2 <= rejections <= 20       # ~5% of 200
  assert 85 <= covered <= 100        # ~95% of 100 (percentile intervals run a bit short)


def test_permutation_matches_exact_enumeration():
  a = np.array([1.0, 0.2, 0.9, 0.4, 0.8, 0.7])
  b = np.array([0.5, 0.4, 0.1, 0.5, 0.2, 0.3])
  d = a - b
  flips = np.array(list(itertools.product([-1, 1], repeat=d.size)))
  exact = np.mean(np.abs((flips * d).mean(axis=1)) >= abs(d.mean()) - 1e-12)
  p = stats.permutation_test(a, b, seed=0, num_permutations=20000)
  assert p == pytest.approx(exact, abs=0.01)


def test_item_and_seed_bootstrap():
  rng = np.random.default_rng(3)
  b = rng.normal(size=(100, 3))
  a = b + np.array([0.0, 0.5, 1.0])     # the gap depends on the seed: mean 0.5
  ci = stats.paired_bootstrap(a, b, seed=0, num_resamples=2000)
  assert ci.difference == pytest.approx(0.5)
  assert ci.low < 0.5 < ci.high and ci.high - ci.low > 0.3   # seed resampling widens it
  with pytest.raises(Exception, match="equal shapes"):
    stats.paired_bootstrap(a, b[:, :2], seed=0)
