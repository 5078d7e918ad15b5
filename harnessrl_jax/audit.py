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
Exit status 0 when everything matches; 1 on a failure; 2 for a run directory that cannot
be read.
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


def audit(run_dir: str) -> dict[str, Any]:
  """Raises AuditFailure at the first mismatch; returns counts when all match."""
  run_dir = os.path.abspath(run_dir)
  h = _h0(run_dir)
  history_path = os.path.join(run_dir, HISTORY)
  try:
    records = read_history(history_path) if os.path.exists(history_path) else []
  except BrokenHistory as e:
    raise AuditFailure(f"the hash chain breaks at line {e.line}: {e}") from None
  heads = [GENESIS] + [r.hash for r in records]   # heads[n]: after n records
  ckpts = RunCheckpoints(run_dir)
  steps = ckpts.steps()
  metas = {s: ckpts.meta(s) for s in steps}
  ckpts.close()
  at_len: dict[int, list[int]] = {}
  for s, m in metas.items():
    n = int(m["history_len"])
    if n > len(records):
      raise AuditFailure(f"checkpoint {s} counts {n} history records; {history_path} "
                         f"holds only {len(records)}: lines were cut from its end")
    at_len.setdefault(n, []).append(s)
  intact = [0]   # records up to the last record count whose checkpoints all matched

  def check_checkpoints(n: int, h_now) -> None:
    d = harness.digest(h_now)
    for s in at_len.get(n, ()):
      if metas[s]["harness_digest"] != d:
        raise AuditFailure(f"checkpoint {s}: harness digest {metas[s]['harness_digest'][:12]} "
                           f"!= replay {d[:12]} after {n} history records (step {s})")
      stored = metas[s].get(HISTORY_HEAD)
      if stored is None:
        raise AuditFailure(f"checkpoint {s} stores no {HISTORY_HEAD} (written before "
                           "histories were chained): its history cannot be checked")
      if stored != heads[n]:
        agree = [o for o in at_len[n] if metas[o].get(HISTORY_HEAD) == heads[n]]
        if agree:
          where = (f"its metadata was changed (checkpoint {agree[0]}, after the same "
                   "records, holds the chain's head)")
        elif n == 0:
          where = "its metadata was changed (before any record the head is GENESIS)"
        else:
          where = (f"{history_path} lines {intact[0] + 1}..{n} were rewritten since it was "
                   "saved (their hashes recomputed)")
        raise AuditFailure(f"checkpoint {s}: {HISTORY_HEAD} {stored[:12]} != the chain's "
                           f"{heads[n][:12]} after {n} records: {where}")
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
                                                    if steps else 0)}


def _plain(obj):
  return json.loads(json.dumps(obj))


def main(argv: Sequence[str]) -> int:
  """The command line; `argv` includes the program name, as `sys.argv` does."""
  parser = argparse.ArgumentParser(prog="python -m harnessrl_jax.audit", description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("run_dir", metavar="RUN_DIR", help="a training run's --workdir")
  args = parser.parse_args(argv[1:])
  try:
    out = audit(args.run_dir)
  except AuditFailure as e:
    print(f"audit FAILED: {e}", file=sys.stderr)
    return 1
  except HarnessError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  tail = (f"; {out['uncheckpointed_records']} records after the last checkpoint (covered "
          "by the chain alone)"
          if out["uncheckpointed_records"] else "")
  print(f"audit OK: {out['records']} history records chained and replayed, checkpoints "
        f"{out['checkpoints']} match, final harness {out['digest']}, chain head "
        f"{out['head']}{tail}")
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv))
