"""The harness history: an append-only JSONL log of every applied operation, and replay.

One line per applied operation:

  {"step": int, "op": {...op_to_json...}, "digest_before": hex, "digest_after": hex,
   "measurement": {...}}

`measurement` is the evidence that justified the operation (the critic's Delta, band,
labels, ...), any JSON object. Lines are written in canonical JSON and flushed and
fsynced one by one, so a crash loses at most the line being written. Given H_0 and the
log, `replay` rebuilds H_T exactly and checks every digest on the way.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from harnessrl_jax.data.frozen import FrozenMap, freeze, thaw
from harnessrl_jax.errors import DataError, HarnessError
from harnessrl_jax.harness.digest import digest, dumps
from harnessrl_jax.harness.ops import Op, apply, op_from_json, op_to_json
from harnessrl_jax.harness.state import Harness


@dataclasses.dataclass(frozen=True)
class HistoryRecord:
  step: int
  op: Op
  digest_before: str
  digest_after: str
  measurement: FrozenMap = dataclasses.field(default_factory=FrozenMap)

  def __post_init__(self):
    object.__setattr__(self, "measurement", freeze(dict(self.measurement)))

  def to_json(self) -> dict[str, Any]:
    return {"step": self.step, "op": op_to_json(self.op),
            "digest_before": self.digest_before, "digest_after": self.digest_after,
            "measurement": thaw(self.measurement)}

  @classmethod
  def from_json(cls, obj: Mapping[str, Any]) -> HistoryRecord:
    keys = {"step", "op", "digest_before", "digest_after", "measurement"}
    if not isinstance(obj, Mapping) or set(obj) != keys:
      raise HarnessError(f"a history record needs exactly the keys {sorted(keys)}")
    if not isinstance(obj["step"], int) or not isinstance(obj["measurement"], Mapping):
      raise HarnessError("history record: step must be an int and measurement an object")
    return cls(obj["step"], op_from_json(obj["op"]), str(obj["digest_before"]),
               str(obj["digest_after"]), obj["measurement"])


def apply_logged(h: Harness, op: Op, *, step: int,
                 measurement: Mapping[str, Any] | None = None,
                 log: HistoryLog | None = None,
                 digest_before: str | None = None) -> tuple[Harness, HistoryRecord]:
  """Applies `op` and returns (H', its record), appending the record to `log` if given.

  `digest_before` may pass the known digest of `h` (the previous record's digest_after)
  to skip hashing it again. An illegal op raises before anything is written.
  """
  try:
    dumps(dict(measurement or {}))
  except (TypeError, ValueError) as e:
    raise HarnessError(f"measurement for {op.kind} is not plain JSON (no NaN, no numpy "
                       f"scalars): {e}") from None
  before = digest(h) if digest_before is None else digest_before
  out = apply(h, op)
  rec = HistoryRecord(step, op, before, digest(out), measurement or {})
  if log is not None:
    log.append(rec)
  return out, rec


class HistoryLog:
  """Append-only writer of history records to a JSONL file."""

  def __init__(self, path: str | os.PathLike):
    self.path = os.fspath(path)

  def append(self, record: HistoryRecord) -> None:
    line = dumps(record.to_json()) + "\n"
    with open(self.path, "a", encoding="utf-8") as f:
      f.write(line)
      f.flush()
      os.fsync(f.fileno())


def read_history(path: str | os.PathLike) -> list[HistoryRecord]:
  """All records of a history file; DataError naming FILE:LINE for malformed lines."""
  path = os.fspath(path)
  records, problems = [], []
  with open(path, encoding="utf-8") as f:
    for n, line in enumerate(f, 1):
      if not line.strip():
        problems.append(f"{path}:{n}: record: blank line in a history log")
        continue
      try:
        records.append(HistoryRecord.from_json(json.loads(line)))
      except (json.JSONDecodeError, HarnessError, TypeError) as e:
        problems.append(f"{path}:{n}: record: {e}")
  if problems:
    raise DataError(problems)
  return records


class ReplayDivergence(HarnessError):
  """A history record that does not replay; `step` is its training step."""

  def __init__(self, message: str, step: int):
    super().__init__(message)
    self.step = step


def replay(h0: Harness, records: Iterable[HistoryRecord], *, source: str = "history",
           after_record: Callable[[int, Harness], None] | None = None) -> Harness:
  """Applies `records` to H_0, checking each digest; returns H_T.

  Raises ReplayDivergence naming `source`:LINE (1-based record number) and the step of the
  first record whose digest_before or digest_after does not match, or whose operation is
  illegal. `after_record(n, H)` runs after the n-th record replays (the audit checks
  checkpoints there).
  """
  h, current = h0, digest(h0)
  for n, rec in enumerate(records, 1):
    where = f"{source}:{n} (step {rec.step}, {rec.op.kind})"
    if rec.digest_before != current:
      raise ReplayDivergence(f"{where}: digest_before {rec.digest_before[:12]} does not "
                             f"match the replayed harness {current[:12]}; the log diverges "
                             "here", rec.step)
    try:
      h = apply(h, rec.op)
    except HarnessError as e:
      raise ReplayDivergence(f"{where}: the logged operation is illegal on replay: {e}",
                             rec.step) from None
    current = digest(h)
    if rec.digest_after != current:
      raise ReplayDivergence(f"{where}: digest_after {rec.digest_after[:12]} does not match "
                             f"the replayed harness {current[:12]}; the log diverges here",
                             rec.step)
    if after_record is not None:
      after_record(n, h)
  return h
