"""The records ledger of a run directory: one hash chain over every record the run writes.

Every line appended to a covered JSONL file (run_files.LEDGERED_LINES: the harness
history, metrics, candidates, attributions, oracle groups, held-out responses, config
changes), every whole file the run writes (run_files.LEDGERED_FILES: config.json,
summary.json) and every checkpoint's metadata gets one ledger entry, in the order they
were written, in WORKDIR/records_ledger.jsonl:

  {"file": name, "hash": hex, "kind": "line" | "file" | "checkpoint", "mac": MAC,
   "prev": hex, "sha256": hex of the record's bytes, "step": int (checkpoints only)}

  sha256  SHA-256 of the line's UTF-8 bytes without its newline ("line"), of the whole
          file ("file"), or of the checkpoint's metadata as canonical JSON without the
          two ledger fields ("checkpoint")
  prev    the previous entry's hash (GENESIS for the first)
  hash    MAC of canonical(the entry without "hash"), canonical as in harness/history.py;
          MAC "sha256" (keyless: SHA-256) or "hmac-sha256" (HMAC-SHA256 under the run's
          audit key, `key_from`)

Each checkpoint's metadata stores the entry count and head after its own entry
(run_files.LEDGER_LEN, LEDGER_HEAD). The ledger entry is written and fsynced *before*
its record, so a kill leaves at most the last entries of the ledger without their lines
(or with the last one cut short): `python -m harnessrl_jax.audit` tells that apart from
a deletion, which leaves a gap an entry later in the ledger refers past.

What the keyless chain proves, and what the key adds: docs/operational.md ("Auditing a
run"). A leaf module (the standard library, run_files and errors only), so every room may
append through it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from harnessrl_jax import run_files as rf
from harnessrl_jax.errors import HarnessError

GENESIS = "0" * 64
KEY_ENV = "HARNESSRL_AUDIT_KEY_FILE"   # names the key file when --audit_key_file is not given
MAC_PLAIN, MAC_HMAC = "sha256", "hmac-sha256"
LINE, FILE, CHECKPOINT = "line", "file", "checkpoint"


class LedgerError(HarnessError):
  """A ledger that cannot be used as asked (a wrong key, a ledger that does not end where a
  checkpoint says it does); the message is one line."""


def canonical(obj: Any) -> str:
  """The hashed text (harness/history.py's canonical JSON)."""
  return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                    allow_nan=False)


def sha256_text(text: str) -> str:
  return hashlib.sha256(text.encode("utf-8")).hexdigest()


def entry_hash(entry: Mapping[str, Any], key: bytes | None) -> str:
  """The MAC of an entry (every key but "hash"): HMAC-SHA256 under `key`, else SHA-256."""
  body = canonical({k: v for k, v in entry.items() if k != "hash"}).encode("utf-8")
  if key is None:
    return hashlib.sha256(body).hexdigest()
  return hmac.new(key, body, hashlib.sha256).hexdigest()


def meta_digest(meta: Mapping[str, Any]) -> str:
  """What a checkpoint's ledger entry pins: its metadata without the ledger fields."""
  return sha256_text(canonical({k: v for k, v in meta.items()
                                if k not in (rf.LEDGER_LEN, rf.LEDGER_HEAD)}))


def read_key(path: str, workdir: str | None = None) -> bytes:
  """The audit key in file `path` (its bytes, surrounding whitespace stripped). A key file
  inside the workdir is refused: whoever can rewrite the run could read it there."""
  path = os.path.abspath(path)
  if workdir is not None:
    inside = os.path.commonpath([os.path.realpath(path), os.path.realpath(workdir)])
    if inside == os.path.realpath(workdir):
      raise LedgerError(f"the audit key file {path} lies inside the workdir {workdir}; keep "
                        "it outside (whoever can rewrite the run could read it there)")
  try:
    with open(path, "rb") as f:
      key = f.read().strip()
  except OSError as e:
    raise LedgerError(f"the audit key file {path} cannot be read ({e.strerror})") from None
  if len(key) < 16:
    raise LedgerError(f"the audit key file {path} holds {len(key)} bytes; an audit key "
                      "needs at least 16 (e.g. `head -c 32 /dev/urandom | base64 > FILE`)")
  return key


def key_from(flag_path: str | None, workdir: str | None = None) -> bytes | None:
  """The audit key: the file `flag_path` names (--audit_key_file), else the one the
  environment variable KEY_ENV names, else None (a keyless ledger)."""
  path = flag_path or os.environ.get(KEY_ENV) or None
  return None if path is None else read_key(path, workdir)


class Ledger:
  """Appends entries to WORKDIR/records_ledger.jsonl (thread-safe); `count` entries so far,
  `head` the last one's hash."""

  def __init__(self, workdir: str, key: bytes | None = None):
    self.workdir = os.path.abspath(workdir)
    self.path = os.path.join(self.workdir, rf.LEDGER)
    self.key = key
    self.mac = MAC_PLAIN if key is None else MAC_HMAC
    self.head, self.count = GENESIS, 0
    self._lock = threading.RLock()

  def _append(self, entries: Sequence[dict[str, Any]]) -> None:
    lines = []
    for e in entries:
      e = {**e, "mac": self.mac, "prev": self.head}
      e["hash"] = entry_hash(e, self.key)
      self.head = e["hash"]
      lines.append(canonical(e) + "\n")
    with open(self.path, "a", encoding="utf-8") as f:
      f.writelines(lines)
      f.flush()
      os.fsync(f.fileno())
    self.count += len(entries)

  def lines(self, name: str, texts: Sequence[str]) -> None:
    """Entries for lines (without newlines) about to be appended to WORKDIR/name."""
    with self._lock:
      self._append([{"file": name, "kind": LINE, "sha256": sha256_text(t)} for t in texts])

  def whole_file(self, name: str, text: str) -> None:
    """An entry for WORKDIR/name about to be (re)written whole with `text`."""
    with self._lock:
      self._append([{"file": name, "kind": FILE, "sha256": sha256_text(text)}])

  def checkpoint(self, step: int, meta: dict[str, Any]) -> dict[str, Any]:
    """An entry pinning checkpoint `step`'s metadata; returns the metadata with the ledger
    count and head after that entry, to be saved as the checkpoint's."""
    with self._lock:
      self._append([{"file": f"{rf.CHECKPOINTS}/{int(step)}", "kind": CHECKPOINT,
                     "sha256": meta_digest(meta), "step": int(step)}])
      return {**meta, rf.LEDGER_LEN: self.count, rf.LEDGER_HEAD: self.head}

  def start_over(self) -> None:
    """A fresh start: no entries."""
    with self._lock:
      if os.path.exists(self.path):
        os.remove(self.path)
      self.head, self.count = GENESIS, 0

  def resume(self, meta: Mapping[str, Any]) -> None:
    """Cuts the ledger back to the checkpoint whose metadata is `meta` (what the
    interrupted run wrote after it goes, as its records do) and checks it ends at the
    checkpoint's head, under this ledger's key. Call `sync` once the record files are cut
    back too."""
    n, head = meta.get(rf.LEDGER_LEN), meta.get(rf.LEDGER_HEAD)
    if n is None:
      raise LedgerError(f"the checkpoint stores no {rf.LEDGER_HEAD} (saved before runs had a "
                        "records ledger): resume it with the code that wrote it, or start "
                        "a new --workdir")
    entries = read_entries(self.path)[0] if os.path.exists(self.path) else []
    if len(entries) < n or (n and entries[n - 1].get("hash") != head):
      raise LedgerError(f"{self.path} does not reach checkpoint {meta.get('step')}'s "
                        f"{rf.LEDGER_HEAD} {str(head)[:12]} at entry {n}; run `python -m "
                        f"harnessrl_jax.audit {self.workdir}`")
    if n:
      last = entries[n - 1]
      if last.get("mac") != self.mac:
        want = ("pass the run's --audit_key_file" if last.get("mac") == MAC_HMAC else
                "this run has no audit key: resume it without one")
        raise LedgerError(f"{self.path}: the ledger's entries are {last.get('mac')}, this "
                          f"start would write {self.mac}; {want}")
      if entry_hash(last, self.key) != head:
        raise LedgerError(f"{self.path}: entry {n} does not verify under the given audit "
                          "key (another key than the run's, or a forged ledger)")
    with open(self.path, encoding="utf-8") as f:
      kept = f.readlines()[:n]
    tmp = self.path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
      f.writelines(kept)
      f.flush()
      os.fsync(f.fileno())
    os.replace(tmp, self.path)
    with self._lock:
      self.head, self.count = head if n else GENESIS, n

  def sync(self, names: Iterable[str]) -> None:
    """After a resume's cut: each JSONL file in `names` must begin with the lines the
    ledger holds for it; lines it kept past them (rows of steps before the checkpoint that
    were written after it, e.g. the last step's metrics row) get their entries now."""
    entries = read_entries(self.path)[0] if os.path.exists(self.path) else []
    for name in names:
      want = [e["sha256"] for e in entries if e.get("kind") == LINE and e.get("file") == name]
      got = [sha256_text(t) for t in complete_lines(os.path.join(self.workdir, name))[0]]
      for i, sha in enumerate(want):
        if i >= len(got) or got[i] != sha:
          raise LedgerError(f"{os.path.join(self.workdir, name)} record {i + 1} is not the "
                            "one its ledger entry names; run `python -m harnessrl_jax.audit "
                            f"{self.workdir}`")
      extra = complete_lines(os.path.join(self.workdir, name))[0][len(want):]
      if extra:
        self.lines(name, extra)


def complete_lines(path: str) -> tuple[list[str], str | None]:
  """(the complete lines of a text file without their newlines, its cut-short last line or
  None); ([], None) for a file that is not there."""
  if not os.path.exists(path):
    return [], None
  with open(path, encoding="utf-8") as f:
    text = f.read()
  parts = text.split("\n")
  tail = parts.pop()
  return parts, (tail or None)


def read_entries(path: str) -> tuple[list[dict[str, Any]], str | None]:
  """(the ledger's complete entries, parsed but not checked; its cut-short last line)."""
  lines, tail = complete_lines(path)
  out = []
  for n, line in enumerate(lines, 1):
    try:
      obj = json.loads(line)
    except json.JSONDecodeError:
      obj = {"unreadable": line, "line": n}
    out.append(obj if isinstance(obj, dict) else {"unreadable": line, "line": n})
  return out, tail


# ---- the open ledgers, by workdir: writers find theirs from the path they append to

_OPEN: dict[str, Ledger] = {}


def register(ledger: Ledger) -> Ledger:
  """Makes `ledger` the one appends under its workdir go through (process 0 of a run)."""
  _OPEN[ledger.workdir] = ledger
  return ledger


def unregister(workdir: str) -> None:
  _OPEN.pop(os.path.abspath(workdir), None)


def ledger_of(path: str) -> Ledger | None:
  """The registered ledger of the workdir `path` lies in (None: nothing is ledgered)."""
  return _OPEN.get(os.path.dirname(os.path.abspath(path)))


def append_lines(path: str, texts: Sequence[str]) -> None:
  """Appends lines (without newlines) to `path`, flushed and fsynced; under a registered
  ledger their entries are written first, so a kill never leaves a line without one."""
  if not texts:
    return
  ledger = ledger_of(path)
  if ledger is not None:
    ledger.lines(os.path.basename(path), texts)
  with open(path, "a", encoding="utf-8") as f:
    f.writelines(t + "\n" for t in texts)
    f.flush()
    os.fsync(f.fileno())


def append_jsonl(path: str, rows: Sequence[Mapping[str, Any]]) -> None:
  """Appends `rows` to a JSONL file, one object a line (sorted keys, UTF-8 as is): the one
  writer of record rows (`append_lines`)."""
  append_lines(path, [json.dumps(r, ensure_ascii=False, sort_keys=True) for r in rows])


def write_text(path: str, text: str) -> None:
  """(Re)writes the file at `path` whole and atomically (a kill leaves the old file or the
  new one), its ledger entry first when its workdir has a registered ledger."""
  ledger = ledger_of(path)
  if ledger is not None:
    ledger.whole_file(os.path.basename(path), text)
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  tmp = path + ".tmp"
  with open(tmp, "w", encoding="utf-8") as f:
    f.write(text)
    f.flush()
    os.fsync(f.fileno())
  os.replace(tmp, path)
