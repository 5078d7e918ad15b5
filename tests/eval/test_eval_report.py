"""The run report: every section from a synthetic run with known numbers, in the format the
driver writes; what it says when files are absent; unreadable lines listed as FILE:LINE;
the names run_files shares with the vocabularies' other owners; and the report of a REAL
tiny run (`python -m harnessrl_jax.train --config=configs/tiny.py`), every section filled
from the run's own files."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from harnessrl_jax import run_files as rf
from harnessrl_jax.eval import oracle, report
from harnessrl_jax.harness import ops
from harnessrl_jax.harness.history import HistoryRecord
from harnessrl_jax.judges.client import TextClient
from repo_paths import REPO

PNG = b"\x89PNG\r\n\x1a\n"
PLOTS = ("failure_classes.png", "reward_heldout.png", "guidance_updates.png", "cost.png")
TITLES = ("Training", "Held-out score", "Best checkpoint", "Out-of-distribution",
          "Failure classes", "Harness updates, guidance and cost per 100 steps")


def _history():
  entries = [
      (5, ops.RubricCreate("t1", "c9", "x", 2.0)),
      (10, ops.RubricRewrite("t1", "c9", "y")),
      (20, ops.RubricRewrite("t1", "c9", "x")),        # back to "x": a reversal
      (30, ops.AddGuidance("t2", "reference", "example")),
      (40, ops.RubricReweight("t1", "c0", 3.0)),
      (150, ops.SamplingLevelDown("t3")),
      (160, ops.RubricDelete("t1", "c9")),             # deletes what step 5 created: reversal
  ]
  records = [HistoryRecord(s, op, "d0", "d1", {"route": "x"}) for s, op in entries]
  # The guidance schedule's drops are logged too, but are not evolver updates.
  records.append(HistoryRecord(60, ops.DropGuidance("t2", "reference"), "d1", "d2",
                               {rf.SOURCE: rf.SOURCE_SCHEDULE}))
  return [r.to_json() for r in records]


def _heldout(score):
  return {"benchmark": "heldout", "metric": "points", "score": score,
          "by_domain": {"medical": score}, "num_items": 10, "invalid": 0, "items": {}}


def _row(s):
  """A metrics.jsonl row as metrics.step_row writes it."""
  row = {"step": s, "reward": 0.3 + 0.001 * s, "unscored": 0, "response_len": 16.0,
         "loss": 0.1, "time": {"rollout_s": 10.0, "judge_s": 5.0, "update_s": 3.0,
                               "evolver_s": 6.0},
         "evolver": {"accepted": 1}, "labels": {"blind": 1, "agree": 3}, "harness": "ab",
         "tasks": [0, 1], "guidance": {"criterion": 0.5 if s < 100 else 0.2,
                                       "reference": 0.0, "critique": 0.0}}
  if s % 50 == 49:   # a checkpoint after every 50th step
    row["time"]["checkpoint_s"] = 36.0
  if s == 99:
    row["heldout_score"] = 60.0
  return row


def _write_run(d):
  with open(d / rf.METRICS, "w") as f:
    f.writelines(json.dumps(_row(s)) + "\n" for s in range(250))
  (d / rf.SUMMARY).write_text(json.dumps(
      {"heldout_start": _heldout(40.0), "heldout_end": _heldout(50.0),
       "heldout_evals": [{"step": 100, "score": 60.0}, {"step": 200, "score": 55.0},
                         {"step": 250, "score": 50.0}],
       "updates": {}, "labels": {}, "label_shares": {}, "cost": {},
       "steps": 250, "skipped_updates": 0, "harness_digest": "d", "params_sha256": "p",
       "best_checkpoint": 100}))
  oracle.write_rows(str(d / rf.ORACLE), [
      {"step": s, "pairs": 28, "unjudged": 0, "blind": (1 - a) / 4, "saturated": (1 - a) / 4,
       "spurious_reversed": (1 - a) / 4, "spurious_unordered": (1 - a) / 4, "agree": a,
       "agreement": a} for s, a in ((0, 0.38), (200, 0.49))])
  with open(d / rf.HISTORY, "w") as f:
    f.writelines(json.dumps(rec) + "\n" for rec in _history())
  with open(d / rf.CANDIDATES, "w") as f:
    for v in ("accepted", "rejected", "rejected", "noop"):
      f.write(json.dumps({"step": 1, "task_id": "t1", "route": "rubric", "criterion_id": "c0",
                          "round": 0, "verdict": v, "candidate": None, "measurement": None,
                          "note": ""}) + "\n")
  (d / rf.eval_file(100)).write_text(json.dumps(   # a subset: not a held-out point
      {"step": 100, "heldout": {**_heldout(99.0), "limit": 5}}))
  (d / rf.eval_file(200)).write_text(json.dumps(
      {"step": 200, "heldout": _heldout(55.0),
       "ood": {"MedQA": {"metric": "accuracy", "score": 40.0, "num_items": 3},
               "ood_mean": 45.0}}))


def test_history_records_parse_back():
  for rec in _history():   # the synthetic log is in the real on-disk format
    assert HistoryRecord.from_json(rec).to_json() == rec


def test_report_from_synthetic_run(tmp_path):
  _write_run(tmp_path)
  text = open(report.write_report(str(tmp_path))).read()
  for name in PLOTS:
    with open(tmp_path / name, "rb") as f:
      assert f.read(8) == PNG, name
    assert os.path.getsize(tmp_path / name) > 5000
    assert f"({name})" in text
  data = report.read_run(str(tmp_path))
  assert data.problems == () and data.absent == frozenset()
  assert all(s.missing == () for s in report.sections(data))
  assert "Missing" not in text and "Unreadable" not in text
  assert report.heldout_points(data) == [(0, 40.0, None), (100, 60.0, None),
                                         (200, 55.0, 45.0), (250, 50.0, None)]
  best = report.best_checkpoint(data)       # ranked by OOD where eval files give it
  assert best["step"] == 200
  assert best["hours"] == pytest.approx((200 * 24 + 4 * 36) / 3600)
  bins = report.per_bin(data)
  assert list(bins) == [0, 100, 200]
  assert bins[0]["accepted_rubric"] == 4 and bins[0]["reversed_rubric"] == 1
  assert bins[0]["accepted_guidance"] == 1 and bins[100]["accepted_sampling"] == 1
  assert bins[100]["reversed_rubric"] == 1
  assert bins[0]["share_criterion"] == pytest.approx(0.5)
  assert bins[100]["share_criterion"] == pytest.approx(0.2)
  assert bins[0]["rl_hours"] == pytest.approx(100 * 18 / 3600)
  assert bins[200]["rl_hours"] == pytest.approx(100 * 18 / 3600)   # 50 steps, scaled to 100
  assert bins[200]["evolver_hours"] == pytest.approx(100 * 6 / 3600)
  assert bins[0]["checkpoint_hours"] == bins[200]["checkpoint_hours"] == pytest.approx(
      72 / 3600)
  for s in ("250 logged steps (steps 0-249); training reward first 0.3000, last 0.5490.",
            "finished after 250 steps; 0 updates", "| 200 | 55.00 | 45.00 |",
            "Best mean OOD score 45.00 at step 200", "kept checkpoint 100",
            "| MedQA | accuracy | 40.00 | 3 |", "| 0 | 15.50 | 15.50 | 15.50 | 15.50 | 38.00 |",
            "| 0 | 25.00 | 0.00 | 0.00 | 75.00 |",   # attributor labels
            "Reversed rubric updates: 2 of 5 (40.0%)",
            "Critic verdicts: accepted 1, rejected 2, unmeasurable 0, noop 1.",
            "mean share of drawn tasks with the field mounted"):
    assert s in text, s


def test_report_says_what_is_missing(tmp_path):
  text = open(report.write_report(str(tmp_path))).read()
  assert not any(n.endswith(".png") for n in os.listdir(tmp_path))
  data = report.read_run(str(tmp_path))
  assert data.absent == {rf.METRICS, rf.SUMMARY, rf.ORACLE, rf.HISTORY, rf.CANDIDATES,
                         rf.EVAL_GLOB}
  missing = {s.title: " ".join(s.missing) for s in report.sections(data)}
  assert list(missing) == list(TITLES)       # no Unreadable section without problems
  for title, names in (("Training", (rf.METRICS, rf.SUMMARY)),
                       ("Held-out score", (rf.SUMMARY,)), ("Best checkpoint", ("held-out",)),
                       ("Out-of-distribution", (rf.EVAL_GLOB, "--medqa")),
                       ("Failure classes", (rf.ORACLE, f"--groups=RUN_DIR/{rf.GROUPS}")),
                       ("Harness updates, guidance and cost per 100 steps",
                        (rf.METRICS, rf.HISTORY, rf.CANDIDATES))):
    for name in names:
      assert name in missing[title], (title, name)
  assert text.count("Missing: ") == len(TITLES)


def test_unreadable_lines_are_listed(tmp_path):
  good = _row(0)
  no_time = {k: v for k, v in _row(1).items() if k != "time"}
  (tmp_path / rf.METRICS).write_text("\n".join([
      json.dumps(good), "{not json", "[1, 2]", json.dumps(no_time),
      json.dumps({"reward": 0.5}), json.dumps(good),
      '{"step": 5, "rew']))   # cut by a kill: no newline
  (tmp_path / rf.HISTORY).write_text(json.dumps({"step": 1, "op": {"op": "nope"}}) + "\n")
  (tmp_path / rf.SUMMARY).write_text(json.dumps({"steps": 2}))
  (tmp_path / rf.eval_file(3)).write_text(json.dumps({"step": 4}))
  data = report.read_run(str(tmp_path))
  assert [r.step for r in data.metrics] == [0, 1]   # the readable rows, what they hold
  assert data.metrics[1].seconds is None and data.metrics[1].reward == pytest.approx(0.301)
  problems = "\n".join(data.problems)
  for s in (f"{rf.METRICS}:2: not JSON", f"{rf.METRICS}:3: not a JSON object",
            f"{rf.METRICS}:4: time: needs seconds rollout_s, judge_s, update_s, evolver_s",
            f"{rf.METRICS}:5: step: not a step number; row left out",
            f"{rf.METRICS}:6: step: 0 logged again; this row is used",
            f"{rf.METRICS}:7: cut off: the last line has no newline",
            f"{rf.HISTORY}:1: a history record needs exactly the keys",
            f"{rf.SUMMARY}: heldout_start: needs a held-out result",
            f"{rf.SUMMARY}: heldout_evals: missing or not a list",
            f"{rf.eval_file(3)}: step: 4 is not the step its name gives"):
    assert s in problems, s
  text = open(report.write_report(str(tmp_path))).read()
  assert "## Unreadable" in text and f"- {rf.METRICS}:2: not JSON" in text
  assert str(tmp_path) not in problems        # named relative to the run directory


def test_run_files_names_the_owners_vocabularies():
  # pylint: disable=g-import-not-at-top
  from harnessrl_jax import harness
  from harnessrl_jax.evolver import types
  # pylint: enable=g-import-not-at-top
  assert harness.FIELDS is rf.GUIDANCE_FIELDS and oracle.CLASSES is rf.ORACLE_CLASSES
  # The evolver keeps its own copies (it is rewritten elsewhere): they must agree.
  assert types.LABELS == rf.ATTRIBUTOR_LABELS and types.ROUTES == rf.ROUTES
  assert set(rf.ROUTES.values()) == set(rf.INTERFACES)
  assert {rf.interface_of(k) for k in ops.OPS} == {*rf.INTERFACES, None}
  assert rf.eval_step_of(rf.eval_file(12)) == 12 and rf.eval_step_of("eval.json") is None


# ---- a real tiny run (needs the driver of train.py as run_files and metrics describe it)


class _PreferFirst(TextClient):
  """An oracle that always prefers the response shown first (ties every pair)."""

  identity = "prefer-first"

  def _complete(self, chats, max_tokens):
    return ["Verdict: A"] * len(chats)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
  """A 2-step run of configs/tiny.py on 8 training and 4 held-out tasks with a held-out
  evaluation after every step, and the oracle analysis of its logged groups."""
  root = tmp_path_factory.mktemp("tiny_run")
  for src, n in (("train.jsonl", 8), ("heldout.jsonl", 4)):
    with open(os.path.join(REPO, "data", src), encoding="utf-8") as f:
      (root / src).write_text("".join(f.readlines()[:n]))
  run_dir = root / "run"
  done = subprocess.run(
      [sys.executable, "-m", "harnessrl_jax.train", "--config=configs/tiny.py",
       f"--workdir={run_dir}", f"--config.data.train={root / 'train.jsonl'}",
       f"--config.data.heldout={root / 'heldout.jsonl'}", "--config.train.steps=2",
       "--config.train.eval_every=1", "--config.train.oracle_groups_every=1"],
      cwd=REPO, capture_output=True, text=True, timeout=900)
  assert done.returncode == 0, done.stderr[-3000:]
  groups = oracle.read_groups(str(run_dir / rf.GROUPS))
  oracle.write_rows(str(run_dir / rf.ORACLE), oracle.analyze(groups, _PreferFirst())["by_step"])
  return run_dir


def test_report_of_a_real_tiny_run(tiny_run, tmp_path):
  text = open(report.write_report(str(tiny_run), out_dir=str(tmp_path))).read()
  data = report.read_run(str(tiny_run))
  assert data.problems == ()
  assert data.absent == {rf.EVAL_GLOB}        # only evaluate writes those
  secs = report.sections(data)
  assert [s.title for s in secs] == list(TITLES)
  # Every section is filled, but the OOD one: only evaluate's eval_step<N>.json feed it.
  assert [s.title for s in secs if not s.lines] == ["Out-of-distribution"]
  assert [s.title for s in secs if s.missing] == ["Out-of-distribution"]
  for name in PLOTS:
    with open(tmp_path / name, "rb") as f:
      assert f.read(8) == PNG, name
  # Held-out points at the start and after each step, from summary.json and the rows.
  assert [s for s, _, _ in report.heldout_points(data)] == [0, 1, 2]
  assert all(0.0 <= h <= 100.0 for _, h, _ in report.heldout_points(data))
  assert [r.step for r in data.metrics] == [0, 1]
  assert all(r.seconds is not None and r.seconds[2] > 0 for r in data.metrics)  # saved
  assert all(r.heldout is not None for r in data.metrics)
  assert all(r.guidance is not None and r.labels is not None for r in data.metrics)
  assert data.summary.steps == 2 and data.summary.end is not None
  assert len(data.oracle) == 2 and data.verdicts
  assert report.per_bin(data)[0]["rl_hours"] > 0
  assert "Attributor labels" in text and "Critic verdicts" in text
