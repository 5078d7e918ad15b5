"""TensorBoard event bytes against the published CRC-32C check value and a hand-encoded
protobuf; event files cut back on resume so that each step appears once (read back through
the protobuf runtime); JSONL truncation on resume; the summary as a value (each function
returns a new one); the complete step row and what the report reads of it; the summary table;
mounted-guidance shares and the logged groups the oracle analysis reads."""

import json
import os
import struct
import time
import types

import numpy as np

import pytest

from harnessrl_jax.run import metrics
from harnessrl_jax.run import step as step_fns
from harnessrl_jax import run_files as rf
from harnessrl_jax.data.loader import load_tasks
from harnessrl_jax.eval import oracle, report
from harnessrl_jax.judges.score_matrix import Unscored
from harnessrl_jax.run.step import EvolveLog
from repo_paths import REPO



def test_crc32c_check_value():
  # The CRC-32C (Castagnoli) check value of "123456789" (RFC 3720, B.4).
  assert metrics.crc32c(b"123456789") == 0xE3069283
  assert metrics.crc32c(b"") == 0


def test_event_bytes_by_hand():
  got = metrics.event_bytes(1.0, 2, scalars={"a": 0.5})
  value = bytes([0x0A, 0x01, ord("a"), 0x15]) + struct.pack("<f", 0.5)   # tag, simple_value
  summary = bytes([0x0A, len(value)]) + value                            # Summary.value
  want = (bytes([0x09]) + struct.pack("<d", 1.0) + bytes([0x10, 0x02])   # wall_time, step
          + bytes([0x2A, len(summary)]) + summary)                        # Event.summary
  assert got == want
  assert metrics.event_bytes(0.0, 0, file_version="brain.Event:2").endswith(
      bytes([0x1A, 13]) + b"brain.Event:2")


def read_records(path):
  data, out, i = open(path, "rb").read(), [], 0
  while i < len(data):
    (n,) = struct.unpack("<Q", data[i:i + 8])
    assert struct.unpack("<I", data[i + 8:i + 12])[0] == metrics.masked_crc(data[i:i + 8])
    payload = data[i + 12:i + 12 + n]
    assert struct.unpack("<I", data[i + 12 + n:i + 16 + n])[0] == metrics.masked_crc(payload)
    out.append(payload)
    i += 16 + n
  return out


def test_metrics_writer_frames_every_row(tmp_path):
  w = metrics.MetricsWriter(str(tmp_path))
  w.write({"step": 0, "reward": 0.25, "time": {"rollout_s": 1.5}, "tasks": [1, 2],
           "harness": "ab"})
  w.write({"step": 1, "reward": None, "loss": float("nan"), "kl": 0.125})
  recs = read_records(w.events.path)
  assert len(recs) == 3                       # file version + one event per finite row
  assert b"time/rollout_s" in recs[1] and b"reward" in recs[1] and b"tasks" not in recs[1]
  wall = struct.unpack("<d", recs[2][1:9])[0]
  assert recs[2] == metrics.event_bytes(wall, 1, scalars={"kl": 0.125})   # None, NaN left out
  rows = [json.loads(l) for l in (tmp_path / "metrics.jsonl").read_text().splitlines()]
  assert [r["step"] for r in rows] == [0, 1]


def event_class():
  """TensorBoard's Event message (tensorflow/core/util/event.proto and summary.proto: the
  fields a scalar uses) for the protobuf runtime: an independent reader of our bytes."""
  descriptor_pb2 = pytest.importorskip("google.protobuf.descriptor_pb2")
  # pylint: disable-next=g-import-not-at-top
  from google.protobuf import descriptor_pool, message_factory
  f = descriptor_pb2.FieldDescriptorProto
  proto = descriptor_pb2.FileDescriptorProto(name="tb_event_test.proto", package="tbtest")
  summary = proto.message_type.add(name="Summary")
  value = summary.nested_type.add(name="Value")
  value.field.add(name="tag", number=1, type=f.TYPE_STRING, label=f.LABEL_OPTIONAL)
  value.field.add(name="simple_value", number=2, type=f.TYPE_FLOAT, label=f.LABEL_OPTIONAL)
  summary.field.add(name="value", number=1, type=f.TYPE_MESSAGE, label=f.LABEL_REPEATED,
                    type_name=".tbtest.Summary.Value")
  event = proto.message_type.add(name="Event")
  event.field.add(name="wall_time", number=1, type=f.TYPE_DOUBLE, label=f.LABEL_OPTIONAL)
  event.field.add(name="step", number=2, type=f.TYPE_INT64, label=f.LABEL_OPTIONAL)
  event.field.add(name="file_version", number=3, type=f.TYPE_STRING, label=f.LABEL_OPTIONAL)
  event.field.add(name="summary", number=5, type=f.TYPE_MESSAGE, label=f.LABEL_OPTIONAL,
                  type_name=".tbtest.Summary")
  pool = descriptor_pool.DescriptorPool()
  pool.Add(proto)
  return message_factory.GetMessageClass(pool.FindMessageTypeByName("tbtest.Event"))


def scalars_by_step(logdir):
  """{step: [{tag: value}, ...]} over every event file, each checked for its CRCs and its
  file-version header."""
  event, out = event_class(), {}
  for name in sorted(os.listdir(logdir)):
    records = [event.FromString(r) for r in read_records(os.path.join(logdir, name))]
    assert records[0].file_version == "brain.Event:2", name
    for e in records[1:]:
      out.setdefault(e.step, []).append({v.tag: v.simple_value for v in e.summary.value})
  return out


def _row(step):
  return {"step": step, "reward": step / 8, "time": {"rollout_s": 1.0 + step}}


@pytest.mark.parametrize("tb_written_through", [3, 0])
def test_resume_cuts_the_event_files_back_to_each_step_once(tmp_path, monkeypatch,
                                                          tb_written_through):
  """A run killed after checkpoint 2 resumes from it: steps 2.. run again. The first
  process wrote steps 0..tb_written_through to tb/ (0: the kill came between checkpoint 2
  and step 1's write) and a record the kill cut short; the second writes 2..4."""
  first = metrics.MetricsWriter(str(tmp_path))
  for step in range(tb_written_through + 1):
    first.write(_row(step))
  with open(first.events.path, "ab") as f:
    f.write(metrics.record_bytes(metrics.event_bytes(0.0, 9, scalars={"reward": 9.0}))[:-7])
  clock = time.time() + 5   # another process, later: another event file
  monkeypatch.setattr(metrics.time, "time", lambda: clock)
  second = metrics.MetricsWriter(str(tmp_path))
  second.cut_back(2, last_row=_row(1))   # what train.resume does with checkpoint 2
  for step in range(2, 5):
    second.write(_row(step))
  got = scalars_by_step(tmp_path / rf.TENSORBOARD)
  assert sorted(got) == [0, 1, 2, 3, 4]
  for step, events in got.items():
    assert events == [{"reward": step / 8, "time/rollout_s": 1.0 + step}], step
  assert len(os.listdir(tmp_path / rf.TENSORBOARD)) == 2


def test_fresh_start_drops_every_earlier_event_file(tmp_path, monkeypatch):
  earlier = metrics.MetricsWriter(str(tmp_path))
  earlier.write(_row(0))
  clock = time.time() + 5
  monkeypatch.setattr(metrics.time, "time", lambda: clock)
  fresh = metrics.MetricsWriter(str(tmp_path))
  fresh.cut_back(0)   # what train.fresh_start does
  assert os.listdir(tmp_path / rf.TENSORBOARD) == []
  fresh.write(_row(0))
  assert scalars_by_step(tmp_path / rf.TENSORBOARD) == {
      0: [{"reward": 0.0, "time/rollout_s": 1.0}]}


def test_truncate_drops_later_and_cut_lines(tmp_path):
  p = tmp_path / "m.jsonl"
  p.write_text('{"step": 0}\n{"step": 1}\n{"step": 2}\n{"step": 3, "cu')
  metrics.truncate_jsonl(str(p), lambda r: r["step"] < 2)
  assert p.read_text() == '{"step": 0}\n{"step": 1}\n'
  h = tmp_path / "h.jsonl"
  h.write_text("a\nb\nc\nd")
  metrics.truncate_lines(str(h), 2)
  assert h.read_text() == "a\nb\n"


def test_summary_table_names_everything():
  text = metrics.summary_table({
      "steps": 3, "heldout_start": {"score": 10.0, "by_domain": {"medical": 10.0}},
      "heldout_end": {"score": 30.0, "by_domain": {"medical": None}},
      "label_shares": {"first": {"blind": 0.5, "agree": 0.5}},
      "updates": {"sampling": {"accepted": 2, "rejected": 1}},
      "cost": {"rl_s": 30.0, "evolver_s": 10.0, "critic_rollouts": 4}})
  for s in ("start 10.00", "end 30.00", "end -", "blind 50.0%", "sampling", "accepted    2",
            "noop    0", "RL 30.0s (75%)", "evolver 10.0s (25%)"):
    assert s in text, s


def test_guidance_shares_per_field():
  # Three drawn tasks (one drawn twice): criterion on 2 of 3 draws, critique on 1.
  mounted = np.array([[True, False, True], [True, False, False], [False, False, False]])
  assert metrics.guidance_shares(mounted) == {
      "criterion": 2 / 3, "reference": 0.0, "critique": 1 / 3}


def test_group_rows_read_back_as_oracle_groups(tmp_path):
  tasks = load_tasks(os.path.join(REPO, "data", "train.jsonl"))[:2]
  rewards = np.array([[0.5, 0.25, 1.0], [0.0, 0.75, 0.5]])
  valid = np.array([[True, False, True], [True, True, True]])
  rec = types.SimpleNamespace(step=3, tasks=tasks, responses=(("a", "b", "c"), ("d", "e", "f")),
                              judged=types.SimpleNamespace(rewards=rewards, valid=valid))
  w = metrics.MetricsWriter(str(tmp_path))
  w.write({"step": 3, "reward": 0.5}, groups=metrics.group_rows(rec))
  groups = oracle.read_groups(str(tmp_path / rf.GROUPS))
  assert [(g.step, g.task_id, g.responses) for g in groups] == [
      (3, tasks[0].id, ("a", "b", "c")), (3, tasks[1].id, ("d", "e", "f"))]
  np.testing.assert_array_equal(groups[0].rewards, [0.5, np.nan, 1.0])   # invalid: left out
  np.testing.assert_array_equal(groups[1].rewards, [0.0, 0.75, 0.5])


def test_progress_line_shows_heldout_score_only_when_evaluated():
  row = {"step": 4, "reward": 0.25, "loss": 0.01, "evolver": {"accepted": 2, "rejected": 1},
         "time": {"rollout_s": 1.0, "update_s": 2.0}}
  line = metrics.progress_line(row, 10)
  assert line.startswith("step 5/10 reward 0.2500") and "accepted 2 rejected 1" in line
  assert "held-out" not in line and "ckpt" not in line
  line = metrics.progress_line({**row, "heldout_score": 43.75,
                                "time": {"checkpoint_s": 0.5}}, 10)
  assert line.endswith("ckpt 0.5s | held-out 43.75 pts")
  assert metrics.progress_line({**row, "heldout_score": None}, 10).endswith("held-out - pts")


# ---- the summary as a value and the complete step row, in the driver's order


def _heldout(score, step_tag="x", lost=Unscored(4)):
  """A held-out result as eval/heldout.py gives it."""
  return {"benchmark": "heldout", "metric": "points", "score": score,
          "by_domain": {"medical": score}, "num_items": 1, "invalid": 0,
          "items": {step_tag: score}, "unscored": lost.to_json()}


def _step(step, labels=None, verdicts=None, lost=Unscored(8, (("transport", 1),)),
          critic_lost=Unscored(8), critic_positions=None):
  judged = types.SimpleNamespace(rewards=np.array([[0.5, 0.25], [1.0, 0.0]]),
                                 valid=np.array([[True, True], [True, False]]), unscored=lost)
  rec = types.SimpleNamespace(step=step, task_indices=(3, 1), judged=judged,
                              response_len=12.0, metrics={"loss": 0.5, "kl": 0.0},
                              timings={"rollout_s": 1.0, "judge_s": 2.0, "update_s": 3.0},
                              positions={"rollout_s": {"computed": 100, "real": 60},
                                         "update_s": {"computed": 80, "real": 60}})
  elog = EvolveLog("ab" * 32, verdicts or {}, labels or {},
                   {"critic": {"rollouts": 4, "judge_cells": 8,
                               "unscored": critic_lost.to_json()}}, 0,
                   {"critic": critic_positions} if critic_positions else {})
  return rec, elog


def test_summary_is_a_value():
  start = _heldout(10.0, "s")
  s0 = metrics.new_summary(start)
  frozen = json.dumps(s0, sort_keys=True)
  rec, elog = _step(0, labels={"blind": 3, "agree": 1},
                    verdicts={"rubric": {"accepted": 1}, "guidance": {"rejected": 2}},
                    critic_positions={"computed": 50, "real": 30})
  s1 = metrics.accumulate(s0, rec, elog, 0.5)
  assert json.dumps(s0, sort_keys=True) == frozen          # the input is left as it was
  s2 = metrics.accumulate(s1, *_step(1, labels={"spurious": 1},
                                     verdicts={"rubric": {"accepted": 1, "noop": 1}}), 1.5)
  assert s1["updates"] == {"rubric": {"accepted": 1}, "guidance": {"rejected": 2}}
  assert s2["updates"]["rubric"] == {"accepted": 2, "noop": 1}
  assert s2["labels"] == {"agree": 1, "blind": 3, "spurious": 1}
  assert s2["label_shares"] == {"first": {"agree": 0.25, "blind": 0.75},
                                "last": {"spurious": 1.0}}
  assert s2["cost"] == {"rl_s": 12.0, "evolver_s": 2.0, "critic_rollouts": 8,
                        "critic_judge_cells": 16,
                        # step 1 re-sampled nothing: the critic keeps step 0's total
                        "positions": {"critic": {"computed": 50, "real": 30},
                                      "rollout_s": {"computed": 200, "real": 120},
                                      "update_s": {"computed": 160, "real": 120}}}
  assert "padding (share of token positions computed)   critic 40% of 50   rollout 40% of " \
         "200   update 25% of 160" in metrics.summary_table(s2)
  s3 = metrics.with_heldout(s2, 1, _heldout(20.0), final=False)
  s4 = metrics.with_heldout(s3, 2, _heldout(30.0), final=True)
  assert s2["heldout_evals"] == [] and "heldout_end" not in s3
  assert s4["heldout_evals"] == [
      {"step": 1, "score": 20.0, "unscored": Unscored(4).to_json()},
      {"step": 2, "score": 30.0, "unscored": Unscored(4).to_json()}]
  assert s4["heldout_end"]["score"] == 30.0 and s4["heldout_start"] == start
  done = metrics.finished(s4, steps=2, skipped_updates=0, harness_digest="d",
                          params_sha256="p", best_checkpoint=2)
  assert {k: done[k] for k in rf.FINISHED} == {"steps": 2, "skipped_updates": 0,
                                               "harness_digest": "d", "params_sha256": "p",
                                               "best_checkpoint": 2}
  assert "steps" not in s4
  with pytest.raises(TypeError, match="best_checkpoint"):
    metrics.finished(s4, steps=2)


def test_the_critics_resamples_are_counted(monkeypatch):
  """make_evolve counts the token positions of every re-sample the critic asks for."""
  rollout = types.SimpleNamespace(lengths=np.array([3, 5]),
                                  prompt_mask=np.array([[0, 1, 1], [1, 1, 1]]))
  texts = lambda params, chats, law, key, j: types.SimpleNamespace(responses=(("a", "b"),),
                                                                    rollout=rollout)

  class Evolver:
    def __init__(self, calls):
      self.calls = calls

    def step(self, h, groups, *, step, key, memory, resample):
      for _ in range(self.calls):
        assert resample([()], key, 2) == [["a", "b"]]
      return types.SimpleNamespace(records=(), attributions=(), harness=h, digest="d",
                                   accounting={}, history=())

  monkeypatch.setattr(step_fns, "groups_of", lambda rec: [])
  run = lambda calls: step_fns.make_evolve(Evolver(calls), texts, None)(
      "h", None, types.SimpleNamespace(step=0), params=None, key=None)[1]
  # Each call: 2 rows x (3 prompt slots + 5 decode steps) computed; 5 + 8 real.
  assert run(2).positions == {"critic": {"computed": 32, "real": 26}}
  assert run(0).positions == {}


def test_step_row_is_complete():
  rec, elog = _step(4, labels={"blind": 1}, verdicts={"rubric": {"accepted": 1},
                                                      "sampling": {"accepted": 1, "noop": 2}},
                    critic_positions={"computed": 40, "real": 10})
  mounted = np.array([[True, False, False], [False, False, False]])
  row = metrics.step_row(rec, elog, evolver_s=0.5, mounted=mounted)
  assert row["reward"] == pytest.approx(1.75 / 3) and row["loss"] == 0.5
  assert row["time"] == {"rollout_s": 1.0, "judge_s": 2.0, "update_s": 3.0, "evolver_s": 0.5}
  assert row["evolver"] == {"accepted": 2, "noop": 2} and row["tasks"] == [3, 1]
  assert row["positions"] == {"rollout_s": {"computed": 100, "real": 60},
                              "update_s": {"computed": 80, "real": 60},
                              "critic": {"computed": 40, "real": 10}}
  assert row["guidance"] == {"criterion": 0.5, "reference": 0.0, "critique": 0.0}
  assert row["unscored"] == {"count": 1, "share": 0.125, "cells": 8,
                             "causes": {"transport": 1}}
  assert row["critic_unscored"] == {"count": 0, "share": 0.0, "cells": 8, "causes": {}}
  assert "heldout_score" not in row and "heldout_unscored" not in row
  full = metrics.step_row(rec, elog, evolver_s=0.5, mounted=mounted,
                          heldout=_heldout(42.5), heldout_s=1.5, checkpoint_s=0.25)
  assert full["heldout_score"] == 42.5 and full["time"]["checkpoint_s"] == 0.25
  assert full["time"]["heldout_s"] == 1.5
  assert full["heldout_unscored"] == Unscored(4).to_json()
  line = metrics.progress_line(full, 10)
  assert "ckpt 0.2s" in line and "held-out 42.50 pts in 1.5s" in line


def test_rows_the_writer_writes_are_what_the_report_reads(tmp_path):
  w = metrics.MetricsWriter(str(tmp_path))
  mounted = np.array([[True, False, True], [True, False, False]])
  for step in range(3):
    rec, elog = _step(step, labels={"blind": 1, "agree": 3})
    last = step == 2
    w.write(metrics.step_row(rec, elog, evolver_s=1.0, mounted=mounted,
                             heldout=_heldout(50.0) if last else None,
                             checkpoint_s=2.0 if last else None))
  data = report.read_run(str(tmp_path))
  assert data.problems == ()
  assert [(r.step, r.seconds, r.heldout) for r in data.metrics] == [
      (0, (6.0, 1.0, 0.0), None), (1, (6.0, 1.0, 0.0), None), (2, (6.0, 1.0, 2.0), 50.0)]
  assert data.metrics[0].guidance == {"criterion": 1.0, "reference": 0.0, "critique": 0.5}
  assert report.heldout_points(data) == [(3, 50.0, None)]
  assert report.label_shares(data)[0] == {"step": 0, "blind": 0.25, "saturated": 0.0,
                                          "spurious": 0.0, "agree": 0.75}


def test_unmeasurable_and_unscored_cells_are_counted_per_step_and_in_the_summary():
  lost = Unscored(40, (("transport", 3), ("parse", 1)))
  critic = Unscored(16, (("refused", 4),))
  rec, elog = _step(0, verdicts={"rubric": {"unmeasurable": 2, "rejected": 1}}, lost=lost,
                    critic_lost=critic)
  row = metrics.step_row(rec, elog, evolver_s=0.5, mounted=np.zeros((2, 3), bool),
                         heldout=_heldout(40.0, lost=Unscored(10, (("parse", 1),))))
  assert row["evolver"] == {"rejected": 1, "unmeasurable": 2}
  assert row["critic_unscored"] == {"count": 4, "share": 0.25, "cells": 16,
                                    "causes": {"refused": 4}}
  line = metrics.progress_line(row, 10)
  assert "rejected 1 unmeasurable 2" in line
  assert line.endswith("| unscored 10.0% (transport 3, parse 1) critic unscored 25.0% "
                       "(refused 4) held-out unscored 10.0% (parse 1)")
  # Shares of 0 stay off the line; the unmeasurable count is always there.
  quiet = metrics.step_row(*_step(1, lost=Unscored(8)), evolver_s=0.5,
                           mounted=np.zeros((2, 3), bool))
  assert "unscored" not in metrics.progress_line(quiet, 10)
  assert "unmeasurable 0" in metrics.progress_line(quiet, 10)
  s = metrics.accumulate(metrics.new_summary(_heldout(10.0)), rec, elog, 0.5)
  s = metrics.accumulate(s, rec, elog, 0.5)
  assert s["updates"] == {"rubric": {"rejected": 2, "unmeasurable": 4}}
  assert s["unscored"] == {
      "learner": {"count": 8, "share": 0.1, "cells": 80,
                  "causes": {"transport": 6, "parse": 2}},
      "critic": {"count": 8, "share": 0.25, "cells": 32, "causes": {"refused": 8}}}
  table = metrics.summary_table(s)
  assert "unmeasurable    4" in table
  assert "critic 8/32 = 25.0% (refused 8)" in table
  assert "learner 8/80 = 10.0% (transport 6, parse 2)" in table
  assert "held-out start 0/4 = 0.0%" in table


def test_restore_last_row_appends_only_a_lost_row(tmp_path):
  p = tmp_path / "metrics.jsonl"
  p.write_text('{"step": 0}\n')
  metrics.restore_last_row(str(p), {"step": 1, "reward": 0.5})
  metrics.restore_last_row(str(p), {"step": 1, "reward": 0.5})   # already there: kept once
  assert [json.loads(l)["step"] for l in p.read_text().splitlines()] == [0, 1]
