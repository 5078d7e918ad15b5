"""TensorBoard event bytes against the published CRC-32C check value and a hand-encoded
protobuf; JSONL truncation on resume; the summary table; mounted-guidance shares and the
logged groups the oracle analysis reads."""

import json
import os
import struct
import types

import numpy as np

from harnessrl_jax import metrics
from harnessrl_jax.data.loader import load_tasks
from harnessrl_jax.eval import oracle

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
      "steps": 3, "heldout_start": {"reward": 0.1, "by_domain": {"medical": 0.1}},
      "heldout_end": {"reward": 0.3, "by_domain": {"medical": 0.3}},
      "label_shares": {"first": {"blind": 0.5, "agree": 0.5}},
      "updates": {"sampling": {"accepted": 2, "rejected": 1}},
      "cost": {"rl_s": 30.0, "evolver_s": 10.0, "critic_rollouts": 4}})
  for s in ("start 0.1000", "end 0.3000", "blind 50.0%", "sampling", "accepted    2",
            "RL 30.0s (75%)", "evolver 10.0s (25%)"):
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
  groups = oracle.read_groups(str(tmp_path / metrics.GROUPS))
  assert [(g.step, g.task_id, g.responses) for g in groups] == [
      (3, tasks[0].id, ("a", "b", "c")), (3, tasks[1].id, ("d", "e", "f"))]
  np.testing.assert_array_equal(groups[0].rewards, [0.5, np.nan, 1.0])   # invalid: left out
  np.testing.assert_array_equal(groups[1].rewards, [0.0, 0.75, 0.5])


def test_progress_line_shows_heldout_reward_only_when_evaluated():
  row = {"step": 4, "reward": 0.25, "loss": 0.01, "evolver": {"accepted": 2, "rejected": 1},
         "time": {"rollout_s": 1.0, "update_s": 2.0}}
  line = metrics.progress_line(row, 10)
  assert line.startswith("step 5/10 reward 0.2500") and "accepted 2 rejected 1" in line
  assert "held-out" not in line
  assert metrics.progress_line({**row, "heldout_reward": 0.4375}, 10).endswith(
      "| held-out 0.4375")
