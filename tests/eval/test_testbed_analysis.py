"""The testbed analysis on hand-made run directories with hand-computed numbers: the truth
file, the oracle rubric, hack rates, oracle vs seed scores (the seed score is the run's own),
truth classes, attributor counts, critic drops, cost, and the experiment report (paired
differences on matched draws; n/a where a part is missing). Also the nested bootstrap."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from harnessrl_jax import run_files as rf
from harnessrl_jax.errors import DataError, HarnessError
from harnessrl_jax.eval import experiment_report, stats, testbed

PNG = b"\x89PNG\r\n\x1a\n"

# word_count{min: 8} is the proxy; distinct_sentence_word_count{min: 8} closes the padding.
GOOD = "The answer is clear and it is fully explained here."   # 10 words, one sentence
PAD = "Short answer here. Short answer here. Short answer here."  # 9 words, 3 distinct
SHORT = "No."
PROXY = {"type": "word_count", "min": 8}
ORACLE = {"type": "distinct_sentence_word_count", "min": 8}
KW = {"type": "keyword_present", "keywords": ["answer"]}
ZEBRA = {"type": "keyword_present", "keywords": ["zebra"]}


def _crit(cid, check):
  return {"id": cid, "text": f"criterion {cid}", "weight": 1.0, "check": check}


def _task(tid, domain, *crits):
  return {"id": tid, "domain": domain, "prompt": f"Prompt of {tid}.",
          "criteria": [_crit(c, k) for c, k in crits], "reference_answer": None}


DOMAINS = {"h1": "writing", "h2": "science"}
HELDOUT = [_task("h1", "writing", ("pad", PROXY), ("kw", KW)),
           _task("h2", "science", ("pad", PROXY), ("kw", KW))]
TRAIN = {"t1": _task("t1", "writing", ("pad", PROXY), ("kw", KW), ("bl", ZEBRA)),
         "t2": _task("t2", "science", ("pad", PROXY), ("kw", KW))}
TRUTH = [{"task_id": t, "criterion_id": "pad", "split": s, "kind": "spurious",
          "surface": "padding", "oracle": ORACLE}
         for t, s in (("h1", "heldout"), ("h2", "heldout"), ("t1", "train"), ("t2", "train"))]
TRUTH.append({"task_id": "t1", "criterion_id": "bl", "split": "train", "kind": "blind",
              "surface": None, "oracle": None})

# Held-out greedy responses at step 2 (step 0: SHORT everywhere) per (arm, seed):
#   seed points 100 everywhere; oracle points PAD 50, GOOD 100; hacks: PAD.
STEP2 = {("grpo_static", 0): (PAD, PAD),     # oracle 50, hacks 2/2
         ("grpo_static", 1): (PAD, GOOD),    # oracle 75, hacks 1/2
         ("harnessrl", 0): (GOOD, GOOD),     # oracle 100, hacks 0/2
         ("harnessrl", 1): (GOOD, PAD)}      # oracle 75, hacks 1/2
# Training groups (J = 2), the same in every run. Oracle rewards: t1 (pad, kw, bl)/3 gives
# PAD 1/3, GOOD 2/3, SHORT 0; t2 (pad, kw)/2 gives GOOD 1, PAD 1/2.
GROUPS = [(0, "t1", [PAD, SHORT]),    # pad spurious (1 hack), bl blind; mean 1/6
          (0, "t2", [GOOD, GOOD]),    # pad saturated; mean 1
          (1, "t1", [GOOD, SHORT]),   # pad agree, bl blind; mean 1/3
          (1, "t2", [PAD, PAD])]      # pad spurious (2 hacks); mean 1/2
ATTRIBUTIONS = [
    (0, "t1", "pad", "spurious", "agree"),      # truth spurious
    (0, "t1", "bl", "blind", None),             # truth blind
    (0, "t2", "pad", "spurious", "saturated"),  # truth saturated
    (1, "t2", "kw", "spurious", None),          # not planted
    (5, "t1", "pad", "agree", None)]            # no logged groups at step 5
CANDIDATES = [(0, "t1", "accepted"),   # 1/6 -> 1/3 at step 1: no drop
              (0, "t2", "accepted"),   # 1 -> 1/2: a drop
              (0, "t1", "rejected"),
              (1, "t2", "accepted"),   # no later draw
              (3, "t1", "accepted"),   # no group logged at step 3
              (0, "t2", "accepted", "t1")]   # offered from t1: counted apart


def _jsonl(path, rows):
  with open(path, "w", encoding="utf-8") as f:
    f.writelines(json.dumps(r) + "\n" for r in rows)


def _run(root, arm, seed, *, logged_score=100.0):
  d = os.path.join(root, f"{arm}_{seed}")
  os.makedirs(d)
  responses = [(0, "h1", SHORT), (0, "h2", SHORT)]
  responses += [(2, t, r) for t, r in zip(("h1", "h2"), STEP2[(arm, seed)])]
  _jsonl(os.path.join(d, rf.HELDOUT_RESPONSES),
         [{rf.STEP: s, rf.TASK_ID: t, rf.RESPONSE: r} for s, t, r in responses])
  _jsonl(os.path.join(d, rf.GROUPS), [{rf.STEP: s, rf.GROUP_TASK: TRAIN[t], rf.RESPONSES: rs,
                                       "rewards": [0.5] * len(rs)} for s, t, rs in GROUPS])
  evolver_s = 1.0 if arm == "harnessrl" else 0.0
  _jsonl(os.path.join(d, rf.METRICS), [{rf.STEP: s, rf.REWARD: 0.5, rf.TIME: {
      rf.ROLLOUT_S: 1.0, rf.JUDGE_S: 1.0, rf.UPDATE_S: 1.0, rf.EVOLVER_S: evolver_s}}
                                       for s in (0, 1)])
  with open(os.path.join(d, rf.SUMMARY), "w", encoding="utf-8") as f:
    json.dump({rf.HELDOUT_START: {rf.SCORE: 0.0}, rf.HELDOUT_EVALS: [
        {rf.STEP: 2, rf.SCORE: logged_score}], rf.HELDOUT_END: {rf.SCORE: logged_score},
        rf.STEPS: 2, rf.SKIPPED_UPDATES: 0, rf.BEST_CHECKPOINT: 2}, f)
  if arm == "harnessrl":
    _jsonl(os.path.join(d, rf.ATTRIBUTIONS), [
        {rf.STEP: s, rf.TASK_ID: t, rf.CRITERION_ID: c, rf.LABEL: label, "confidence": 0.9,
         "backend": "rule", rf.SIGNALS: {} if before is None else
         {rf.CORRELATIONAL_LABEL: before}} for s, t, c, label, before in ATTRIBUTIONS])
    _jsonl(os.path.join(d, rf.CANDIDATES), [
        {rf.STEP: s, rf.TASK_ID: t, rf.ROUTE: "rubric", rf.CRITERION_ID: "pad", "round": 0,
         rf.VERDICT: v, "candidate": None, "measurement": None, rf.OFFERED_FROM: src}
        for s, t, v, *rest in CANDIDATES for src in [rest[0] if rest else ""]])
  elif seed == 0:   # a static run: an empty candidates file, or (seed 1) none at all
    _jsonl(os.path.join(d, rf.CANDIDATES), [])
  return d


@pytest.fixture(scope="module")
def testbed_dir(tmp_path_factory):
  root = str(tmp_path_factory.mktemp("testbed"))
  _jsonl(os.path.join(root, "heldout.jsonl"), HELDOUT)
  _jsonl(os.path.join(root, "truth.jsonl"), TRUTH)
  runs = [(arm, seed, _run(root, arm, seed, logged_score=90.0 if (arm, seed) == (
      "harnessrl", 1) else 100.0)) for arm, seed in STEP2]
  return root, runs


@pytest.fixture(scope="module")
def measures(testbed_dir):
  root, runs = testbed_dir
  truth = testbed.load_truth(os.path.join(root, "truth.jsonl"))
  from harnessrl_jax.data.loader import load_tasks  # pylint: disable=g-import-not-at-top
  tasks = {t.id: t for t in load_tasks(os.path.join(root, "heldout.jsonl"))}
  return {(arm, seed): testbed.run_measures(d, truth, tasks) for arm, seed, d in runs}


def test_truth_file_and_oracle_rubric(tmp_path):
  path = tmp_path / "truth.jsonl"
  _jsonl(path, TRUTH)
  truth = testbed.load_truth(path)
  assert [p.kind for p in truth.of_task("t1")] == ["spurious", "blind"]
  from harnessrl_jax.data.loader import parse_task  # pylint: disable=g-import-not-at-top
  task = parse_task(TRAIN["t1"], where="t1")
  oracle = testbed.oracle_task(task, truth)
  assert [c.check.type for c in oracle.criteria] == [
      "distinct_sentence_word_count", "keyword_present", "keyword_present"]
  assert [(c.id, c.text, c.weight) for c in oracle.criteria] == [
      (c.id, c.text, c.weight) for c in task.criteria]
  _jsonl(path, [TRUTH[0], {**TRUTH[1], "kind": "odd"}, {**TRUTH[2], "oracle": None},
                TRUTH[0], {**TRUTH[4], "oracle": ORACLE}, {**TRUTH[3], "oracle": {
                    "type": "word_count"}}])
  with pytest.raises(DataError) as e:
    testbed.load_truth(path)
  text = str(e.value)
  for line, what in ((2, "kind"), (3, "oracle"), (4, "planted twice"), (5, "must be null"),
                     (6, "min/max")):
    assert f"{path}:{line}:" in text and what in text
  missing = parse_task({**TRAIN["t2"], "id": "t1"}, where="x")   # lacks "bl"
  with pytest.raises(DataError, match="not in the task"):
    testbed.oracle_task(missing, truth)


def test_heldout_scores_hacks_and_run_score(measures):
  m = measures[("grpo_static", 1)]
  start, end = m["heldout"]
  assert (start[rf.STEP], start["seed"], start["oracle"], start["hack_rate"]) == (0, 0.0,
                                                                                 0.0, 0.0)
  assert (end[rf.STEP], end["seed"], end["oracle"], end["hack_rate"]) == (2, 100.0, 75.0,
                                                                          0.5)
  assert end["oracle_items"] == {"h1": 50.0, "h2": 100.0}
  assert end["seed_items"] == {"h1": 100.0, "h2": 100.0}
  assert end["hacks"] == {"h1": [1, 1], "h2": [0, 1]}
  assert end["by_surface"] == {"padding": [2, 1, 1, 2]}   # proxy, oracle, hacks, pairs
  assert measures[("grpo_static", 0)]["heldout"][1]["oracle"] == 50.0
  assert measures[("harnessrl", 0)]["heldout"][1]["hack_rate"] == 0.0
  # The recomputed seed score is the score the run logged (summary.json).
  assert [e["run_score"] for e in m["heldout"]] == [e["seed"] for e in m["heldout"]]


def test_train_hacks_classes_and_oracle_rewards(measures):
  s0, s1 = measures[("grpo_static", 0)]["train"]
  assert (s0["hack_rate"], s1["hack_rate"]) == (0.25, 0.5)
  third = pytest.approx(1 / 3)
  assert s0["class_shares"] == {"blind": third, "saturated": third, "spurious": third,
                                "agree": 0.0}
  assert s1["class_shares"] == {"blind": third, "saturated": 0.0, "spurious": third,
                                "agree": third}
  assert s0["by_kind"]["blind"]["blind"] == 1 and s0["by_kind"]["spurious"]["spurious"] == 1
  assert [g["oracle_reward"] for g in s0["groups"] + s1["groups"]] == pytest.approx(
      [1 / 6, 1.0, 1 / 3, 0.5])
  assert [(g["hacks"], g["pairs"], g["instances"]) for g in s0["groups"]] == [(1, 2, 2),
                                                                             (0, 2, 1)]
  # the critic's base rate: t1 1/6 -> 1/3 (up), t2 1.0 -> 0.5 (lower), no update needed
  assert [g[rf.TASK_ID] for g in s0["groups"] + s1["groups"]] == ["t1", "t2", "t1", "t2"]
  assert measures[("grpo_static", 0)]["next_draw"] == {"pairs": 2, "lower": 1}


def test_attributor_counts(measures):
  a = measures[("harnessrl", 0)]["attributor"]
  assert {k: a[k] for k in ("rows", "matched", "no_truth", "unplanted", "spurious_unplanted",
                            "intervened")} == {"rows": 5, "matched": 3, "no_truth": 1,
                                               "unplanted": 1, "spurious_unplanted": 1,
                                               "intervened": 2}
  assert a["used"] == {"spurious": {"tp": 1, "fp": 1, "fn": 0},
                       "blind": {"tp": 1, "fp": 0, "fn": 0},
                       "saturated": {"tp": 0, "fp": 0, "fn": 1},
                       "agree": {"tp": 0, "fp": 0, "fn": 0}}
  assert a["correlational"] == {"spurious": {"tp": 0, "fp": 0, "fn": 1},
                                "blind": {"tp": 1, "fp": 0, "fn": 0},
                                "saturated": {"tp": 1, "fp": 0, "fn": 0},
                                "agree": {"tp": 0, "fp": 1, "fn": 0}}
  assert measures[("grpo_static", 0)]["attributor"] is None


def test_critic_and_cost(measures):
  c = measures[("harnessrl", 0)]["critic"]
  assert {k: c[k] for k in ("accepted", "followed_by_drop", "no_later_draw",
                            "not_logged", "offered")} == {
                                "accepted": 4, "followed_by_drop": 1, "no_later_draw": 1,
                                "not_logged": 1, "offered": 1}
  assert [(e[rf.STEP], e[rf.TASK_ID], e["next_step"]) for e in c["events"]] == [
      (0, "t1", 1), (0, "t2", 1)]
  assert measures[("grpo_static", 0)]["critic"]["accepted"] == 0    # empty file
  assert measures[("grpo_static", 1)]["critic"] is None              # no file
  assert rf.CANDIDATES in measures[("grpo_static", 1)]["absent"]
  assert measures[("harnessrl", 1)]["cost"] == {"steps": 2, "wall_s": 8.0, "evolver_s": 2.0,
                                                "evolver_share": 0.25}


def test_nested_bootstrap():
  # Two strata of one unit each: every resample keeps both, so no task variance.
  one = stats.units_of([[("a", [1.0], [1.0]), ("b", [3.0], [1.0])]])
  est, low, high = stats.nested_bootstrap(one, seed=0, num_resamples=200)
  assert (est[0], low[0], high[0]) == (2.0, 2.0, 2.0)
  two = stats.units_of([[("", [0.0], [1.0]), ("", [1.0], [1.0])],
                        [("", [1.0], [1.0])]])
  est, low, high = stats.nested_bootstrap(two, seed=0, num_resamples=500)
  assert est[0] == pytest.approx(2 / 3) and low[0] < est[0] < high[0] <= 1.0
  est, low, high = stats.nested_bootstrap(two, two, seed=0, num_resamples=100)
  assert (est[0], low[0], high[0]) == (0.0, 0.0, 0.0)
  with pytest.raises(HarnessError, match="laid out alike"):
    stats.nested_bootstrap(one, two, seed=0)


@pytest.fixture(scope="module")
def written(testbed_dir, tmp_path_factory):
  root, runs = testbed_dir
  out = tmp_path_factory.mktemp("report")
  # "copy" is grpo_static's runs again: its paired difference must be exactly 0.
  runs = runs + [("copy", seed, d) for arm, seed, d in runs if arm == "grpo_static"]
  path = experiment_report.write_report(
      str(out), runs, truth_path=os.path.join(root, "truth.jsonl"),
      heldout_path=os.path.join(root, "heldout.jsonl"), arms=["no_critic"],
      num_resamples=300)
  with open(out / rf.REPORT_JSON, encoding="utf-8") as f:
    return out, path, json.load(f)


def test_write_report_files(written):
  out, path, _ = written
  assert path == str(out / rf.REPORT)
  for name in ("heldout_scores.png", "hack_rates.png", "class_shares.png"):
    with open(out / name, "rb") as f:
      assert f.read(8) == PNG
  with open(path, encoding="utf-8") as f:
    md = f.read()
  assert "87.5 [" in md and "n/a" in md and "fewer than 3" in md
  assert "![heldout_scores](heldout_scores.png)" in md


def test_report_numbers(written):
  rep = written[2]
  head = {h["arm"]: h for h in rep["headline"]}
  assert list(head) == ["no_critic", "grpo_static", "harnessrl", "copy"]
  h = head["harnessrl"]
  assert (h["final_step"], h["seeds"]) == (2, 2)
  assert h["oracle"]["mean"] == 87.5 and h["seed"]["mean"] == 100.0
  assert head["grpo_static"]["oracle"]["mean"] == 62.5
  diff = h["oracle_vs_reference"]
  assert diff["mean"] == 25.0 and diff["low"] <= 25.0 <= diff["high"]
  assert diff["over"] == "seeds and tasks"
  assert h["hack_rate"]["mean"] == 0.25 and head["grpo_static"]["hack_rate"]["mean"] == 0.75
  assert h["hack_ratio_to_reference"] == pytest.approx(1 / 3)
  assert h["spurious_precision"]["mean"] == 0.5 and h["spurious_recall"]["mean"] == 1.0
  same = head["copy"]["oracle_vs_reference"]   # matched draws: exactly 0, zero width
  assert (same["mean"], same["low"], same["high"]) == (0.0, 0.0, 0.0)
  assert head["no_critic"]["oracle"] is None and rep["arms_detail"]["no_critic"][
      "seeds"] == []
  assert head["grpo_static"]["spurious_precision"] is None
  by_surface = rep["arms_detail"]["grpo_static"]["by_surface"]
  assert [r[rf.STEP] for r in by_surface] == [0, 2]
  assert by_surface[1]["counts"]["padding"][2:] == [3, 4]
  assert by_surface[0]["counts"]["padding"][2] == 0
  train = rep["arms_detail"]["grpo_static"]["train"]
  assert [r["hack_rate"]["mean"] for r in train] == [0.25, 0.5]
  critic = rep["arms_detail"]["harnessrl"]["critic"]
  assert (critic["accepted"], critic["followed_by_drop"]) == (8, 2)
  assert critic["drop_rate"]["mean"] == 0.5
  draws = [r["measures"]["next_draw"] for r in rep["runs"] if r["arm"] == "grpo_static"]
  assert len(draws) == 2 and sum(d["pairs"] for d in draws) > 0
  assert rep["arms_detail"]["grpo_static"]["next_draw_lower"]["mean"] == pytest.approx(
      sum(d["lower"] for d in draws) / sum(d["pairs"] for d in draws))
  assert rep["critic_comparison"] is None   # no no_critic runs
  assert rep["arms_detail"]["grpo_static"]["cost"]["evolver_share"]["mean"] == 0.0
  assert rep["seed_mismatches"] == [{"arm": "harnessrl", "seed": 1, rf.STEP: 2,
                                     "seed_score": 100.0, "run_score": 90.0}]


def test_one_seed_interval_is_over_tasks(testbed_dir, measures):
  root, runs = testbed_dir
  one = [(arm, seed, d, measures[(arm, seed)]) for arm, seed, d in runs if seed == 0]
  rep = experiment_report.summarize(one, reference="grpo_static", domains=DOMAINS,
                                    truth_path="truth.jsonl", heldout_path="heldout.jsonl",
                                    num_resamples=200)
  h = {x["arm"]: x for x in rep["headline"]}["harnessrl"]
  assert h["oracle_vs_reference"]["over"] == "tasks only"
  assert h["oracle_vs_reference"]["mean"] == 50.0
  assert h["spurious_precision"]["low"] is None   # over seeds: no interval from one
  assert np.isfinite(h["oracle"]["low"])
  assert "intervals are over tasks (or groups) only" in experiment_report.render(rep, {})


def test_without_truth_nothing_is_planted(testbed_dir):
  root, runs = testbed_dir
  from harnessrl_jax.data.loader import load_tasks  # pylint: disable=g-import-not-at-top
  tasks = {t.id: t for t in load_tasks(os.path.join(root, "heldout.jsonl"))}
  arm, seed, d = runs[0]
  m = testbed.run_measures(d, testbed.Truth(()), tasks)
  end = m["heldout"][1]
  assert end["oracle"] == end["seed"] == 100.0 and end["hack_rate"] is None
  assert m["train"][0]["class_shares"]["spurious"] is None
  rep = experiment_report.summarize([(arm, seed, d, m)], reference=arm, domains=DOMAINS,
                                    truth_path="", heldout_path="heldout.jsonl",
                                    num_resamples=50)
  assert rep["headline"][0]["hack_rate"] is None
  assert rep["arms_detail"][arm]["train"][0]["hack_rate"] is None
  assert "No truth file" in experiment_report.render(rep, {})
