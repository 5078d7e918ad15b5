"""Run metrics: JSONL rows, TensorBoard scalar event files, terminal lines, the summary,
and each step's groups for the oracle analysis (eval/oracle.py's logged-groups format).

TensorBoard's event format is written directly (TFRecord framing with masked CRC-32C
around `Event` protocol buffers holding scalar `Summary` values), so no TensorFlow or
tensorboard package is needed to write it; `tensorboard --logdir WORKDIR/tb` reads it.
"""

from __future__ import annotations

import json
import math
import os
import socket
import struct
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from harnessrl_jax.eval import oracle
from harnessrl_jax.harness.state import FIELDS

METRICS = "metrics.jsonl"
GROUPS = "oracle_groups.jsonl"


def _crc32c_table() -> list[int]:
  poly, table = 0x82F63B78, []   # Castagnoli, reflected
  for i in range(256):
    c = i
    for _ in range(8):
      c = (c >> 1) ^ poly if c & 1 else c >> 1
    table.append(c)
  return table


_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
  c = 0xFFFFFFFF
  for b in data:
    c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
  return c ^ 0xFFFFFFFF


def masked_crc(data: bytes) -> int:
  c = crc32c(data)
  return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(n: int) -> bytes:
  out = bytearray()
  n &= (1 << 64) - 1
  while True:
    b = n & 0x7F
    n >>= 7
    if n:
      out.append(b | 0x80)
    else:
      out.append(b)
      return bytes(out)


def _field(num: int, wire: int) -> bytes:
  return _varint((num << 3) | wire)


def _bytes_field(num: int, payload: bytes) -> bytes:
  return _field(num, 2) + _varint(len(payload)) + payload


def event_bytes(wall_time: float, step: int, *, scalars: Mapping[str, float] | None = None,
                file_version: str | None = None) -> bytes:
  """One serialised tensorflow.Event (wall_time=1, step=2, file_version=3, summary=5)."""
  out = _field(1, 1) + struct.pack("<d", wall_time) + _field(2, 0) + _varint(step)
  if file_version is not None:
    out += _bytes_field(3, file_version.encode())
  if scalars:
    values = b"".join(_bytes_field(1, _bytes_field(1, tag.encode()) + _field(2, 5)
                                   + struct.pack("<f", value))
                      for tag, value in scalars.items())
    out += _bytes_field(5, values)
  return out


def record_bytes(data: bytes) -> bytes:
  """TFRecord framing: length, its masked CRC, the data, its masked CRC."""
  n = struct.pack("<Q", len(data))
  return n + struct.pack("<I", masked_crc(n)) + data + struct.pack("<I", masked_crc(data))


class EventWriter:
  """Appends scalar summaries to one TensorBoard event file under `logdir`."""

  def __init__(self, logdir: str):
    os.makedirs(logdir, exist_ok=True)
    name = f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}.{os.getpid()}"
    self.path = os.path.join(logdir, name)
    with open(self.path, "ab") as f:
      f.write(record_bytes(event_bytes(time.time(), 0, file_version="brain.Event:2")))

  def scalars(self, step: int, values: Mapping[str, float]) -> None:
    finite = {k: float(v) for k, v in values.items()
              if isinstance(v, (int, float)) and not isinstance(v, bool)
              and math.isfinite(float(v))}
    if finite:
      with open(self.path, "ab") as f:
        f.write(record_bytes(event_bytes(time.time(), step, scalars=finite)))


def truncate_jsonl(path: str, keep) -> None:
  """Keeps the complete lines of a JSONL file whose object satisfies `keep` (a resumed run
  drops what the interrupted run wrote after its last checkpoint)."""
  if not os.path.exists(path):
    return
  kept = []
  with open(path, encoding="utf-8") as f:
    for line in f:
      if not line.endswith("\n"):
        break   # a line cut by the kill
      try:
        obj = json.loads(line)
      except json.JSONDecodeError:
        break
      if keep(obj):
        kept.append(line)
  tmp = path + ".tmp"
  with open(tmp, "w", encoding="utf-8") as f:
    f.writelines(kept)
  os.replace(tmp, path)


def truncate_lines(path: str, n: int) -> None:
  """Keeps the first n lines of a file (the harness history at a checkpoint)."""
  if not os.path.exists(path):
    return
  with open(path, encoding="utf-8") as f:
    lines = f.readlines()
  if len(lines) == n and all(l.endswith("\n") for l in lines):
    return
  tmp = path + ".tmp"
  with open(tmp, "w", encoding="utf-8") as f:
    f.writelines(lines[:n])
  os.replace(tmp, path)


def _append_jsonl(path: str, rows: Sequence[Mapping[str, Any]]) -> None:
  with open(path, "a", encoding="utf-8") as f:
    f.writelines(json.dumps(row, sort_keys=True) + "\n" for row in rows)
    f.flush()


class MetricsWriter:
  """metrics.jsonl (one row per step, flushed), TensorBoard scalars under tb/ and the
  step's groups in oracle_groups.jsonl (`python -m harnessrl_jax.evaluate --groups`)."""

  def __init__(self, workdir: str):
    self.path = os.path.join(workdir, METRICS)
    self.groups_path = os.path.join(workdir, GROUPS)
    self.events = EventWriter(os.path.join(workdir, "tb"))

  def write(self, row: Mapping[str, Any], groups: Sequence[Mapping[str, Any]] = ()) -> None:
    """One step: its metrics row and its groups (`group_rows`)."""
    if groups:
      _append_jsonl(self.groups_path, groups)
    _append_jsonl(self.path, [row])
    flat = {}
    for k, v in row.items():
      if k == "step":
        continue
      if isinstance(v, Mapping):
        flat.update({f"{k}/{kk}": vv for kk, vv in v.items()})
      else:
        flat[k] = v
    self.events.scalars(int(row["step"]), flat)


def new_summary(heldout_start: Mapping[str, Any]) -> dict[str, Any]:
  """The running summary a run starts with (checkpointed with every save)."""
  return {"heldout_start": dict(heldout_start), "heldout_evals": [], "updates": {},
          "labels": {}, "label_shares": {},
          "cost": {"rl_s": 0.0, "evolver_s": 0.0, "critic_rollouts": 0,
                   "critic_judge_cells": 0}}


def _shares(counts: Mapping[str, int]) -> dict[str, float]:
  total = sum(counts.values())
  return {k: v / total for k, v in sorted(counts.items())} if total else {}


def accumulate(summary: Mapping[str, Any], rec, elog, evolver_s: float) -> dict[str, Any]:
  """The summary after one more step (`loop.StepRecord`, `loop.EvolveLog`); a new dict."""
  out = json.loads(json.dumps(summary))
  for route, counts in elog.verdicts.items():
    upd = out["updates"].setdefault(route, {})
    for verdict, n in counts.items():
      upd[verdict] = upd.get(verdict, 0) + n
  if elog.labels:
    out["label_shares"].setdefault("first", _shares(elog.labels))
    out["label_shares"]["last"] = _shares(elog.labels)
    for k, n in elog.labels.items():
      out["labels"][k] = out["labels"].get(k, 0) + n
  cost = out["cost"]
  cost["rl_s"] += sum(rec.timings.values())
  cost["evolver_s"] += evolver_s
  critic = elog.accounting.get("critic", {})
  cost["critic_rollouts"] += int(critic.get("rollouts", 0))
  cost["critic_judge_cells"] += int(critic.get("judge_cells", 0))
  return out


def guidance_shares(mounted) -> dict[str, float]:
  """Per guidance field, the share of a step's drawn tasks that had it mounted (`mounted`:
  [drawn tasks, FIELDS] bool, the rows of H_t's guidance_mask): the report's
  guidance/<field> columns."""
  m = np.asarray(mounted, bool)
  return {f: float(m[:, j].mean()) for j, f in enumerate(FIELDS)}


def group_rows(rec) -> list[dict[str, Any]]:
  """A step's groups (`loop.StepRecord`) as lines of the oracle's logged-groups format:
  the task, its J responses and their training rewards (null where invalid)."""
  rewards = np.where(rec.judged.valid, rec.judged.rewards, np.nan)
  return [oracle.group_record(rec.step, task, rec.responses[t], rewards[t])
          for t, task in enumerate(rec.tasks)]


def step_row(rec, elog, evolver_s: float, mounted) -> dict[str, Any]:
  """One metrics.jsonl row of a step (`mounted` as in `guidance_shares`)."""
  verdicts: dict[str, int] = {}
  for counts in elog.verdicts.values():
    for verdict, n in counts.items():
      verdicts[verdict] = verdicts.get(verdict, 0) + n
  valid = rec.judged.valid
  return {"step": rec.step,
          "reward": float(rec.judged.rewards[valid].mean()) if valid.any() else None,
          "unscored": rec.judged.unscored, "response_len": rec.response_len, **rec.metrics,
          "time": {**rec.timings, "evolver_s": evolver_s}, "evolver": verdicts,
          "labels": dict(elog.labels), "harness": elog.digest[:16],
          "tasks": list(rec.task_indices), "guidance": guidance_shares(mounted)}


def progress_line(row: Mapping[str, Any], total_steps: int) -> str:
  t = row.get("time", {})
  ev = row.get("evolver", {})
  return (f"step {row['step'] + 1}/{total_steps} reward {row['reward']:.4f} "
          f"loss {row.get('loss', float('nan')):.4g} | accepted {ev.get('accepted', 0)} "
          f"rejected {ev.get('rejected', 0)} | rollout {t.get('rollout_s', 0):.1f}s "
          f"judge {t.get('judge_s', 0):.1f}s update {t.get('update_s', 0):.1f}s "
          f"evolver {t.get('evolver_s', 0):.1f}s ckpt {t.get('checkpoint_s', 0):.1f}s"
          + (f" | held-out {row['heldout_reward']:.4f}" if row.get("heldout_reward") is not None
             else ""))


def _fmt(x) -> str:
  return "-" if x is None else f"{x:.4f}" if isinstance(x, float) else str(x)


def summary_table(summary: Mapping[str, Any]) -> str:
  """The final table printed at the end of a run."""
  lines = ["", "== run summary =="]
  start, end = summary.get("heldout_start") or {}, summary.get("heldout_end") or {}
  lines.append(f"held-out seed-rubric reward   start {_fmt(start.get('reward'))}   "
               f"end {_fmt(end.get('reward'))}   ({summary.get('steps')} steps)")
  for d in sorted(set(start.get("by_domain", {})) | set(end.get("by_domain", {}))):
    lines.append(f"  {d:<28} start {_fmt(start.get('by_domain', {}).get(d))}   "
                 f"end {_fmt(end.get('by_domain', {}).get(d))}")
  for when in ("first", "last"):
    shares = summary.get("label_shares", {}).get(when) or {}
    if shares:
      lines.append(f"failure labels ({when} step)  " + "  ".join(
          f"{k} {100 * v:.1f}%" for k, v in sorted(shares.items())))
  updates = summary.get("updates", {})
  if updates:
    lines.append("evolver updates per interface:")
    for route in sorted(updates):
      v = updates[route]
      lines.append(f"  {route:<10} accepted {v.get('accepted', 0):>4}   rejected "
                   f"{v.get('rejected', 0):>4}   noop {v.get('noop', 0):>4}")
  cost = summary.get("cost", {})
  if cost:
    rl, ev = cost.get("rl_s", 0.0), cost.get("evolver_s", 0.0)
    total = rl + ev or 1.0
    lines.append(f"cost (wall)   RL {rl:.1f}s ({100 * rl / total:.0f}%)   evolver {ev:.1f}s "
                 f"({100 * ev / total:.0f}%)   critic rollouts {cost.get('critic_rollouts', 0)}"
                 f"   critic judge cells {cost.get('critic_judge_cells', 0)}")
  return "\n".join(lines)
