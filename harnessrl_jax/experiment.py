"""`python -m harnessrl_jax.experiment --config=configs/testbed.py --workdir=DIR`: an arms x
seeds comparison, each (arm, seed) an ordinary training run.

Each run is `python -m harnessrl_jax.train --config=RUN_CONFIG:ARM --workdir=DIR/ARM/seedK`
with the grid's overrides (config.experiment.overrides, then every `--config.FIELD=VALUE`
given here outside the experiment section) and `--config.seed=K`, in a subprocess whose
output goes to DIR/ARM/seedK/train.log; the runs go one after another, one progress line
each. A rerun skips finished runs (summary.json) and lets the driver resume unfinished ones
from their last checkpoint. The runs share a persistent JAX compilation cache
(DIR/.jax_cache, unless JAX_COMPILATION_CACHE_DIR is set), so only the first one compiles.
Before any run starts, every run's config is built and checked as the driver would build
and check it: a bad override, or a run directory holding another experiment, is refused
with one `error:` line per problem and exit status 2.

Grid order (--task_index, --list, grid.json): seed-major, the arms in their configured
order within a seed: index = seed position x len(arms) + arm position, so the first
len(arms) runs already make a one-seed comparison.

After the whole grid it writes, from the finished runs (--report_only: only this):
  DIR/grid.json   the grid, the machine, and each run's status, wall time and attempts
                  (each attempt's machine and load average, from ARM/seedK/attempts.jsonl)
  DIR/report.md   the arms compared with the reference arm, with PNG plots and
                  report.json (eval/experiment_report.py)
--only and --task_index run one run and write neither (a SLURM job array runs them side by
side: launch/slurm_experiment.sh). A failed run is reported and the others go on; the exit
status is then 1.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import fcntl
import json
import os
import platform
import re
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any

from absl import flags
from ml_collections import config_flags

from harnessrl_jax import cli, run_files
from harnessrl_jax.data.splits import REPO_ROOT, resolve
from harnessrl_jax.errors import ConfigError, refuse

GRID = "grid.json"
LOG = "train.log"                 # a run's output, every attempt appended
ATTEMPTS = "attempts.jsonl"       # one row per attempt at a run (this module writes it)
LOCK = ".experiment.lock"         # held while a run's driver runs: one driver per run
CACHE = ".jax_cache"
ORDER = "seed-major: index = seed position x len(arms) + arm position"


@dataclasses.dataclass(frozen=True)
class Cell:
  """One (arm, seed) run of the grid."""

  arm: str
  seed: int

  @property
  def name(self) -> str:
    return f"{self.arm}/seed{self.seed}"

  def dir(self, workdir: str) -> str:
    return os.path.join(workdir, self.arm, f"seed{self.seed}")


@dataclasses.dataclass(frozen=True)
class Grid:
  """config.experiment, with the command line's changes, checked."""

  arms: tuple[str, ...]
  seeds: tuple[int, ...]
  reference: str
  truth: str                      # absolute path; "": no truth file
  overrides: tuple[str, ...]      # "dotted.field=value", applied in order to every run
  run_config: str                 # absolute path of the file loaded as FILE:ARM

  def cells(self) -> tuple[Cell, ...]:
    return tuple(Cell(a, s) for s in self.seeds for a in self.arms)


# ---- the grid


def _chosen(flag_values: Sequence[str] | None, section, name: str) -> tuple[tuple, str]:
  """The --NAME flag's values when given (empty too), else the section's; with where they
  come from, for a refusal."""
  if flag_values is None:
    return tuple(section[name]), f"config.experiment.{name} = {tuple(section[name])!r}"
  return tuple(flag_values), f"--{name}={','.join(flag_values)}"


def _seeds(values: Sequence[Any], where: str) -> tuple[int, ...]:
  """`values` as seeds; `where` names them (flag or field, with the value) in a refusal."""
  try:
    seeds = tuple(int(s) for s in values)
  except (TypeError, ValueError):
    raise ConfigError(f"{where}: expected integers, e.g. 0,1,2") from None
  if any(s < 0 for s in seeds):
    raise ConfigError(f"{where}: seeds are >= 0")
  return seeds


def _distinct(values: tuple, where: str) -> tuple:
  """`values` if it holds each at most once and at least one; `where` as in `_seeds`."""
  if not values:
    raise ConfigError(f"{where} is empty: name at least one")
  repeated = sorted({str(v) for v in values if values.count(v) > 1})
  if repeated:
    raise ConfigError(f"{where}: {', '.join(repeated)} repeated")
  return values


def _override_problem(override: str) -> str | None:
  field, eq, _ = override.partition("=")
  if not eq or not field.strip():
    return "expected 'dotted.field=value'"
  if field == "seed" or field.split(".")[0] == "experiment":
    return "the grid sets config.seed and reads config.experiment itself"
  return None


def grid_of(config, *, arms: Sequence[str] | None = None,
            seeds: Sequence[str] | None = None,
            forwarded: Sequence[str] = ()) -> Grid:
  """The grid of an experiment config; `arms` / `seeds` (the flags) replace the section's,
  `forwarded` overrides follow its overrides.

  Raises:
    ConfigError: naming the field or flag and the fix.
  """
  if "experiment" not in config:
    raise ConfigError("--config names a training config without an experiment section; "
                      "give the grid's file without :ARM, e.g. --config=configs/testbed.py")
  e = config.experiment
  arms, where = _chosen(arms, e, "arms")
  grid_arms = _distinct(arms, where)
  seeds, where = _chosen(seeds, e, "seeds")
  grid_seeds = _distinct(_seeds(seeds, where), where)
  overrides = (*e.overrides, *forwarded)
  problems = [f"config.experiment.overrides: {o!r}: {p}"
              for o in overrides if (p := _override_problem(str(o)))]
  run_config = resolve(e.run_config)
  if not os.path.isfile(run_config):
    problems.append(f"config.experiment.run_config = {e.run_config!r}: no such file "
                    f"({run_config})")
  if problems:
    raise ConfigError("\n".join(problems))
  return Grid(arms=grid_arms, seeds=grid_seeds, reference=str(e.reference),
              truth=resolve(e.truth) if e.truth else "",
              overrides=tuple(str(o) for o in overrides), run_config=run_config)


def forwarded_overrides(config_flag) -> tuple[str, ...]:
  """The `--config.FIELD=VALUE` overrides of the command line outside the experiment
  section, as "FIELD=VALUE" strings the driver's config flag parses back to the same value."""
  values = config_flags.get_override_values(config_flag)
  return tuple(f"{k}={v if isinstance(v, str) else repr(v)}" for k, v in values.items()
               if k.split(".")[0] != "experiment")


def select(cells: Sequence[Cell], *, only: str | None = None,
           task_index: int | None = None) -> tuple[Cell, ...]:
  """Every cell, or the one --only ("ARM/SEED", SEED as K or seedK) or --task_index names."""
  if task_index is not None:
    if not 0 <= task_index < len(cells):
      raise ConfigError(f"--task_index={task_index}: the grid has {len(cells)} runs, "
                        f"0-{len(cells) - 1} (order: {ORDER})")
    return (cells[task_index],)
  if only is not None:
    arm, _, seed = only.partition("/")
    seed = seed.removeprefix("seed")
    found = [c for c in cells if c.arm == arm and str(c.seed) == seed]
    if not found:
      raise ConfigError(f"--only={only}: not a run of the grid; one of "
                        f"{', '.join(c.name for c in cells)}")
    return tuple(found)
  return tuple(cells)


# ---- each run's config, as the driver builds it


def config_args(grid: Grid, cell: Cell) -> list[str]:
  """The driver's config flags for `cell` (the seed last: the grid's seed wins)."""
  return [f"--config={grid.run_config}:{cell.arm}",
          *(f"--config.{o}" for o in grid.overrides), f"--config.seed={cell.seed}"]


def train_argv(grid: Grid, cell: Cell, workdir: str) -> list[str]:
  return [sys.executable, "-m", "harnessrl_jax.train", *config_args(grid, cell),
          f"--workdir={cell.dir(workdir)}"]


def _unknown_field(error: BaseException, args: Sequence[str]) -> str:
  """The refusal of an override of a field that does not exist: ml_collections' KeyError /
  AttributeError quotes the key (its repr escaped) and may suggest the right one."""
  text = str(error).replace("\\n", "\n").replace("\\'", "'")
  hint = re.search(r'Did you mean "([\w.]+)"', text)
  hint = f" (did you mean {hint.group(1)}?)" if hint else ""
  for arg in args[1:]:
    field = arg.split("=", 1)[0].removeprefix("--config.")
    if any(f"'{part}'" in text for part in field.split(".")):
      return f"{arg}: unknown field {field}{hint}"
  return " ".join(text.split())


def build_config(grid: Grid, cell: Cell):
  """`cell`'s config, parsed from its driver flags the driver's way (ml_collections'
  config flag on a private flag set), then checked as the driver checks it before a model
  loads (config.validate without the devices).

  Raises:
    ConfigError: one line per problem, each naming the run.
  """
  # pylint: disable=g-import-not-at-top
  from harnessrl_jax.config import validate
  # pylint: enable=g-import-not-at-top
  args = ["train", *config_args(grid, cell)]
  values = flags.FlagValues()
  config_flags.DEFINE_config_file("config", None, flag_values=values, sys_argv=args)
  try:
    values(args)
  except (AttributeError, KeyError) as e:
    raise ConfigError(f"run {cell.name}: {_unknown_field(e, args)}") from None
  except Exception as e:  # pylint: disable=broad-except
    # the config file's own error ends the message (ml_collections appends its traceback)
    lines = [l.strip().strip("'\"") for l in str(e).splitlines() if l.strip()]
    raise ConfigError(f"run {cell.name}: {args[1]}: {lines[-1] if lines else repr(e)}"
                      ) from None
  try:
    validate(values.config)
  except ConfigError as e:
    raise ConfigError("\n".join(f"run {cell.name}: {l}" for l in str(e).splitlines())
                      ) from None
  return values.config


def preflight(grid: Grid, cells: Sequence[Cell], workdir: str) -> dict[Cell, Any]:
  """Every cell's config, checked, and refused where its run directory holds a run of
  another experiment (the driver's own guard, read-only)."""
  from harnessrl_jax.run.checkpoint import guard_config  # pylint: disable=g-import-not-at-top
  configs = {}
  for cell in cells:
    configs[cell] = build_config(grid, cell)
    try:
      guard_config(configs[cell], cell.dir(workdir))
    except ConfigError as e:
      raise ConfigError(f"run {cell.name}: {e}") from None
  return configs


# ---- the runs


def machine() -> dict[str, Any]:
  """The machine and its load now (runs here share machines; wall times need this)."""
  cpu = ""
  with contextlib.suppress(OSError):
    with open("/proc/cpuinfo", encoding="utf-8") as f:
      cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "")
  return {"host": socket.gethostname(), "cpu": cpu or platform.processor() or platform.machine(),
          "cores": os.cpu_count(), "usable_cores": len(os.sched_getaffinity(0)),
          "load_avg": [round(x, 2) for x in os.getloadavg()]}


def finished(run_dir: str) -> bool:
  return os.path.isfile(os.path.join(run_dir, run_files.SUMMARY))


def attempts(run_dir: str) -> list[dict[str, Any]]:
  path = os.path.join(run_dir, ATTEMPTS)
  if not os.path.exists(path):
    return []
  with open(path, encoding="utf-8") as f:
    return [json.loads(l) for l in f if l.strip()]


def run_env(workdir: str) -> dict[str, str]:
  """The environment of every run: this one, with the grid's compilation cache unless one
  is set (every small compile cached too: on a few CPU cores each costs seconds)."""
  env = dict(os.environ)
  env.setdefault("JAX_COMPILATION_CACHE_DIR", os.path.join(workdir, CACHE))
  env.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
  return env


@contextlib.contextmanager
def _sole(run_dir: str) -> Iterator[bool]:
  """Whether this process holds the run's lock (another experiment process may be running
  the same run: a SLURM task and a rerun by hand)."""
  with open(os.path.join(run_dir, LOCK), "w", encoding="utf-8") as f:
    try:
      fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      yield False
      return
    yield True


def _now() -> str:
  return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def run_one(argv: Sequence[str], run_dir: str, env: dict[str, str]) -> dict[str, Any] | None:
  """Runs the driver to the end (a fresh start or a resume); its attempt record, appended
  to ATTEMPTS, or None when another process holds the run."""
  os.makedirs(run_dir, exist_ok=True)
  with _sole(run_dir) as sole:
    if not sole:
      return None
    record = {"started": _now(), "argv": list(argv), "machine": machine()}
    start = time.monotonic()
    with open(os.path.join(run_dir, LOG), "a", encoding="utf-8") as log:
      log.write(f"==== {record['started']} {shlex.join(argv)}\n")
      log.flush()
      rc = subprocess.run(argv, cwd=REPO_ROOT, env=env, stdout=log,
                          stderr=subprocess.STDOUT, check=False).returncode
    record.update(wall_s=round(time.monotonic() - start, 2), returncode=rc,
                  load_avg_end=[round(x, 2) for x in os.getloadavg()],
                  finished=finished(run_dir))
  with open(os.path.join(run_dir, ATTEMPTS), "a", encoding="utf-8") as f:
    f.write(json.dumps(record) + "\n")
  return record


def _last_line(path: str) -> str:
  with contextlib.suppress(OSError):
    with open(path, encoding="utf-8", errors="replace") as f:
      lines = [l.strip() for l in f.readlines()[-50:] if l.strip()]
    return lines[-1] if lines else ""
  return ""


def run_cells(grid: Grid, cells: Sequence[Cell], workdir: str) -> list[str]:
  """Runs each unfinished cell in order, one progress line each; the failed ones' names."""
  env, failed = run_env(workdir), []
  for i, cell in enumerate(cells, 1):
    run_dir = cell.dir(workdir)
    head = f"[{i}/{len(cells)}] {cell.name}:"
    if finished(run_dir):
      print(f"{head} skipped (finished before)", flush=True)
      continue
    record = run_one(train_argv(grid, cell, workdir), run_dir, env)
    if record is None:
      print(f"{head} skipped: another process is running it ({run_dir}/{LOCK})", flush=True)
      failed.append(cell.name)
    elif record["finished"] and record["returncode"] == 0:
      print(f"{head} finished in {record['wall_s']:.1f} s (load {record['load_avg_end'][0]})",
            flush=True)
    else:
      log = os.path.join(run_dir, LOG)
      print(f"{head} FAILED (exit {record['returncode']}) after {record['wall_s']:.1f} s: "
            f"{_last_line(log)} (log: {log})", flush=True)
      failed.append(cell.name)
  return failed


# ---- what the whole grid writes


def status(run_dir: str) -> str:
  if finished(run_dir):
    return "finished"
  tries = attempts(run_dir)
  if tries and tries[-1]["returncode"] != 0:
    return "failed"
  return "unfinished" if os.path.isdir(run_dir) else "not started"


def grid_record(grid: Grid, workdir: str) -> dict[str, Any]:
  """grid.json: the grid, this machine, and every run with its status and attempts."""
  runs = []
  for index, cell in enumerate(grid.cells()):
    run_dir, tries = cell.dir(workdir), attempts(cell.dir(workdir))
    runs.append({"index": index, "arm": cell.arm, "seed": cell.seed,
                 "dir": os.path.relpath(run_dir, workdir), "status": status(run_dir),
                 "wall_s": round(sum(t["wall_s"] for t in tries), 2), "attempts": tries})
  return {**dataclasses.asdict(grid), "order": ORDER, "written": _now(),
          "machine": machine(), "runs": runs}


def report_problems(grid: Grid) -> list[str]:
  """What keeps the report from being written, checked before the runs that feed it."""
  problems = []
  if grid.reference not in grid.arms:
    problems.append(f"config.experiment.reference = {grid.reference!r} is not among the "
                    f"arms {grid.arms}: add it, or set --config.experiment.reference")
  if grid.truth and not os.path.isfile(grid.truth):
    problems.append(f"config.experiment.truth = {grid.truth!r}: no such file; set it to the "
                    "testbed's truth file, or to '' for a report without it")
  return problems


def write_outputs(grid: Grid, workdir: str, data) -> str | None:
  """Writes grid.json and the report over the finished runs (`data`: their config.data);
  the report's path, None when no run has finished."""
  os.makedirs(workdir, exist_ok=True)
  with open(os.path.join(workdir, GRID), "w", encoding="utf-8") as f:
    json.dump(grid_record(grid, workdir), f, indent=1)
  runs = [(c.arm, c.seed, c.dir(workdir)) for c in grid.cells() if finished(c.dir(workdir))]
  if not runs:
    return None
  # pylint: disable=g-import-not-at-top
  from harnessrl_jax.eval import experiment_report
  # pylint: enable=g-import-not-at-top
  return experiment_report.write_report(
      workdir, runs, reference=grid.reference, truth_path=grid.truth,
      heldout_path=resolve(data.heldout), train_path=resolve(data.train), arms=grid.arms)


# ---- the command


def define_flags() -> dict[str, Any]:
  """Defined only when this module runs as the program, so importing it next to train.py
  (which defines --config too) never clashes."""
  return {
      "config": config_flags.DEFINE_config_file(
          "config", None, "The grid's config file (with an experiment section), e.g. "
          "configs/testbed.py; --config.experiment.seeds=... etc. change the section, "
          "--config.FIELD=VALUE elsewhere goes to every run.", lock_config=True),
      "workdir": flags.DEFINE_string("workdir", None, "The grid's directory: one run per "
                                     "ARM/seedK under it, grid.json and report.md in it."),
      "arms": flags.DEFINE_list("arms", None, "Comma list; replaces experiment.arms."),
      "seeds": flags.DEFINE_list("seeds", None, "Comma list; replaces experiment.seeds."),
      "only": flags.DEFINE_string("only", None, "Run only ARM/SEED (e.g. harnessrl/0); no "
                                  "grid.json or report."),
      "task_index": flags.DEFINE_integer(
          "task_index", None, f"Run only the grid's N-th run ({ORDER}; a SLURM array's "
          "$SLURM_ARRAY_TASK_ID); no grid.json or report."),
      "report_only": flags.DEFINE_bool("report_only", False, "Run nothing; write grid.json "
                                       "and report.md from the runs there are."),
      "list": flags.DEFINE_bool("list", False, "Run nothing; print each run's index, name, "
                                "and status, one a line."),
  }


def main(argv, defined) -> None:
  """The grid of --config in --workdir; cli.run makes a ConfigError one line."""
  del argv
  f = {k: v.value for k, v in defined.items()}
  modes = [n for n in ("only", "task_index") if f[n] is not None] + [
      n for n in ("report_only", "list") if f[n]]
  if len(modes) > 1:
    raise ConfigError(f"{', '.join('--' + n for n in modes)}: give at most one")
  workdir = os.path.abspath(f["workdir"])
  grid = grid_of(f["config"], arms=f["arms"], seeds=f["seeds"],
                 forwarded=forwarded_overrides(flags.FLAGS["config"]))
  cells = select(grid.cells(), only=f["only"], task_index=f["task_index"])
  configs = preflight(grid, cells, workdir)
  if f["list"]:
    for cell in cells:
      print(f"{grid.cells().index(cell)} {cell.name} {status(cell.dir(workdir))}")
    return
  whole = f["only"] is None and f["task_index"] is None
  if whole:
    refuse(report_problems(grid))
  failed = []
  if not f["report_only"]:
    print(f"grid: {len(grid.arms)} arms x {len(grid.seeds)} seeds in {workdir}; here "
          f"{len(cells)} of its {len(grid.cells())} runs (compilation cache: "
          f"{run_env(workdir)['JAX_COMPILATION_CACHE_DIR']})", flush=True)
    failed = run_cells(grid, cells, workdir)
  if whole:
    path = write_outputs(grid, workdir, configs[cells[0]].data)
    print(f"{os.path.join(workdir, GRID)}; report: {path or 'none (no finished run)'}")
  if failed:
    print(f"{len(failed)} of {len(cells)} runs failed: {', '.join(failed)}", flush=True)
    sys.exit(1)


if __name__ == "__main__":
  _DEFINED = define_flags()
  flags.mark_flags_as_required(["config", "workdir"])
  cli.run(lambda argv: main(argv, _DEFINED))
