"""The harness history: an append-only, hash-chained JSONL log of every applied operation,
and replay.

One line per applied operation, canonical JSON (below) so that keys come sorted:

  {"digest_after": hex, "digest_before": hex, "hash": hex, "measurement": {...},
   "op": {...op_to_json...}, "prev": hex, "step": int}

`measurement` is the evidence that justified the operation (the critic's Delta, band, the
attributor's label, ...; a "source" for the run's own ops), any JSON object. Lines are
flushed and fsynced one by one, so a crash loses at most the line being written. Given H_0
and the log, `replay` rebuilds H_T exactly and checks every digest on the way.

The hash chain (tamper evidence for every field, not only the harness states):
  canonical(x) = json.dumps(x, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                            allow_nan=False)                   (Python's json module)
  hash_n       = SHA-256 hex of canonical(line n's JSON object without its "hash" key),
                 encoded as UTF-8; the object includes "prev"
  prev_n       = hash_{n-1}, and prev_1 = GENESIS (64 zeros)
so editing any field of line n breaks hash_n, and deleting, inserting or moving a line
breaks the next line's prev. For a line written here and not edited since, the hashed
text is the line itself with its `"hash":"<hex>",` member cut out. The driver stores the
chain head (the last hash) with each checkpoint (train.py) and checks it on resume;
`python -m harnessrl_jax.audit` checks the chain, the heads and the replay. A rewrite that
recomputes every hash after line n is caught by the first checkpoint head past n, and
every line also enters the run's records ledger (run_ledger.py), which pins each
checkpoint's metadata and, under an audit key, cannot be recomputed without the key.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from harnessrl_jax.data.frozen import FrozenMap, freeze, thaw
from harnessrl_jax.errors import DataError, HarnessError
from harnessrl_jax.harness.digest import digest, dumps
from harnessrl_jax.harness.ops import Op, apply, op_from_json, op_to_json
from harnessrl_jax.harness.state import Harness
from harnessrl_jax.run_ledger import append_lines

GENESIS = "0" * 64   # the `prev` of a history's first record
_FIELDS = frozenset({"step", "op", "digest_before", "digest_after", "measurement"})
_CHAIN = frozenset({"prev", "hash"})


def record_hash(obj: Mapping[str, Any]) -> str:
  """The chain hash of a record's JSON object (module docstring): every key but "hash"."""
  body = {k: v for k, v in obj.items() if k != "hash"}
  return hashlib.sha256(dumps(body).encode("utf-8")).hexdigest()


@dataclasses.dataclass(frozen=True)
class HistoryRecord:
  """One applied operation; `prev` and `hash` are set once a `HistoryLog` chains it (or
  when it is read back from one), None on a record never logged."""

  step: int
  op: Op
  digest_before: str
  digest_after: str
  measurement: FrozenMap = dataclasses.field(default_factory=FrozenMap)
  prev: str | None = None
  hash: str | None = None

  def __post_init__(self):
    object.__setattr__(self, "measurement", freeze(dict(self.measurement)))

  def to_json(self) -> dict[str, Any]:
    out = {"step": self.step, "op": op_to_json(self.op),
           "digest_before": self.digest_before, "digest_after": self.digest_after,
           "measurement": thaw(self.measurement)}
    if self.hash is not None:
      out.update(prev=self.prev, hash=self.hash)
    return out

  def chained(self, prev: str) -> HistoryRecord:
    """This record as the successor of the record whose hash is `prev`."""
    body = {**dataclasses.replace(self, prev=None, hash=None).to_json(), "prev": prev}
    return dataclasses.replace(self, prev=prev, hash=record_hash(body))

  @classmethod
  def from_json(cls, obj: Mapping[str, Any]) -> HistoryRecord:
    """A record from its JSON object, with or without its chain fields (not checked
    here: `read_history` checks the chain)."""
    if not isinstance(obj, Mapping) or not (
        set(obj) == _FIELDS or set(obj) == _FIELDS | _CHAIN):
      raise HarnessError(f"a history record needs exactly the keys {sorted(_FIELDS)}, "
                         f"and {sorted(_CHAIN)} once logged")
    if not isinstance(obj["step"], int) or not isinstance(obj["measurement"], Mapping):
      raise HarnessError("history record: step must be an int and measurement an object")
    if "hash" in obj and not all(isinstance(obj[k], str) for k in _CHAIN):
      raise HarnessError("history record: prev and hash must be hex strings")
    return cls(obj["step"], op_from_json(obj["op"]), str(obj["digest_before"]),
               str(obj["digest_after"]), obj["measurement"], obj.get("prev"),
               obj.get("hash"))


def apply_logged(h: Harness, op: Op, *, step: int,
                 measurement: Mapping[str, Any] | None = None,
                 log: HistoryLog | None = None,
                 digest_before: str | None = None) -> tuple[Harness, HistoryRecord]:
  """Applies `op` and returns (H', its record), appending the record to `log` if given
  (the record returned is then the chained one, with its hash).

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
    rec = log.append(rec)
  return out, rec


class HistoryLog:
  """Append-only writer of chained history records to a JSONL file.

  `head` is the hash of the last record appended, the `prev` of the next: GENESIS for an
  empty file. A driver that cuts the file back to a checkpoint calls `reset(head)` with
  the checkpoint's stored head. With `write=False` (processes other than 0 of a
  multi-process run) nothing is written but the head advances alike, so every process
  holds the same head.
  """

  def __init__(self, path: str | os.PathLike, *, head: str = GENESIS, write: bool = True):
    self.path = os.fspath(path)
    self.head = head
    self.write = write

  def reset(self, head: str = GENESIS) -> None:
    """Continues the chain after the record whose hash is `head`."""
    self.head = head

  def append(self, record: HistoryRecord) -> HistoryRecord:
    """Chains `record` to the head, writes it and returns the chained record."""
    rec = record.chained(self.head)
    if self.write:   # through the run's records ledger, when its workdir has one
      append_lines(self.path, [dumps(rec.to_json())])
    self.head = rec.hash
    return rec


class BrokenHistory(DataError):
  """The first line of a history file that does not parse or does not continue the hash
  chain; `line` is its 1-based number (the lines before it are intact)."""

  def __init__(self, path: str, line: int, message: str):
    super().__init__([f"{path}:{line}: {message}"])
    self.line = line


def _no_duplicate_keys(pairs):
  keys = [k for k, _ in pairs]
  if len(set(keys)) != len(keys):
    raise HarnessError("a key appears twice in one object")
  return dict(pairs)


def _chain_problem(obj: Mapping[str, Any], prev: str) -> str | None:
  """Why the record object `obj` does not follow the record whose hash is `prev`."""
  if "hash" not in obj:
    return ("no hash: the record is not part of a hash chain (edited, or written before "
            "histories were chained)")
  if obj["prev"] != prev:
    return (f"prev {str(obj['prev'])[:12]} is not the hash of the line before "
            f"({prev[:12]}): a line was deleted, inserted or moved before this one")
  if record_hash(obj) != obj["hash"]:
    return (f"hash {str(obj['hash'])[:12]} does not match the line's content: the line "
            "was edited")
  return None


def read_history(path: str | os.PathLike) -> list[HistoryRecord]:
  """All records of a history file, checking the hash chain from GENESIS.

  Raises BrokenHistory (a DataError) naming PATH:LINE of the first line that is blank,
  malformed or breaks the chain.
  """
  path = os.fspath(path)
  records, prev = [], GENESIS
  with open(path, encoding="utf-8") as f:
    for n, line in enumerate(f, 1):
      if not line.strip():
        raise BrokenHistory(path, n, "a blank line in a history log")
      try:
        obj = json.loads(line, object_pairs_hook=_no_duplicate_keys)
        rec = HistoryRecord.from_json(obj)
      except (json.JSONDecodeError, HarnessError, TypeError) as e:
        raise BrokenHistory(path, n, f"record: {e}") from None
      problem = _chain_problem(obj, prev)
      if problem is not None:
        raise BrokenHistory(path, n, f"(step {rec.step}, {rec.op.kind}): {problem}")
      records.append(rec)
      prev = rec.hash
  return records


def head_of(records: Iterable[HistoryRecord]) -> str:
  """The chain head after `records` (read by `read_history`): GENESIS for none."""
  head = GENESIS
  for rec in records:
    head = rec.hash
  return head


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
