"""The run report renders every plot from a synthetic run directory with known numbers, and
degrades to saying what is missing."""

from __future__ import annotations

import json
import os

import pytest

from harnessrl_jax.eval import report
from harnessrl_jax.harness import ops
from harnessrl_jax.harness.history import HistoryRecord

PNG = b"\x89PNG\r\n\x1a\n"


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
                               {"source": "guidance schedule"}))
  return [r.to_json() for r in records]


def _write_run(d):
  with open(d / "metrics.jsonl", "w") as f:
    for s in range(250):
      # The driver's layout: timings nested under "time", held-out on the row of the step
      # it follows.
      row = {"step": s, "reward": 0.3 + 0.001 * s,
             "time": {"rollout_s": 10.0, "judge_s": 5.0, "update_s": 3.0, "evolver_s": 6.0,
                      "checkpoint_s": 100.0},
             "guidance": {"criterion": 0.5 if s < 100 else 0.2}}
      if s == 99:
        row["heldout_reward"] = 0.6
      f.write(json.dumps(row) + "\n")
    f.write('{"step": 250, "rew')   # a line cut by a crash: skipped
  (d / "summary.json").write_text(json.dumps(
      {"heldout_start": {"reward": 0.4}, "heldout_end": {"reward": 0.5}, "steps": 250,
       "heldout_evals": [{"step": 200, "reward": 0.55}]}))
  with open(d / "oracle.jsonl", "w") as f:
    for s, agree in ((0, 0.38), (200, 0.49)):
      rest = (1 - agree) / 4
      f.write(json.dumps({"step": s, "blind": rest, "saturated": rest,
                          "spurious_reversed": rest, "spurious_unordered": rest,
                          "agree": agree, "agreement": agree, "pairs": 28}) + "\n")
  with open(d / "harness_history.jsonl", "w") as f:
    for rec in _history():
      f.write(json.dumps(rec) + "\n")
  with open(d / "evolver_candidates.jsonl", "w") as f:
    for v in ("accepted", "rejected", "rejected", "noop"):
      f.write(json.dumps({"step": 1, "verdict": v}) + "\n")
  (d / "eval_step100.json").write_text(json.dumps(   # a subset: not a held-out point
      {"step": 100, "heldout": {"score": 99.0, "limit": 5}}))
  (d / "eval_step200.json").write_text(json.dumps(
      {"step": 200, "heldout": {"score": 55.0},
       "ood": {"MedQA": {"metric": "accuracy", "score": 40.0, "num_items": 3},
               "ood_mean": 45.0}}))


def test_history_records_parse_back():
  for rec in _history():   # the synthetic log is in the real on-disk format
    assert HistoryRecord.from_json(rec).to_json() == rec


def test_report_from_synthetic_run(tmp_path):
  _write_run(tmp_path)
  path = report.write_report(str(tmp_path))
  text = open(path).read()
  for name in ("failure_classes.png", "reward_heldout.png", "guidance_updates.png", "cost.png"):
    with open(tmp_path / name, "rb") as f:
      assert f.read(8) == PNG, name
    assert os.path.getsize(tmp_path / name) > 5000
    assert f"({name})" in text
  data = report.RunData(str(tmp_path))
  assert data.missing == []
  assert data.heldout_points() == [(0, 40.0, None), (100, 60.0, None), (200, 55.0, 45.0),
                                   (250, 50.0, None)]
  best = report.best_checkpoint(data)       # ranked by OOD where eval files give it
  assert best["step"] == 200 and best["hours"] == pytest.approx(200 * 24 / 3600)
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
  assert "Reversed rubric updates: 2 of 5 (40.0%)" in text
  assert "Best mean OOD score 45.00 at step 200" in text
  assert "accepted 1, noop 1, rejected 2" in text
  assert "| MedQA | accuracy | 40.00 | 3 |" in text


def test_report_with_missing_files(tmp_path):
  path = report.write_report(str(tmp_path))
  text = open(path).read()
  assert "## Missing" in text and "metrics.jsonl" in text and "oracle.jsonl" in text
  assert not any(n.endswith(".png") for n in os.listdir(tmp_path))
  (tmp_path / "metrics.jsonl").write_text(json.dumps(
      {"step": 0, "reward": 0.5, "rollout_s": 3.0, "evolver_s": 1.0}) + "\n")
  text = open(report.write_report(str(tmp_path))).read()
  assert os.path.exists(tmp_path / "reward_heldout.png") and "harness_history.jsonl" in text
  assert report.RunData(str(tmp_path)).step_seconds() == {0: (3.0, 1.0)}   # flat columns


def test_report_from_real_tiny_run(tmp_path):
  # The logs of `python -m harnessrl_jax.train --config=configs/tiny.py` (2 steps), kept as
  # a fixture because the run itself takes minutes on a shared CPU.
  src = os.path.join(os.path.dirname(__file__), "fixtures", "eval_tiny_run")
  text = open(report.write_report(src, out_dir=str(tmp_path))).read()
  for name in ("failure_classes.png", "reward_heldout.png", "guidance_updates.png", "cost.png"):
    with open(tmp_path / name, "rb") as f:
      assert f.read(8) == PNG, name
  data = report.RunData(src)
  assert [s for s, _, _ in data.heldout_points()] == [0, 2]
  rl, ev = data.step_seconds()[0]
  assert rl > 0 and ev > 0
  assert len(data.label_shares()) == 2 and "Attributor labels" in text
  assert report.per_bin(data)[0]["accepted_sampling"] > 0
  assert data.missing == ["oracle.jsonl (oracle failure classes; run evaluate --groups)"]
