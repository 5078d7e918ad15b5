"""`python -m harnessrl_jax.audit RUN_DIR`: checks a run's harness history end to end.

In order, stopping at the first failure:
  1. the hash chain of WORKDIR/harness_history.jsonl (harness/history.py says how each
     record's hash is computed): every field of every record, and the lines' order; a
     failure names the first line that breaks it;
  2. the replay: H_0 rebuilt from the run's stored config (WORKDIR/config.json: data and
     harness sections), each record's op applied and its digest_before / digest_after
     checked; a failure names the first divergent step and line;
  3. each kept checkpoint against the replay after its number of records: its harness
     digest and its stored chain head (a rewrite that recomputed the hashes after some
     line shows here, as the lines between two checkpoints), and the last checkpoint's
     full canonical harness; a checkpoint that counts more records than the file holds
     (lines cut from its end) fails before the replay.
  4. the records ledger (run_ledger.py), which covers every record file the run writes
     (run_files.WORKDIR_FILES): its chain (under --audit_key_file, every entry an HMAC
     under that key), each kept checkpoint's stored ledger head and the entry pinning its
     metadata, then every line of every ledgered JSONL file and every whole file against
     its entries: an edit, insertion, deletion, reorder or truncation anywhere fails,
     naming the file and the record. Entries at the very end of the ledger whose lines are
     missing or cut short are a kill during a write (resume repairs it): reported as such,
     not as a failure.
Exit status 0 when everything matches; 1 on a failure; 2 for a run directory that cannot
be read (or a keyed ledger audited without its key). What this proves, with and without a
key: docs/operational.md, "Auditing a run".
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

import ml_collections

from harnessrl_jax import harness
from harnessrl_jax.run.checkpoint import RunCheckpoints
from harnessrl_jax.data.splits import load_split
from harnessrl_jax.errors import HarnessError
from harnessrl_jax.harness.history import (GENESIS, BrokenHistory, ReplayDivergence,
                                           read_history, replay)
from harnessrl_jax import run_files as rf
from harnessrl_jax import run_ledger as rl
from harnessrl_jax.run_files import CONFIG, CONFIG_TREE, HISTORY, HISTORY_HEAD


class AuditFailure(HarnessError):
  """The history or a checkpoint disagrees with the replay."""


def _h0(run_dir: str) -> harness.Harness:
  path = os.path.join(run_dir, CONFIG)
  if not os.path.exists(path):
    raise HarnessError(f"{run_dir}: no {CONFIG}; not a training run directory")
  with open(path, encoding="utf-8") as f:
    cfg = ml_collections.ConfigDict(json.load(f)[CONFIG_TREE])
  tasks = load_split(cfg.data.train, tuple(cfg.data.domains), field="train")
  return harness.from_tasks(tasks, cfg.harness)


def audit(run_dir: str, key: bytes | None = None) -> dict[str, Any]:
  """Raises AuditFailure at the first mismatch; returns counts when all match. `key`: the
  run's audit key (run_ledger.read_key), for a keyed ledger."""
  run_dir = os.path.abspath(run_dir)
  h = _h0(run_dir)
  history_path = os.path.join(run_dir, HISTORY)
  records = _read_records(history_path)
  heads = [GENESIS] + [r.hash for r in records]   # heads[n]: after n records
  steps, metas, at_len = _checkpoint_metadata(run_dir, len(records), history_path)
  intact = [0]   # records up to the last record count whose checkpoints all matched

  def check_checkpoints(n: int, h_now) -> None:
    d = harness.digest(h_now)
    for s in at_len.get(n, ()):
      if metas[s]["harness_digest"] != d:
        raise AuditFailure(f"checkpoint {s}: harness digest {metas[s]['harness_digest'][:12]} "
                           f"!= replay {d[:12]} after {n} history records (step {s})")
      _check_head(s, n, metas, at_len, heads, intact[0], history_path)
    if n in at_len:
      intact[0] = n

  check_checkpoints(0, h)
  try:
    h = replay(h, records, source=history_path, after_record=check_checkpoints)
  except ReplayDivergence as e:
    raise AuditFailure(f"first divergent step {e.step}: {e}") from None
  current = harness.digest(h)
  if steps:
    last = metas[steps[-1]]
    if int(last["history_len"]) == len(records) and last["harness"] != _plain(
        harness.canonical(h)):
      raise AuditFailure(f"checkpoint {steps[-1]}: its stored harness differs from the "
                         "replayed one although the digests agree")
  return {"records": len(records), "checkpoints": steps, "digest": current,
          "head": heads[-1],
          "uncheckpointed_records": len(records) - (int(metas[steps[-1]]["history_len"])
                                                    if steps else 0),
          **audit_ledger(run_dir, metas, key)}


def _read_records(history_path: str) -> list:
  """The history's records, their hash chain checked line by line."""
  try:
    return read_history(history_path) if os.path.exists(history_path) else []
  except BrokenHistory as e:
    raise AuditFailure(f"the hash chain breaks at line {e.line}: {e}") from None


def _checkpoint_metadata(run_dir: str, num_records: int, history_path: str):
  """(steps, step -> metadata, history length -> the steps checkpointed after it)."""
  ckpts = RunCheckpoints(run_dir)
  steps = ckpts.steps()
  metas = {s: ckpts.meta(s) for s in steps}
  ckpts.close()
  at_len: dict[int, list[int]] = {}
  for s, m in metas.items():
    n = int(m["history_len"])
    if n > num_records:
      raise AuditFailure(f"checkpoint {s} counts {n} history records; {history_path} "
                         f"holds only {num_records}: lines were cut from its end")
    at_len.setdefault(n, []).append(s)
  return steps, metas, at_len


def _check_head(s: int, n: int, metas, at_len, heads, intact: int, history_path: str) -> None:
  """Checkpoint `s`, saved after `n` records, stores the chain's head; when it does not,
  says which was changed: its metadata, or the records since the last intact checkpoint."""
  stored = metas[s].get(HISTORY_HEAD)
  if stored is None:
    raise AuditFailure(f"checkpoint {s} stores no {HISTORY_HEAD} (written before "
                       "histories were chained): its history cannot be checked")
  if stored == heads[n]:
    return
  agree = [o for o in at_len[n] if metas[o].get(HISTORY_HEAD) == heads[n]]
  if agree:
    where = (f"its metadata was changed (checkpoint {agree[0]}, after the same "
             "records, holds the chain's head)")
  elif n == 0:
    where = "its metadata was changed (before any record the head is GENESIS)"
  else:
    where = (f"{history_path} lines {intact + 1}..{n} were rewritten since it was "
             "saved (their hashes recomputed)")
  raise AuditFailure(f"checkpoint {s}: {HISTORY_HEAD} {stored[:12]} != the chain's "
                     f"{heads[n][:12]} after {n} records: {where}")


def audit_ledger(run_dir: str, metas: dict[int, dict[str, Any]],
                 key: bytes | None) -> dict[str, Any]:
  """Step 4 of the module docstring; returns {"ledger": entries or None (a run from before
  ledgers), "ledger_head", "crash": notes on a kill's cut-short tail, "keyed"}."""
  path = os.path.join(run_dir, rf.LEDGER)
  claimed = sorted(s for s, m in metas.items() if rf.LEDGER_HEAD in m)
  if not os.path.exists(path):
    if claimed:
      raise AuditFailure(f"{rf.LEDGER} is missing, but checkpoint {claimed[0]} stores its "
                         f"{rf.LEDGER_HEAD}: it was deleted")
    if key is not None:
      raise AuditFailure(f"no {rf.LEDGER}: nothing the audit key could verify (a run "
                         "written before ledgers, or one whose ledger was deleted)")
    return {"ledger": None, "crash": [], "keyed": False}
  entries, tail = rl.read_entries(path)
  prev = rl.GENESIS
  for i, e in enumerate(entries, 1):
    where = f"{rf.LEDGER} entry {i}"
    if "unreadable" in e:
      raise AuditFailure(f"{where}: not a JSON object: the ledger was edited")
    if e.get("mac") == rl.MAC_HMAC and key is None:
      raise HarnessError(f"{path}: the ledger is keyed (HMAC-SHA256): pass the run's key "
                         f"with --audit_key_file or ${rl.KEY_ENV}")
    if key is not None and e.get("mac") != rl.MAC_HMAC:
      raise AuditFailure(f"{where} ({e.get('file')}): not an HMAC under the audit key "
                         f"({e.get('mac')}): the ledger was written or rewritten without "
                         "the key")
    if e.get("prev") != prev:
      raise AuditFailure(f"{where} ({e.get('file')}): prev is not the hash of entry {i - 1}: "
                         "ledger entries were deleted, inserted or moved before it")
    if rl.entry_hash(e, key) != e.get("hash"):
      why = ("another key than the run's, or a forged entry" if key is not None
             else "the entry was edited")
      raise AuditFailure(f"{where} ({e.get('file')}): its hash does not verify: {why}")
    prev = e["hash"]
  crash = []
  if tail is not None:
    crash.append(f"{rf.LEDGER}: its last line is cut short (a kill while writing it)")
  for s in sorted(metas):
    _check_checkpoint(s, metas[s], entries)
  known = set(rf.LEDGERED_LINES) | set(rf.LEDGERED_FILES)
  for i, e in enumerate(entries, 1):
    if e.get("kind") != rl.CHECKPOINT and e.get("file") not in known:
      raise AuditFailure(f"{rf.LEDGER} entry {i} names {e.get('file')!r}, a file the run "
                         "does not write")
  for name in rf.LEDGERED_LINES:
    note = _check_lines(run_dir, name, entries)
    if note:
      crash.append(note)
  for name in rf.LEDGERED_FILES:
    note = _check_whole(run_dir, name, entries)
    if note:
      crash.append(note)
  return {"ledger": len(entries), "ledger_head": prev, "crash": crash,
          "keyed": key is not None}


def _check_checkpoint(step: int, meta: dict[str, Any], entries: list[dict]) -> None:
  """A kept checkpoint against the ledger: its head, and the entry pinning its metadata."""
  if rf.LEDGER_HEAD not in meta:
    raise AuditFailure(f"checkpoint {step} stores no {rf.LEDGER_HEAD} although the run has a "
                       "ledger: its metadata was changed")
  n, head = meta[rf.LEDGER_LEN], meta[rf.LEDGER_HEAD]
  if not isinstance(n, int) or not 0 < n <= len(entries):
    raise AuditFailure(f"checkpoint {step} counts {n} ledger entries; {rf.LEDGER} holds "
                       f"{len(entries)}: entries were cut from its end")
  e = entries[n - 1]
  if e.get("hash") != head:
    raise AuditFailure(f"checkpoint {step}: {rf.LEDGER_HEAD} {str(head)[:12]} != ledger entry "
                       f"{n}'s {str(e.get('hash'))[:12]}: the ledger was rewritten up to it, "
                       "or the checkpoint's metadata was changed")
  if e.get("kind") != rl.CHECKPOINT or e.get("step") != step:
    raise AuditFailure(f"checkpoint {step}: ledger entry {n} is not its own "
                       f"({e.get('file')}): its metadata was changed")
  if e.get("sha256") != rl.meta_digest(meta):
    raise AuditFailure(f"checkpoint {step}: its metadata differs from what ledger entry {n} "
                       f"pins ({rf.HISTORY_HEAD}, harness, summary, ...): it was changed "
                       "since it was saved")


def _is_tail(indices: list[int], total: int) -> bool:
  """Whether ledger positions `indices` (0-based) are the ledger's last entries."""
  return indices == list(range(total - len(indices), total))


def _record(lines: list[str], i: int) -> str:
  """" (step S)" of line i when it is a row with a step, else ""."""
  try:
    return f" (step {json.loads(lines[i])['step']})"
  except (IndexError, ValueError, KeyError, TypeError):
    return ""


def _check_lines(run_dir: str, name: str, entries: list[dict]) -> str | None:
  """A ledgered JSONL file against its line entries; a note when a kill cut its tail."""
  idx = [i for i, e in enumerate(entries)
         if e.get("kind") == rl.LINE and e.get("file") == name]
  want = [entries[i].get("sha256") for i in idx]
  lines, partial = rl.complete_lines(os.path.join(run_dir, name))
  got = [rl.sha256_text(l) for l in lines]
  if got == want and partial is None:
    return None
  i = next((k for k, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
  if i == len(want):
    what = "a line cut short" if i == len(got) else "a complete line"
    raise AuditFailure(f"{name} line {i + 1}{_record(lines, i)}: {what} without a ledger entry: "
                       "a record inserted or appended after the run wrote its last")
  if i == len(got):   # the file ends before its entries do
    if _is_tail(idx[i:], len(entries)):
      cut = " (the first cut short)" if partial is not None else ""
      return (f"{name}: records {i + 1}..{len(want)}{cut} have ledger entries but no "
              "complete line, and those are the ledger's last entries: a kill while "
              "writing them (a crash, not an edit; resume drops them)")
    what = "cut short" if partial is not None else "missing"
    raise AuditFailure(f"{name} record {i + 1}: {what}, though ledger entry {idx[i] + 1} "
                       "names it and later entries follow: records were deleted or the "
                       "file truncated")
  if sorted(got) == sorted(want):
    raise AuditFailure(f"{name} record {i + 1}{_record(lines, i)}: line {i + 1} holds record "
                       f"{want.index(got[i]) + 1}: the records were reordered")
  if i + 1 < len(want) and got[i] == want[i + 1]:
    raise AuditFailure(f"{name} record {i + 1}: deleted (line {i + 1} holds record {i + 2})")
  if i + 1 < len(got) and got[i + 1] == want[i]:
    raise AuditFailure(f"{name} line {i + 1}{_record(lines, i)}: inserted (no ledger entry; "
                       f"record {i + 1} follows it)")
  raise AuditFailure(f"{name} record {i + 1}{_record(lines, i)}: edited (its SHA-256 differs "
                     f"from ledger entry {idx[i] + 1})")


def _check_whole(run_dir: str, name: str, entries: list[dict]) -> str | None:
  """A whole file the run writes against its last entry; a note when a kill came between
  the entry and the write."""
  idx = [i for i, e in enumerate(entries)
         if e.get("kind") == rl.FILE and e.get("file") == name]
  path = os.path.join(run_dir, name)
  if not idx:
    if os.path.exists(path):
      raise AuditFailure(f"{name}: not in the ledger: written or replaced after the run")
    return None
  text = None
  if os.path.exists(path):
    with open(path, encoding="utf-8") as f:
      text = f.read()
  if text is not None and rl.sha256_text(text) == entries[idx[-1]].get("sha256"):
    return None
  # The write is atomic (run_ledger.write_text): a kill after its entry leaves the file as
  # the entry before named it (or absent), never other content.
  before = entries[idx[-2]].get("sha256") if len(idx) > 1 else None
  now = None if text is None else rl.sha256_text(text)
  if _is_tail(idx[-1:], len(entries)) and now == before:
    return (f"{name}: its last ledger entry is the ledger's last and the file is still "
            f"{'absent' if text is None else 'the version before'}: a kill while writing it "
            "(a crash, not an edit)")
  what = "deleted" if text is None else "edited"
  raise AuditFailure(f"{name}: {what} since the run wrote it (ledger entry {idx[-1] + 1} "
                     "names other content)")


def _plain(obj):
  return json.loads(json.dumps(obj))


def main(argv: Sequence[str]) -> int:
  """The command line; `argv` includes the program name, as `sys.argv` does."""
  parser = argparse.ArgumentParser(prog="python -m harnessrl_jax.audit", description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("run_dir", metavar="RUN_DIR", help="a training run's --workdir")
  parser.add_argument("--audit_key_file", default=None,
                      help="the run's audit key (a keyed ledger); default: the file "
                           f"${rl.KEY_ENV} names, if set")
  args = parser.parse_args(argv[1:])
  try:
    key = rl.key_from(args.audit_key_file, args.run_dir)
    out = audit(args.run_dir, key)
  except AuditFailure as e:
    print(f"audit FAILED: {e}", file=sys.stderr)
    return 1
  except HarnessError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  if out["ledger"] is None:
    covered = (f"; no {rf.LEDGER}: the other record files are NOT covered (a run written "
               "before ledgers)")
  else:
    covered = (f"; {out['ledger']} ledger entries ({'HMAC under the key' if out['keyed'] else 'keyless'}) "
               f"match every record file, ledger head {out['ledger_head']}")
  print(f"audit OK: {out['records']} history records chained and replayed, checkpoints "
        f"{out['checkpoints']} match, final harness {out['digest']}, chain head "
        f"{out['head']}{covered}")
  for note in out["crash"]:
    print(f"crash-truncated (not tampering): {note}")
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv))
