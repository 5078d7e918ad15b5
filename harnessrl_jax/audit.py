"""`python -m harnessrl_jax.audit RUN_DIR`: checks a run's harness history end to end.

Rebuilds H_0 from the run's stored config (WORKDIR/config.json: data and harness
sections), replays WORKDIR/harness_history.jsonl record by record checking every
digest_before / digest_after, checks that each kept checkpoint's harness digest is the
replay's after that checkpoint's number of records, and that the last checkpoint's full
canonical harness equals the replayed one. Exit status 0 when everything matches; 1 with
the first divergent step otherwise (2 for a run directory that cannot be read).
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
from harnessrl_jax.checkpoint import RunCheckpoints
from harnessrl_jax.data.splits import load_split
from harnessrl_jax.errors import DataError, HarnessError
from harnessrl_jax.harness.history import ReplayDivergence, read_history, replay
from harnessrl_jax.run_files import CONFIG, HISTORY


class AuditFailure(HarnessError):
  """The history or a checkpoint disagrees with the replay."""


def _h0(run_dir: str) -> harness.Harness:
  path = os.path.join(run_dir, CONFIG)
  if not os.path.exists(path):
    raise HarnessError(f"{run_dir}: no {CONFIG}; not a training run directory")
  with open(path, encoding="utf-8") as f:
    cfg = ml_collections.ConfigDict(json.load(f)["config"])
  tasks = load_split(cfg.data.train, tuple(cfg.data.domains), field="train")
  return harness.from_tasks(tasks, cfg.harness)


def audit(run_dir: str) -> dict[str, Any]:
  """Raises AuditFailure at the first mismatch; returns counts when all match."""
  run_dir = os.path.abspath(run_dir)
  h = _h0(run_dir)
  history_path = os.path.join(run_dir, HISTORY)
  try:
    records = read_history(history_path) if os.path.exists(history_path) else []
  except DataError as e:
    raise AuditFailure(f"the history does not parse: {e}") from None
  ckpts = RunCheckpoints(run_dir)
  steps = ckpts.steps()
  metas = {s: ckpts.meta(s) for s in steps}
  ckpts.close()
  at_len = {}
  for s, m in metas.items():
    at_len.setdefault(int(m["history_len"]), []).append(s)

  def check_checkpoints(n: int, h_now) -> None:
    d = harness.digest(h_now)
    for s in at_len.get(n, ()):
      if metas[s]["harness_digest"] != d:
        raise AuditFailure(f"checkpoint {s}: harness digest {metas[s]['harness_digest'][:12]} "
                           f"!= replay {d[:12]} after {n} history records (step {s})")

  check_checkpoints(0, h)
  try:
    h = replay(h, records, source=history_path, after_record=check_checkpoints)
  except ReplayDivergence as e:
    raise AuditFailure(f"first divergent step {e.step}: {e}") from None
  current = harness.digest(h)
  if steps:
    last = metas[steps[-1]]
    if int(last["history_len"]) > len(records):
      raise AuditFailure(f"checkpoint {steps[-1]} counts {last['history_len']} history "
                         f"records; {history_path} holds only {len(records)}")
    if int(last["history_len"]) == len(records) and last["harness"] != _plain(
        harness.canonical(h)):
      raise AuditFailure(f"checkpoint {steps[-1]}: its stored harness differs from the "
                         "replayed one although the digests agree")
  return {"records": len(records), "checkpoints": steps, "digest": current,
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
  tail = (f"; {out['uncheckpointed_records']} records after the last checkpoint"
          if out["uncheckpointed_records"] else "")
  print(f"audit OK: {out['records']} history records replayed, checkpoints "
        f"{out['checkpoints']} match, final harness {out['digest']}{tail}")
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv))
