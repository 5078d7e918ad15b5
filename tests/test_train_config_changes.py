"""Operational config fields may change when a run resumes; experiment fields may not.

The tiny driver as subprocesses on 8 training and 4 held-out tasks: a start refused for a
missing data file, the corrected start in the same workdir (3 steps, checkpoints kept), a
copy of that run cut back to its first checkpoint (what a kill after it leaves) resumed
with a moved judge endpoint, a larger judge.max_unscored_share, another evaluation and
checkpoint cadence: accepted, logged with the step, and bit-identical to the uninterrupted
run. A changed experiment field is still refused with one line.
"""

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import tiny_driver_data

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEPS = 3
CHANGED = {"judge.openai.base_url": ("http://127.0.0.1:8000/v1", "http://127.0.0.1:9/v1"),
           "judge.jetstream.address": ("127.0.0.1:9000", "127.0.0.2:9000"),
           "judge.max_unscored_share": (0.1, 0.5),
           "train.eval_every": (0, 1),   # an extra held-out evaluation after step 2
           "train.keep_checkpoints": (STEPS, 1)}


def train_cmd(root, workdir, *extra):
  return [sys.executable, "-m", "harnessrl_jax.train", "--config=configs/tiny.py",
          f"--workdir={workdir}", f"--config.data.train={root / 'train.jsonl'}",
          f"--config.data.heldout={root / 'heldout.jsonl'}", f"--config.train.steps={STEPS}",
          f"--config.train.keep_checkpoints={STEPS}", *extra]


def run(cmd, env):
  return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


def read_json(path):
  with open(path, encoding="utf-8") as f:
    return json.load(f)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  """(root, env, uninterrupted run, its refused first start, resumed copy, resume output)."""
  root = tmp_path_factory.mktemp("config_changes")
  env = tiny_driver_data(root)
  a = root / "a"
  refused = run(train_cmd(root, a, f"--config.data.heldout={root / 'missing.jsonl'}"), env)
  done = run(train_cmd(root, a), env)
  assert done.returncode == 0, done.stderr[-3000:]
  # What a kill after checkpoint 1 leaves: later checkpoints and memories gone.
  b = root / "b"
  shutil.copytree(a, b)
  for step in range(2, STEPS + 1):
    shutil.rmtree(b / "checkpoints" / str(step))
    shutil.rmtree(b / "memory" / str(step), ignore_errors=True)
  resumed = run(train_cmd(root, b, *(f"--config.{k}={new}" for k, (_, new) in
                                     CHANGED.items())), env)
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  return root, env, a, refused, b, resumed.stdout


def test_refused_start_then_corrected_start(runs):
  _, _, a, refused, _, _ = runs
  assert refused.returncode == 2
  assert "error: config.data" in refused.stderr and "Traceback" not in refused.stderr
  assert "missing.jsonl" in refused.stderr
  assert read_json(a / "summary.json")["steps"] == STEPS   # the corrected start ran


def test_changed_operational_fields_are_logged_with_their_step(runs):
  _, _, a, _, b, out = runs
  for field, (old, new) in CHANGED.items():
    assert f"config.{field}: {old!r} -> {new!r} from step 1 on (operational;" in out, out
  with open(b / "config_changes.jsonl", encoding="utf-8") as f:
    rows = [json.loads(line) for line in f]
  assert rows == [{"step": 1, "field": k, "old": old, "new": new}
                  for k, (old, new) in sorted(CHANGED.items())]
  sa, sb = read_json(a / "config.json"), read_json(b / "config.json")
  assert sb["experiment_sha256"] == sa["experiment_sha256"]
  assert sb["config"]["judge"]["max_unscored_share"] == 0.5
  assert sb["config"]["train"]["keep_checkpoints"] == 1
  assert not (a / "config_changes.jsonl").exists()


def test_resumed_run_equals_the_uninterrupted_one(runs):
  _, _, a, _, b, _ = runs
  sa, sb = read_json(a / "summary.json"), read_json(b / "summary.json")
  assert sb["params_sha256"] == sa["params_sha256"]
  assert sb["harness_digest"] == sa["harness_digest"]
  rows = lambda d: [(r["step"], r["reward"], r["loss"], r["tasks"]) for r in
                    map(json.loads, (d / "metrics.jsonl").read_text().splitlines())]
  assert rows(b) == rows(a) and len(rows(a)) == STEPS
  for name in ("harness_history.jsonl", "evolver_candidates.jsonl"):
    assert (a / name).read_text() == (b / name).read_text(), name
  # The new cadence took effect: an extra held-out point after step 2, fewer checkpoints.
  steps = lambda s: [e["step"] for e in s["heldout_evals"]]
  assert steps(sa) == [STEPS] and steps(sb) == [2, STEPS]
  assert sb["heldout_end"] == sa["heldout_end"]
  assert len(os.listdir(b / "checkpoints")) < len(os.listdir(a / "checkpoints"))


def test_changed_experiment_field_is_still_refused(runs):
  root, env, _, _, b, _ = runs
  before = (b / "config.json").read_text()
  out = run(train_cmd(root, b, "--config.rl.learning_rate=0.5",
                      "--config.judge.timeout_s=5"), env)
  assert out.returncode == 2, out.stderr[-3000:]
  assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
  assert "another experiment" in out.stderr and "rl.learning_rate: 0.001 -> 0.5" in out.stderr
  assert "timeout_s" not in out.stderr
  assert (b / "config.json").read_text() == before
