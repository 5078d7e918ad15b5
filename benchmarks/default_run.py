"""The CPU default run (configs/default.py) at two commits, back to back on this machine, and
where each one's time went.

Each commit is checked out in a temporary git worktree and run with this checkout's Python
(`sys.executable`: the same packages for both) as `python -m harnessrl_jax.train
--config=configs/default.py --workdir=OUT/<label>`, with no persistent compilation cache
unless `--warm` (then each commit runs twice on a fresh cache: cold, then warm). Reported per
run, from its own files: the process's wall time, the phases its metrics.jsonl rows time
(rollout, judge, update, evolver, held-out evaluations where the rows carry them,
checkpoints) and what is left of the process's wall time (imports, model load, the first
evaluation, writing the report),
the token positions computed and their padding share, and the held-out score at every
evaluation. A run whose directory already holds a summary.json is read, not rerun.

  python benchmarks/default_run.py --commits BEFORE AFTER [--out DIR] [--warm]
      [--steps N]   (N < 24: a shorter run, same evaluation and checkpoint cadence)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PHASES = ("rollout_s", "judge_s", "update_s", "evolver_s", "heldout_s", "checkpoint_s")


def run_commit(commit: str, workdir: str, cache: str | None, steps: int | None) -> float:
  """Runs the default at `commit` into `workdir`; returns the process's wall seconds."""
  with tempfile.TemporaryDirectory(prefix="default-run-") as tmp:
    tree = os.path.join(tmp, "tree")
    subprocess.run(["git", "worktree", "add", "--detach", tree, commit], cwd=REPO,
                   check=True, capture_output=True)
    try:
      env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_PERSISTENT_CACHE")
             and k != "JAX_COMPILATION_CACHE_DIR"}
      if cache is not None:
        env["JAX_COMPILATION_CACHE_DIR"] = cache
        env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
      argv = [sys.executable, "-m", "harnessrl_jax.train", "--config=configs/default.py",
              f"--workdir={workdir}"]
      if steps:
        argv.append(f"--config.train.steps={steps}")
      start = time.perf_counter()
      with open(workdir + ".log", "w", encoding="utf-8") as log:
        subprocess.run(argv, cwd=tree, env=env, stdout=log, stderr=subprocess.STDOUT,
                       check=True)
      return time.perf_counter() - start
    finally:
      subprocess.run(["git", "worktree", "remove", "--force", tree], cwd=REPO,
                     check=False, capture_output=True)


def breakdown(workdir: str) -> dict:
  """Where a finished run's time went, from its metrics.jsonl and summary.json."""
  with open(os.path.join(workdir, "metrics.jsonl"), encoding="utf-8") as f:
    rows = [json.loads(line) for line in f if line.strip()]
  with open(os.path.join(workdir, "summary.json"), encoding="utf-8") as f:
    summary = json.load(f)
  sums = {k: sum(r["time"].get(k, 0.0) for r in rows) for k in PHASES}
  updates = sorted(r["time"]["update_s"] for r in rows)
  positions = summary["cost"].get("positions", {})
  # config.json is written once the run is set up (after the first evaluation), summary.json
  # last.
  span = (os.path.getmtime(os.path.join(workdir, "summary.json"))
          - os.path.getmtime(os.path.join(workdir, "config.json")))
  return {"steps": len(rows), "config_to_summary_s": span, "phases_s": sums,
          "update_median_s": updates[len(updates) // 2],
          "positions": dict(positions),
          "heldout": [summary["heldout_start"]["score"]]
                     + [e["score"] for e in summary.get("heldout_evals", [])]}


def table(runs: dict[str, dict]) -> str:
  labels = list(runs)
  out = ["| | " + " | ".join(labels) + " |", "|---" * (len(labels) + 1) + "|"]

  def line(name, values):
    out.append(f"| {name} | " + " | ".join(values) + " |")

  line("process wall (s)", [f"{runs[l]['process_s']:.0f}" if runs[l].get("process_s")
                            else "-" for l in labels])
  for k in PHASES:
    line(f"{k[:-2]}, sum (s)", [f"{runs[l]['phases_s'][k]:.1f}" if runs[l]["phases_s"][k]
                                else "-" for l in labels])
  line("rest of the process: imports, model load, first evaluation, writing (s)",
       [f"{runs[l]['process_s'] - sum(runs[l]['phases_s'].values()):.0f}"
        if runs[l].get("process_s") else "-" for l in labels])
  line("update, median step (s)", [f"{runs[l]['update_median_s']:.2f}" for l in labels])
  for phase in ("rollout_s", "update_s", "critic"):
    line(f"{phase} positions computed (padding)",
         [_positions(runs[l]["positions"].get(phase)) for l in labels])
  line("held-out (points)", [", ".join(f"{x:.2f}" for x in runs[l]["heldout"])
                             for l in labels])
  return "\n".join(out)


def _positions(p) -> str:
  if not p:
    return "-"
  return f"{p['computed']} ({1 - p['real'] / p['computed']:.0%})"


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--commits", nargs="+", required=True)
  parser.add_argument("--out", default=os.path.join(REPO, "runs", "default_run_bench"))
  parser.add_argument("--warm", action="store_true",
                      help="run each commit twice on a fresh compilation cache")
  parser.add_argument("--steps", type=int, default=0)
  args = parser.parse_args()
  from harnessrl_jax.experiment import machine  # pylint: disable=g-import-not-at-top

  os.makedirs(args.out, exist_ok=True)
  print("machine before:", machine(), flush=True)
  runs = {}
  for commit in args.commits:
    rev = subprocess.run(["git", "rev-parse", "--short", commit], cwd=REPO, check=True,
                         capture_output=True, text=True).stdout.strip()
    cache = os.path.join(args.out, f"{rev}.jax_cache") if args.warm else None
    for label in ([f"{rev} cold", f"{rev} warm"] if args.warm else [rev]):
      workdir = os.path.join(args.out, label.replace(" ", "_"))
      process_s = None
      if not os.path.isfile(os.path.join(workdir, "summary.json")):
        process_s = run_commit(rev, workdir, cache, args.steps)
      runs[label] = {"process_s": process_s, **breakdown(workdir)}
      print(label, json.dumps(runs[label]), "| machine:", machine(), flush=True)
  print(table(runs))


if __name__ == "__main__":
  main()
