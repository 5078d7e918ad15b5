"""Run metrics: the step rows of metrics.jsonl, TensorBoard scalar event files, terminal
lines, the run summary (a value: every function returns a new one) and each step's groups
for the oracle analysis (eval/oracle.py's logged-groups format). Field and file names are
run_files'; eval/report.py reads them back.

TensorBoard's event format is written directly (TFRecord framing with masked CRC-32C
around `Event` protocol buffers holding scalar `Summary` values), so no TensorFlow or
tensorboard package is needed to write it; `tensorboard --logdir WORKDIR/tb` reads it. Not
tensorboardX: its package imports torch wherever torch is installed (requirements.txt has
it), +2.7 s and +210 MB in every training process, for what ~60 lines write. A resumed run
cuts the event files back to the checkpoint's steps (`truncate_events`), as it cuts
metrics.jsonl.
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

from harnessrl_jax import run_files as rf
from harnessrl_jax.eval import oracle
from harnessrl_jax.judges.score_matrix import Unscored
from harnessrl_jax.run_ledger import append_jsonl


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


def _text_value(tag: str, text: str) -> bytes:
  """A Summary.Value (tag=1, tensor=8, metadata=9) holding one string for TensorBoard's text
  plugin: TensorProto{dtype=1: DT_STRING (7), tensor_shape=2: scalar, string_val=8}."""
  tensor = _field(1, 0) + _varint(7) + _bytes_field(2, b"") + _bytes_field(8, text.encode())
  metadata = _bytes_field(1, _bytes_field(1, b"text"))   # plugin_data.plugin_name
  return _bytes_field(1, tag.encode()) + _bytes_field(8, tensor) + _bytes_field(9, metadata)


def event_bytes(wall_time: float, step: int, *, scalars: Mapping[str, float] | None = None,
                texts: Mapping[str, str] | None = None,
                file_version: str | None = None) -> bytes:
  """One serialised tensorflow.Event (wall_time=1, step=2, file_version=3, summary=5)."""
  out = _field(1, 1) + struct.pack("<d", wall_time) + _field(2, 0) + _varint(step)
  if file_version is not None:
    out += _bytes_field(3, file_version.encode())
  values = b""
  if scalars:
    values += b"".join(_bytes_field(1, _bytes_field(1, tag.encode()) + _field(2, 5)
                                    + struct.pack("<f", value))
                       for tag, value in scalars.items())
  if texts:
    values += b"".join(_bytes_field(1, _text_value(tag, text)) for tag, text in texts.items())
  if values:
    out += _bytes_field(5, values)
  return out


def record_bytes(data: bytes) -> bytes:
  """TFRecord framing: length, its masked CRC, the data, its masked CRC."""
  n = struct.pack("<Q", len(data))
  return n + struct.pack("<I", masked_crc(n)) + data + struct.pack("<I", masked_crc(data))


EVENTS_PREFIX = "events.out.tfevents."   # TensorBoard reads the files so named


class EventWriter:
  """Appends scalar summaries to one TensorBoard event file under `logdir`, created with
  the first of them (so that `truncate_events` before it leaves no empty file behind)."""

  def __init__(self, logdir: str):
    self.logdir = logdir
    name = f"{EVENTS_PREFIX}{int(time.time())}.{socket.gethostname()}.{os.getpid()}"
    self.path = os.path.join(logdir, name)

  def scalars(self, step: int, values: Mapping[str, float]) -> None:
    finite = {k: float(v) for k, v in values.items()
              if isinstance(v, (int, float)) and not isinstance(v, bool)
              and math.isfinite(float(v))}
    if not finite:
      return
    self._write(event_bytes(time.time(), step, scalars=finite))

  def texts(self, step: int, values: Mapping[str, str]) -> None:
    """Text summaries (the run's ledger and history heads at a checkpoint)."""
    self._write(event_bytes(time.time(), step, texts=values))

  def _write(self, event: bytes) -> None:
    records = b""
    if not os.path.exists(self.path):
      os.makedirs(self.logdir, exist_ok=True)
      records = record_bytes(event_bytes(time.time(), 0, file_version="brain.Event:2"))
    with open(self.path, "ab") as f:
      f.write(records + record_bytes(event))


def read_records(path: str) -> list[bytes]:
  """The payloads of a TFRecord file's complete records, up to the first that is cut short
  or fails its CRCs (where a kill stopped a write)."""
  with open(path, "rb") as f:
    data = f.read()
  out, i = [], 0
  while i + 12 <= len(data):
    head, (crc,) = data[i:i + 8], struct.unpack("<I", data[i + 8:i + 12])
    (n,) = struct.unpack("<Q", head)
    end = i + 12 + n + 4
    if crc != masked_crc(head) or end > len(data):
      break
    payload = data[i + 12:end - 4]
    if struct.unpack("<I", data[end - 4:end])[0] != masked_crc(payload):
      break
    out.append(payload)
    i = end
  return out


def event_step(payload: bytes) -> tuple[int, bool]:
  """(step, whether it holds a summary) of a serialised Event (`event_bytes`' fields)."""
  step, summary, i = 0, False, 0
  while i < len(payload):
    key, i = _read_varint(payload, i)
    num, wire = key >> 3, key & 7
    if wire == 0:
      value, i = _read_varint(payload, i)
      if num == 2:
        step = value
    elif wire == 2:
      n, i = _read_varint(payload, i)
      i += n
      summary = summary or num == 5
    else:   # fixed64 (wall_time) or fixed32
      i += {1: 8, 5: 4}[wire]
  return step, summary


def _read_varint(data: bytes, i: int) -> tuple[int, int]:
  value = shift = 0
  while True:
    b = data[i]
    value |= (b & 0x7F) << shift
    i, shift = i + 1, shift + 7
    if not b & 0x80:
      return value, i


def truncate_events(logdir: str, steps: int) -> set[int]:
  """Keeps the scalars of steps before `steps` in the event files under `logdir` (a
  resumed run drops what the interrupted run wrote after its checkpoint, as
  `truncate_jsonl` does for metrics.jsonl), and removes a file left without any; returns
  the steps whose scalars remain."""
  kept_steps: set[int] = set()
  names = sorted(os.listdir(logdir)) if os.path.isdir(logdir) else []
  for name in (n for n in names if n.startswith(EVENTS_PREFIX)):
    path = os.path.join(logdir, name)
    records = read_records(path)
    parsed = [(r, *event_step(r)) for r in records]
    kept = [r for r, step, scalars in parsed if not scalars or step < steps]
    scalar_steps = {step for _, step, scalars in parsed if scalars and step < steps}
    kept_steps |= scalar_steps
    if not scalar_steps:
      os.remove(path)
    elif len(kept) != len(records) or os.path.getsize(path) != sum(16 + len(r) for r in kept):
      tmp = path + ".tmp"
      with open(tmp, "wb") as f:
        f.writelines(record_bytes(r) for r in kept)
      os.replace(tmp, path)
  return kept_steps


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


def restore_last_row(path: str, row: Mapping[str, Any]) -> None:
  """On resume, after `truncate_jsonl`: appends `row` (the checkpoint's copy of its last
  step's row) unless the file's last row is that step's already, i.e. when the kill came
  between the checkpoint and the row's write. The copy lacks time/checkpoint_s (it was
  taken before the save)."""
  last = None
  if os.path.exists(path):
    with open(path, encoding="utf-8") as f:
      for line in f:
        last = line
  if last is None or json.loads(last).get(rf.STEP) != row[rf.STEP]:
    append_jsonl(path, [row])


class MetricsWriter:
  """metrics.jsonl (one row per step, flushed), TensorBoard scalars under tb/ and the
  step's groups in oracle_groups.jsonl (`python -m harnessrl_jax.eval --groups`)."""

  def __init__(self, workdir: str):
    self.path = os.path.join(workdir, rf.METRICS)
    self.groups_path = os.path.join(workdir, rf.GROUPS)
    self.events = EventWriter(os.path.join(workdir, rf.TENSORBOARD))

  def write_groups(self, groups: Sequence[Mapping[str, Any]]) -> None:
    """A step's groups (`group_rows`)."""
    if groups:
      append_jsonl(self.groups_path, groups)

  def write(self, row: Mapping[str, Any], groups: Sequence[Mapping[str, Any]] = ()) -> None:
    """One step: its complete metrics row (`step_row`), and its groups if given."""
    self.write_groups(groups)
    append_jsonl(self.path, [row])
    self._scalars(row)

  def cut_back(self, steps: int, last_row: Mapping[str, Any] | None = None) -> None:
    """On a start in an existing workdir, before the first `write`: keeps the TensorBoard
    scalars of the first `steps` steps only (none on a fresh start), and writes
    `last_row`'s (the checkpoint's copy of step `steps` - 1, as `restore_last_row` takes
    it) where the kill came before they were written. Each step then appears once."""
    kept = truncate_events(self.events.logdir, steps)
    if last_row is not None and int(last_row[rf.STEP]) not in kept:
      self._scalars(last_row)

  def heads(self, steps: int, heads: Mapping[str, str]) -> None:
    """The chain heads a checkpoint after `steps` completed steps stores, as TensorBoard
    text at step `steps` (a copy kept outside the workdir pins the history); a resume
    from that checkpoint drops them with the later steps and writes them again."""
    self.events.texts(int(steps), {f"audit/{k}": v for k, v in heads.items()})

  def _scalars(self, row: Mapping[str, Any]) -> None:
    """A row's numbers as TensorBoard scalars: nested fields as `field/key/...` tags."""
    flat = {}

    def add(prefix: str, v: Any) -> None:
      if isinstance(v, Mapping):
        for kk, vv in v.items():
          add(f"{prefix}/{kk}", vv)
      else:
        flat[prefix] = v

    for k, v in row.items():
      if k != rf.STEP:
        add(k, v)
    self.events.scalars(int(row[rf.STEP]), flat)


# ---- the run summary: a value; each function returns a new one and changes none


def new_summary(heldout_start: Mapping[str, Any]) -> dict[str, Any]:
  """The summary a run starts with (checkpointed with every save); `heldout_start` is the
  held-out result (eval/heldout.py) before any update."""
  return {rf.HELDOUT_START: dict(heldout_start), rf.HELDOUT_EVALS: [], rf.UPDATES: {},
          rf.LABELS: {}, rf.LABEL_SHARES: {},
          rf.COST: {rf.RL_S: 0.0, rf.EVOLVER_S: 0.0, rf.CRITIC_ROLLOUTS: 0,
                    rf.CRITIC_JUDGE_CELLS: 0},
          rf.UNSCORED: {rf.LEARNER: Unscored().to_json(), rf.CRITIC: Unscored().to_json()}}


def _plus(record: Mapping[str, Any], more: Mapping[str, Any]) -> dict[str, Any]:
  """The sum of two unscored records (run_files COUNT, SHARE, CELLS, CAUSES)."""
  return (Unscored.from_json(record) + Unscored.from_json(more)).to_json()


def _added(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
  return {k: a.get(k, 0) + b.get(k, 0) for k in sorted(set(a) | set(b))}


def _shares(counts: Mapping[str, int]) -> dict[str, float]:
  total = sum(counts.values())
  return {k: v / total for k, v in sorted(counts.items())} if total else {}


def _added_phases(total: Mapping[str, Mapping[str, int]],
                  step: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, int]]:
  """Per-phase position counts summed; a phase absent from a step keeps its total."""
  return {phase: _added(total.get(phase, {}), step.get(phase, {}))
          for phase in sorted({*total, *step})}


def accumulate(summary: Mapping[str, Any], rec, elog, evolver_s: float) -> dict[str, Any]:
  """The summary after one more step (`loop.StepRecord`, `loop.EvolveLog`)."""
  updates = dict(summary[rf.UPDATES])
  for route, counts in elog.verdicts.items():
    updates[route] = _added(updates.get(route, {}), counts)
  shares = dict(summary[rf.LABEL_SHARES])
  if elog.labels:   # the first and the latest step whose criteria the attributor labelled
    now = _shares(elog.labels)
    shares = {"first": shares.get("first", now), "last": now}
  cost = summary[rf.COST]
  critic = elog.accounting.get("critic", {})
  lost = summary[rf.UNSCORED]
  return {**summary, rf.UPDATES: updates,
          rf.UNSCORED: {rf.LEARNER: _plus(lost[rf.LEARNER], rec.judged.unscored.to_json()),
                        rf.CRITIC: _plus(lost[rf.CRITIC], elog.critic_unscored)},
          rf.LABELS: _added(summary[rf.LABELS], elog.labels), rf.LABEL_SHARES: shares,
          rf.COST: {rf.RL_S: cost[rf.RL_S] + sum(rec.timings.values()),
                    rf.POSITIONS: _added_phases(cost.get(rf.POSITIONS, {}),
                                                {**rec.positions, **elog.positions}),
                    rf.EVOLVER_S: cost[rf.EVOLVER_S] + evolver_s,
                    rf.CRITIC_ROLLOUTS: cost[rf.CRITIC_ROLLOUTS] + int(critic.get("rollouts", 0)),
                    rf.CRITIC_JUDGE_CELLS: cost[rf.CRITIC_JUDGE_CELLS]
                                           + int(critic.get("judge_cells", 0))}}


def with_heldout(summary: Mapping[str, Any], step: int, result: Mapping[str, Any], *,
                 final: bool) -> dict[str, Any]:
  """The summary with a held-out evaluation after `step` completed steps (`result` as
  eval/heldout.py gives it); the final one is also the run's heldout_end."""
  out = {**summary, rf.HELDOUT_EVALS: [*summary[rf.HELDOUT_EVALS],
                                       {rf.STEP: int(step), rf.SCORE: result[rf.SCORE],
                                        rf.UNSCORED: result[rf.UNSCORED]}]}
  if final:
    out[rf.HELDOUT_END] = dict(result)
  return out


def finished(summary: Mapping[str, Any], **fields: Any) -> dict[str, Any]:
  """The summary of a finished run: with exactly run_files.FINISHED's fields."""
  if set(fields) != set(rf.FINISHED):
    raise TypeError(f"finished() takes exactly {sorted(rf.FINISHED)}; got {sorted(fields)}")
  return {**summary, **fields}


# ---- one step's row and groups


def guidance_shares(mounted) -> dict[str, float]:
  """Per guidance field, the share of a step's drawn tasks that had it mounted (`mounted`:
  [drawn tasks, fields] bool, the rows of H_t's guidance_mask)."""
  m = np.asarray(mounted, bool)
  return {f: float(m[:, j].mean()) for j, f in enumerate(rf.GUIDANCE_FIELDS)}


def group_rows(rec) -> list[dict[str, Any]]:
  """A step's groups (`loop.StepRecord`) as lines of the oracle's logged-groups format:
  the task, its J responses and their training rewards (null where invalid)."""
  rewards = np.where(rec.judged.valid, rec.judged.rewards, np.nan)
  return [oracle.group_record(rec.step, task, rec.responses[t], rewards[t])
          for t, task in enumerate(rec.tasks)]


def step_row(rec, elog, *, evolver_s: float, mounted,
             heldout: Mapping[str, Any] | None = None,
             heldout_s: float | None = None,
             checkpoint_s: float | None = None) -> dict[str, Any]:
  """The complete metrics.jsonl row of a step (`loop.StepRecord`, `loop.EvolveLog`,
  `mounted` as in `guidance_shares`; `heldout`: the evaluation after it, if one ran, and
  `heldout_s` its wall time; `checkpoint_s`: the save after it, if one ran)."""
  verdicts: dict[str, int] = {}
  for counts in elog.verdicts.values():
    verdicts = _added(verdicts, counts)
  time_s = {**rec.timings, rf.EVOLVER_S: evolver_s}
  if heldout_s is not None:
    time_s[rf.HELDOUT_S] = heldout_s
  if checkpoint_s is not None:
    time_s[rf.CHECKPOINT_S] = checkpoint_s
  valid = rec.judged.valid
  row = {**rec.metrics, rf.STEP: rec.step, rf.POSITIONS: {**rec.positions, **elog.positions},
         rf.REWARD: float(rec.judged.rewards[valid].mean()) if valid.any() else None,
         rf.UNSCORED: rec.judged.unscored.to_json(),
         rf.CRITIC_UNSCORED: dict(elog.critic_unscored), rf.RESPONSE_LEN: rec.response_len,
         rf.TIME: time_s, rf.EVOLVER: verdicts, rf.LABELS: dict(elog.labels),
         rf.HARNESS: elog.digest[:16], rf.TASKS: list(rec.task_indices),
         rf.GUIDANCE: guidance_shares(mounted)}
  if heldout is not None:
    row[rf.HELDOUT_SCORE] = heldout[rf.SCORE]
    row[rf.HELDOUT_UNSCORED] = heldout[rf.UNSCORED]
  return row


# ---- the terminal


def _num(x, spec: str) -> str:
  return "-" if x is None else format(x, spec)


def unscored_text(record: Mapping[str, Any]) -> str:
  """An unscored record as "2.5% (transport 3, parse 1)"."""
  causes = ", ".join(f"{c} {n}" for c, n in record[rf.CAUSES].items())
  return f"{record[rf.SHARE]:.1%}" + (f" ({causes})" if causes else "")


# Row field of an unscored record -> its name on the progress line.
_UNSCORED_ON_LINE = ((rf.UNSCORED, "unscored"), (rf.CRITIC_UNSCORED, "critic unscored"),
                     (rf.HELDOUT_UNSCORED, "held-out unscored"))


def progress_line(row: Mapping[str, Any], total_steps: int) -> str:
  """A step's line on the terminal; the held-out score (points) where one was evaluated,
  and the share of judged cells without a verdict of each judged batch where it is not 0."""
  t, ev = row.get(rf.TIME, {}), row.get(rf.EVOLVER, {})
  line = (f"step {row[rf.STEP] + 1}/{total_steps} reward {_num(row.get(rf.REWARD), '.4f')} "
          f"loss {row.get('loss', float('nan')):.4g} | accepted {ev.get(rf.ACCEPTED, 0)} "
          f"rejected {ev.get(rf.REJECTED, 0)} unmeasurable {ev.get(rf.UNMEASURABLE, 0)} "
          f"| rollout {t.get(rf.ROLLOUT_S, 0):.1f}s "
          f"judge {t.get(rf.JUDGE_S, 0):.1f}s update {t.get(rf.UPDATE_S, 0):.1f}s "
          f"evolver {t.get(rf.EVOLVER_S, 0):.1f}s")
  if rf.CHECKPOINT_S in t:
    line += f" ckpt {t[rf.CHECKPOINT_S]:.1f}s"
  if rf.HELDOUT_SCORE in row:
    line += f" | held-out {_num(row[rf.HELDOUT_SCORE], '.2f')} pts"
    if rf.HELDOUT_S in t:
      line += f" in {t[rf.HELDOUT_S]:.1f}s"
  lost = [f"{name} {unscored_text(row[key])}" for key, name in _UNSCORED_ON_LINE
          if row.get(key) and row[key][rf.COUNT]]
  if lost:
    line += " | " + " ".join(lost)
  return line


def summary_table(summary: Mapping[str, Any]) -> str:
  """The final table printed at the end of a run (held-out scores in points)."""
  lines = ["", "== run summary =="]
  start, end = summary.get(rf.HELDOUT_START) or {}, summary.get(rf.HELDOUT_END) or {}
  lines.append(f"held-out seed-rubric score (points)   start "
               f"{_num(start.get(rf.SCORE), '.2f')}   end {_num(end.get(rf.SCORE), '.2f')}   "
               f"({summary.get(rf.STEPS)} steps)")
  s_dom, e_dom = start.get(rf.BY_DOMAIN, {}), end.get(rf.BY_DOMAIN, {})
  for d in sorted(set(s_dom) | set(e_dom)):
    lines.append(f"  {d:<28} start {_num(s_dom.get(d), '.2f')}   "
                 f"end {_num(e_dom.get(d), '.2f')}")
  for when in ("first", "last"):
    shares = summary.get(rf.LABEL_SHARES, {}).get(when) or {}
    if shares:
      lines.append(f"failure labels ({when} step)  " + "  ".join(
          f"{k} {100 * v:.1f}%" for k, v in sorted(shares.items())))
  updates = summary.get(rf.UPDATES, {})
  if updates:
    lines.append("evolver updates per interface:")
    for route in sorted(updates):
      v = updates[route]
      lines.append(f"  {route:<10} " + "   ".join(f"{k} {v.get(k, 0):>4}" for k in rf.VERDICTS))
  lost = summary.get(rf.UNSCORED) or {}
  heldout = [(when, r[rf.UNSCORED]) for when, r in (("start", start), ("end", end))
             if r.get(rf.UNSCORED)]
  if lost or heldout:
    lines.append("judged cells without a verdict   " + "   ".join(
        f"{name} {r[rf.COUNT]}/{r[rf.CELLS]} = {unscored_text(r)}"
        for name, r in [*sorted(lost.items()), *(
            (f"held-out {when}", r) for when, r in heldout)]))
  cost = summary.get(rf.COST, {})
  if cost:
    rl, ev = cost.get(rf.RL_S, 0.0), cost.get(rf.EVOLVER_S, 0.0)
    total = rl + ev or 1.0
    lines.append(f"cost (wall)   RL {rl:.1f}s ({100 * rl / total:.0f}%)   evolver {ev:.1f}s "
                 f"({100 * ev / total:.0f}%)   critic rollouts "
                 f"{cost.get(rf.CRITIC_ROLLOUTS, 0)}   critic judge cells "
                 f"{cost.get(rf.CRITIC_JUDGE_CELLS, 0)}")
    positions = cost.get(rf.POSITIONS) or {}
    if positions:
      lines.append("padding (share of token positions computed)   " + "   ".join(
          f"{phase.removesuffix('_s')} "
          f"{100 * (1 - n[rf.REAL] / max(n[rf.COMPUTED], 1)):.0f}% of {n[rf.COMPUTED]}"
          for phase, n in sorted(positions.items())))
  return "\n".join(lines)
