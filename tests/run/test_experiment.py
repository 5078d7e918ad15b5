"""The arms x seeds runner (`python -m harnessrl_jax.experiment`): the grid's order and
selection, each run's config built the driver's way, and the CI miniature grid end to end:
configs/testbed.py's harnessrl and grpo_static arms x seeds 0 and 1 x 2 steps of the tiny
model on 8 training and 4 held-out bundled tasks, through real driver subprocesses sharing
the conftest compilation cache. One --task_index run first, then the whole grid (which skips
that run), then the whole grid again (which skips all four); bad input is refused with one
`error:` line and exit status 2."""

import dataclasses
import json
import os
import subprocess
import sys
import time

import pytest

from harnessrl_jax import experiment
from harnessrl_jax.config import validate
from harnessrl_jax.data.splits import resolve
from harnessrl_jax.errors import ConfigError
from tests.conftest import tiny_driver_data
from repo_paths import REPO

ARMS, SEEDS = ("harnessrl", "grpo_static"), (0, 1)
# configs/tiny.py's sizes over the testbed's (configs/default.py's) arms; no memory: its
# embedder's load and compiles add seconds to every evolver run (memory has its own tests)
TINY = ("model.source=tiny", "judge.model.source=tiny", "rollout.max_new_tokens=8",
        "rollout.prompt_buckets=(512,)", "rl.prompt_pad_multiple=128", "rl.tasks_per_step=2",
        "rl.micro_batch_size=0",
        "rl.learning_rate=1e-3", "rl.warmup_steps=0", "rl.mesh.fsdp=1", "train.eval_tasks=2",
        "ablation.memory=False")


def grid_args(root, workdir):
  return ["--config=configs/testbed.py", f"--workdir={workdir}",
          f"--arms={','.join(ARMS)}", f"--seeds={','.join(map(str, SEEDS))}",
          "--config.experiment.truth=", f"--config.experiment.overrides={TINY!r}",
          # outside the experiment section: forwarded to every run
          f"--config.data.train={root / 'train.jsonl'}",
          f"--config.data.heldout={root / 'heldout.jsonl'}", "--config.train.steps=2"]


def run(cmd, env):
  start = time.monotonic()
  done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
  return done, time.monotonic() - start


def attempt_counts(workdir):
  return {(a, s): len(experiment.attempts(str(workdir / a / f"seed{s}")))
          for a in ARMS for s in SEEDS}


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
  """The three invocations on one grid directory: (workdir, [(result, wall s, attempt
  counts, which of grid.json / report.md exist: after it)] for --task_index=1, the whole
  grid, the whole grid again)."""
  root = tmp_path_factory.mktemp("experiment")
  env = tiny_driver_data(root)
  workdir = root / "grid"
  out = []
  for extra in (["--task_index=1"], [], []):
    done, wall = run([sys.executable, "-m", "harnessrl_jax.experiment",
                      *grid_args(root, workdir), *extra], env)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    out.append((done, wall, attempt_counts(workdir),
                {n for n in ("grid.json", "report.md") if (workdir / n).exists()}))
  for i, (done, wall, _, _) in enumerate(out):   # the wall times, for the record (pytest -s)
    print(f"invocation {i}: {wall:.1f} s\n{done.stdout}")
  return workdir, out


def test_grid_order_is_seed_major():
  g = experiment.Grid(arms=("a", "b", "c"), seeds=(5, 7), reference="a", truth="",
                      overrides=(), run_config="/x.py")
  assert [c.name for c in g.cells()] == ["a/seed5", "b/seed5", "c/seed5", "a/seed7",
                                         "b/seed7", "c/seed7"]
  assert experiment.select(g.cells(), task_index=4) == (experiment.Cell("b", 7),)
  assert experiment.select(g.cells(), only="c/seed5") == (experiment.Cell("c", 5),)
  assert experiment.select(g.cells(), only="c/5") == (experiment.Cell("c", 5),)
  for bad in ({"task_index": 6}, {"task_index": -1}, {"only": "a/6"}):
    with pytest.raises(ConfigError):
      experiment.select(g.cells(), **bad)


def test_each_run_gets_the_drivers_config():
  from configs import testbed  # pylint: disable=g-import-not-at-top
  with pytest.raises(ConfigError, match="grid sets config.seed"):
    experiment.grid_of(testbed.get_config(), forwarded=("seed=9",))
  with pytest.raises(ConfigError, match="without an experiment section"):
    experiment.grid_of(testbed.get_config("grpo_static"))
  g = experiment.grid_of(testbed.get_config(), arms=ARMS, seeds=["3"],
                         forwarded=TINY)
  assert g.run_config == resolve("configs/testbed.py") and g.truth == resolve(
      "data/testbed/truth.jsonl")
  harnessrl, static = (experiment.build_config(g, experiment.Cell(a, 3)) for a in ARMS)
  assert (harnessrl.seed, harnessrl.model.source, harnessrl.rollout.prompt_buckets) == (
      3, "tiny", (512,))
  assert harnessrl.evolver.enabled and not static.evolver.enabled
  assert "experiment" not in harnessrl
  argv = experiment.train_argv(g, experiment.Cell("grpo_static", 3), "/w")
  assert argv[1:4] == ["-m", "harnessrl_jax.train", f"--config={g.run_config}:grpo_static"]
  assert argv[-2:] == ["--config.seed=3", "--workdir=/w/grpo_static/seed3"]
  bad = dataclasses.replace(g, overrides=("rl.learnin_rate=1e-3",))
  with pytest.raises(ConfigError, match=r"run harnessrl/seed3: --config.rl.learnin_rate"):
    experiment.build_config(bad, experiment.Cell("harnessrl", 3))


def test_every_arm_is_a_valid_training_config():
  from configs import testbed  # pylint: disable=g-import-not-at-top
  for arm in testbed.ARMS:
    c = testbed.get_config(arm)
    validate(c)
    assert c.data.train == "data/testbed/train.jsonl" and "experiment" not in c
  with pytest.raises(ConfigError, match="config.experiment: an arms x seeds grid's section"):
    validate(testbed.get_config())   # what `train --config=configs/testbed.py` says
  with pytest.raises(ValueError, match="unknown arm 'bogus'"):
    testbed.get_config("bogus")


def test_the_bundled_grid_is_the_default_per_arm():
  from configs import bundled, default  # pylint: disable=g-import-not-at-top
  g = experiment.grid_of(bundled.get_config())
  assert (g.arms, g.truth, g.run_config) == (("harnessrl", "grpo_static"), "",
                                             resolve("configs/bundled.py"))
  static = experiment.build_config(g, experiment.Cell("grpo_static", 1))
  validate(static)
  assert not static.evolver.enabled and static.seed == 1
  assert static.data.train == default.get_config().data.train


def test_task_index_runs_exactly_that_run(grid):
  workdir, out = grid
  done, _, counts, written = out[0]
  assert counts == {(a, s): int((a, s) == ("grpo_static", 0)) for a in ARMS for s in SEEDS}
  lines = [l for l in done.stdout.splitlines() if l.startswith("[")]
  assert len(lines) == 1 and lines[0].startswith("[1/1] grpo_static/seed0: finished in"), lines
  assert not written


def test_whole_grid_runs_the_rest_and_writes_grid_and_report(grid):
  workdir, out = grid
  done, _, counts, written = out[1]
  assert counts == {k: 1 for k in counts}          # the --task_index run was not rerun
  assert "[2/4] grpo_static/seed0: skipped (finished before)" in done.stdout
  for a in ARMS:
    for s in SEEDS:
      run_dir = workdir / a / f"seed{s}"
      assert json.loads((run_dir / "summary.json").read_text())["steps"] == 2
      cfg = json.loads((run_dir / "config.json").read_text())["config"]
      assert (cfg["seed"], cfg["model"]["source"], cfg["evolver"]["enabled"]) == (
          s, "tiny", a == "harnessrl")
      assert "==== " in (run_dir / "train.log").read_text()
  record = json.loads((workdir / "grid.json").read_text())
  assert [(r["index"], r["arm"], r["seed"], r["status"]) for r in record["runs"]] == [
      (0, "harnessrl", 0, "finished"), (1, "grpo_static", 0, "finished"),
      (2, "harnessrl", 1, "finished"), (3, "grpo_static", 1, "finished")]
  assert all(r["wall_s"] > 0 and len(r["attempts"]) == 1 for r in record["runs"])
  assert {"cpu", "cores", "load_avg"} <= set(record["machine"])
  assert all("load_avg" in r["attempts"][0]["machine"] for r in record["runs"])
  assert not (workdir / ".jax_cache").exists()   # the conftest cache was kept
  assert written == {"grid.json", "report.md"}
  report = json.loads((workdir / "report.json").read_text())
  assert (report["reference"], report["arms"]) == ("grpo_static", list(ARMS))
  assert report["truth_path"] == "" and report["heldout_path"] == str(
      workdir.parent / "heldout.jsonl")
  assert [(h["arm"], h["seeds"]) for h in report["headline"]] == [(a, 2) for a in ARMS]


def test_rerun_skips_every_finished_run(grid):
  _, out = grid
  done, wall, counts, _ = out[2]
  assert counts == out[1][2]
  lines = [l for l in done.stdout.splitlines() if l.startswith("[")]
  assert len(lines) == 4 and all(l.endswith("skipped (finished before)") for l in lines)
  assert wall < 60, wall   # no driver started: the runner's own imports and checks


def test_unknown_arm_is_one_error_line(tmp_path):
  workdir = tmp_path / "grid"
  done = subprocess.run(
      [sys.executable, "-m", "harnessrl_jax.experiment", "--config=configs/testbed.py",
       f"--workdir={workdir}", "--arms=harnessrl,grpo_static,bogus"],
      cwd=REPO, capture_output=True, text=True, timeout=300,
      env=dict(os.environ, JAX_PLATFORMS="cpu"))
  assert done.returncode == 2, done.stdout + done.stderr
  lines = done.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith("error: run bogus/seed0: "), lines
  assert "unknown arm 'bogus'; the arms are harnessrl, grpo_static" in lines[0]
  assert not workdir.exists()


def test_attributor_replay_reproduces_the_runs_labels(grid, tmp_path):
  """evolver/replay.py on the grid's harnessrl runs: every logged label (and correlational
  label) comes back; a label edited in the log is found, and the command then fails."""
  import shutil  # noqa: PLC0415

  from harnessrl_jax.evolver import replay  # noqa: PLC0415
  workdir, _ = grid
  measured = 0
  for s in SEEDS:
    rep = replay.replay_run(str(workdir / "harnessrl" / f"seed{s}"))
    assert rep.logged and set(rep.labels) == set(rep.logged)
    assert replay.mismatches(rep) == []
    # the critic's measured candidates: each Delta recomputed offline equals the logged one
    decisions = replay.accept_decisions(str(workdir / "harnessrl" / f"seed{s}"), 0.05)
    for d in decisions:
      assert abs(d.delta - d.replayed_delta) <= 0.01, d
    measured += len(decisions)
  assert measured > 0   # the Delta check above compared something
  run_dir = tmp_path / "run"
  shutil.copytree(workdir / "harnessrl" / "seed0", run_dir,
                  ignore=shutil.ignore_patterns("checkpoints"))
  path = run_dir / "attributions.jsonl"
  rows = [json.loads(line) for line in path.read_text().splitlines()]
  rows[0]["label"] = next(x for x in ("blind", "agree") if x != rows[0]["label"])
  path.write_text("".join(json.dumps(r) + "\n" for r in rows))
  assert len(replay.mismatches(replay.replay_run(str(run_dir)))) == 1
  done = subprocess.run([sys.executable, "-m", "harnessrl_jax.evolver.replay",
                         f"--run={run_dir}", "--truth="], cwd=REPO, capture_output=True,
                        text=True, timeout=300, check=False)
  assert done.returncode == 1 and "1 differ" in done.stdout, done.stdout + done.stderr
