"""Two CPU processes form one JAX cluster and run the driver like one process does.

launch/local_multiprocess.sh starts 2 processes of 2 devices each; every process runs
`python -m harnessrl_jax.train` itself (it joins the cluster from the HARNESSRL_*
variables the launcher sets), with rl.mesh.fsdp = -1, so the mesh spans 4 devices on 2
processes. The reference is the driver in one process with 4 devices. Both processes must
end with the same parameters (bitwise) and harness digest, and those must match the
reference's (parameters to float32 round-off: the cross-process reductions may sum in
another order); only process 0 may write the run's files besides Orbax's checkpoints.

The check that hosts agree is tested here too: two processes with different configs must
refuse to start, naming the part that differs and the process, both through the driver
and through `python -m harnessrl_jax.distributed --then`.
"""

import json
import os
import re
import socket
import subprocess
import sys

import numpy as np
import pytest

from harnessrl_jax.run import cluster
from harnessrl_jax.errors import ConfigError
from repo_paths import REPO

RUN_ARGS = ["--config=configs/tiny.py", "--config.rl.mesh.fsdp=-1",
            "--config.rollout.max_new_tokens=8", "--config.train.eval_tasks=4"]

# Imported at start-up by the processes of the pair (PYTHONPATH): records every file or
# directory a process creates, changes or removes from Python (audit events), and leaves
# the list in $WRITES_DIR/writes_<process id>.json at exit. Orbax's array data (written by
# TensorStore in C++) is not seen, and is not the driver's to restrict anyway.
_WRITE_HOOK = r'''
import atexit, json, os, sys

_CHANGES = ("os.rename", "os.remove", "os.rmdir", "os.mkdir", "os.truncate", "shutil.rmtree")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_seen = []


def _hook(event, args):
  if event == "open":
    path, mode, flags = args
    writes = any(c in mode for c in "wax+") if isinstance(mode, str) else (
        bool(flags & _WRITE_FLAGS) if isinstance(flags, int) else False)
    paths = [path] if writes else []
  else:   # os.rename / os.replace: both paths
    paths = list(args[:2]) if event in _CHANGES else []
  _seen.extend(os.path.abspath(os.fsdecode(p)) for p in paths
               if isinstance(p, (str, bytes, os.PathLike)))


def _dump():
  seen = sorted(set(_seen))
  out = os.path.join(os.environ["WRITES_DIR"],
                     "writes_%s.json" % os.environ.get("HARNESSRL_PROCESS_ID", "x"))
  with open(out, "w") as f:
    json.dump(seen, f)


if os.environ.get("WRITES_DIR"):
  sys.addaudithook(_hook)
  atexit.register(_dump)
'''


def _env(devices: int) -> dict:
  return dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}",
              JAX_PLATFORMS="cpu", PYTHONPATH=REPO)


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def _jsonl(path):
  with open(path, encoding="utf-8") as f:
    return [json.loads(line) for line in f]


def _final_params(run_dir, step: int) -> dict:
  """{path: array} of the parameters in a run's checkpoint as `evaluate` loads them in this
  single process, whatever topology saved them."""
  # pylint: disable=g-import-not-at-top
  import jax
  from flax import nnx
  from configs.tiny import get_config
  from harnessrl_jax.eval.evaluate import load_policy
  # pylint: enable=g-import-not-at-top
  _, params = load_policy(get_config(), str(run_dir), step)
  leaves = jax.tree_util.tree_flatten_with_path(nnx.to_pure_dict(params))[0]
  return {jax.tree_util.keystr(p): np.asarray(x) for p, x in leaves}


def _initial_params() -> dict:
  # pylint: disable=g-import-not-at-top
  import jax
  from flax import nnx
  from configs.tiny import get_config
  from harnessrl_jax.models.loading import load_model
  # pylint: enable=g-import-not-at-top
  _, params = nnx.split(load_model(get_config().model).model)
  leaves = jax.tree_util.tree_flatten_with_path(nnx.to_pure_dict(params))[0]
  return {jax.tree_util.keystr(p): np.asarray(x) for p, x in leaves}


# 3 minutes of 3 processes on 2 cores; tests/rl/test_rl_multihost.py keeps the two-process
# update in CI.
@pytest.mark.slow
def test_two_processes_train_like_one(tmp_path):
  multi, single, logs, writes, hook = (tmp_path / n for n in
                                       ("multi", "single", "logs", "writes", "hook"))
  for d in (writes, hook):
    d.mkdir()
  (hook / "sitecustomize.py").write_text(_WRITE_HOOK)
  # Both runs at once: the machine has few cores, and the pair waits on each other anyway.
  ref = subprocess.Popen([sys.executable, "-m", "harnessrl_jax.train", *RUN_ARGS,
                          f"--workdir={single}"], cwd=REPO, env=_env(4),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
  pair = subprocess.run(["bash", os.path.join(REPO, "launch", "local_multiprocess.sh"),
                         *RUN_ARGS, f"--workdir={multi}"], cwd=REPO, capture_output=True,
                        text=True, timeout=600,
                        env=dict(os.environ, NUM_PROCESSES="2", DEVICES_PER_PROCESS="2",
                                 LOG_DIR=str(logs), PYTHON=sys.executable,
                                 PYTHONPATH=str(hook), WRITES_DIR=str(writes)))
  if pair.returncode:
    ref.kill()   # the comparison is moot; do not wait for the reference
  ref_out, _ = ref.communicate(timeout=600)
  proc_logs = [(logs / f"process_{i}.log").read_text() if (logs / f"process_{i}.log").exists()
               else "" for i in range(2)]
  assert pair.returncode == 0, pair.stderr[-2000:] + "\n".join(l[-3000:] for l in proc_logs)
  assert ref.returncode == 0, ref_out[-3000:]

  # Each process joined the cluster itself and ended with the same parameters and harness.
  done = []
  for i, log in enumerate(proc_logs):
    assert f"process {i}/2 joined" in log and "2 local of 4 devices" in log, log[-2000:]
    found = re.findall(rf"process {i}/2 done: harness (\w+) params_sha256 (\w+)", log)
    assert len(found) == 1, log[-2000:]
    done.append(found[0])
  assert done[0] == done[1]
  got, want = (json.loads((d / "summary.json").read_text()) for d in (multi, single))
  assert (got["harness_digest"], got["params_sha256"]) == done[0]

  # Against one process: the same draws, responses and rewards, hence the same harness.
  assert got["harness_digest"] == want["harness_digest"]
  assert sum(v.get("accepted", 0) for v in want["updates"].values()) >= 1   # it moved
  history = [[r["digest_after"] for r in _jsonl(d / "harness_history.jsonl")]
             for d in (multi, single)]
  assert history[0] == history[1]
  rows_got, rows_want = _jsonl(multi / "metrics.jsonl"), _jsonl(single / "metrics.jsonl")
  assert [r["step"] for r in rows_got] == [r["step"] for r in rows_want] == [0, 1]
  for g, w in zip(rows_got, rows_want):
    assert g["tasks"] == w["tasks"]
    np.testing.assert_allclose(g["reward"], w["reward"], rtol=1e-6)
    for k in ("loss", "kl", "grad_norm", "entropy"):
      np.testing.assert_allclose(g[k], w[k], rtol=1e-4, atol=1e-7, err_msg=k)
    # The learner's global batch holds each row once, not once per process.
    assert g["tokens"] == w["tokens"], (
        f"2 processes trained on {g['tokens']} tokens, 1 process on {w['tokens']}: every "
        "process passed all rows to rl.mesh.shard_batch; loop.rl_step must pass "
        "sharding.local_batch(batch, mesh)")
  assert rows_want[1]["grad_norm"] > 0.1   # step 0's groups may all tie (no gradient)
  groups_got, groups_want = _jsonl(multi / "oracle_groups.jsonl"), _jsonl(
      single / "oracle_groups.jsonl")
  assert len(groups_got) == len(groups_want) == 4   # 2 steps x 2 tasks
  for g, w in zip(groups_got, groups_want):
    assert (g["step"], g["task"]["id"], g["responses"]) == (
        w["step"], w["task"]["id"], w["responses"])
    np.testing.assert_allclose(np.asarray(g["rewards"], float),
                               np.asarray(w["rewards"], float), rtol=1e-6)

  # Parameters: Adam turns round-off in near-zero gradients into steps of +-lr, so compare
  # the update as a whole and count the elements that moved differently.
  p2, p1, p0 = _final_params(multi, 2), _final_params(single, 2), _initial_params()
  assert sorted(p2) == sorted(p1) == sorted(p0)
  delta_1 = np.concatenate([(p1[k] - p0[k]).ravel() for k in sorted(p0)])
  delta_2 = np.concatenate([(p2[k] - p0[k]).ravel() for k in sorted(p0)])
  assert np.linalg.norm(delta_1) > 0.05   # training moved the parameters
  assert np.linalg.norm(delta_2 - delta_1) < 0.03 * np.linalg.norm(delta_1)
  assert np.mean(np.abs(delta_2 - delta_1) > 1e-5) < 1e-3

  # Only process 0 wrote the run's files; process 1 wrote nothing outside Orbax's share.
  wrote = [json.loads((writes / f"writes_{i}.json").read_text()) for i in range(2)]
  orbax = str(multi / "checkpoints")
  mine = [[p for p in w if p.startswith(str(multi) + os.sep)
           and p != orbax and not p.startswith(orbax + os.sep)] for w in wrote]
  for name in ("config.json", "metrics.jsonl", "oracle_groups.jsonl", "summary.json",
               "report.md", "harness_history.jsonl", "evolver_candidates.jsonl"):
    assert str(multi / name) in mine[0], (name, mine[0])   # the hook sees the writes
  assert mine[1] == [], mine[1]
  assert len(os.listdir(multi / "tb")) == 1   # one event file: one writer
  assert "step 2/2" in proc_logs[0] and "step 2/2" not in proc_logs[1]


def test_driver_refuses_hosts_with_different_configs(tmp_path):
  port = _free_port()
  workdir = tmp_path / "run"
  procs = [subprocess.Popen(
      [sys.executable, "-m", "harnessrl_jax.train", "--config=configs/tiny.py",
       f"--workdir={workdir}", f"--coordinator_address=127.0.0.1:{port}",
       "--num_processes=2", f"--process_id={i}", f"--config.rl.learning_rate={lr}"],
      cwd=REPO, env=_env(1), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
      for i, lr in enumerate((1e-3, 2e-3))]
  outs = [p.communicate(timeout=300) for p in procs]
  for i, (p, (_, err)) in enumerate(zip(procs, outs)):
    assert p.returncode == 2, err[-2000:]
    assert f"error: process {i}: the hosts disagree: config differs on process(es) [1]" in err
    assert "code differs" not in err and "libraries differs" not in err
  assert not workdir.exists()   # refused before anything was written


def test_hosts_with_different_configs_refuse_to_start(tmp_path):
  port = _free_port()
  configs = []
  for i, lr in enumerate(("1e-3", "2e-3")):
    path = tmp_path / f"config_{i}.py"
    path.write_text("import ml_collections\n\ndef get_config():\n"
                    f"  return ml_collections.ConfigDict({{'lr': {lr}}})\n")
    configs.append(path)
  procs = [subprocess.Popen(
      [sys.executable, "-m", "harnessrl_jax.distributed", f"--coordinator_address=127.0.0.1:"
       f"{port}", "--num_processes=2", f"--process_id={i}", "--then=json.tool", "--",
       f"--config={configs[i]}"], cwd=REPO, env=_env(1), stdout=subprocess.PIPE,
      stderr=subprocess.PIPE, text=True) for i in range(2)]
  outs = [p.communicate(timeout=300) for p in procs]
  for i, (p, (_, err)) in enumerate(zip(procs, outs)):
    assert p.returncode == 2, err[-2000:]
    assert f"error: process {i}: the hosts disagree: config differs on process(es) [1]" in err
    assert "code differs" not in err and "libraries differs" not in err


def test_cluster_spec_sources_and_mistakes():
  env = {"HARNESSRL_COORDINATOR": "10.0.0.1:8476", "HARNESSRL_NUM_PROCESSES": "4",
         "HARNESSRL_PROCESS_ID": "3"}
  spec = cluster.cluster_spec(environ=env)
  assert (spec.coordinator, spec.num_processes, spec.process_id, spec.multi) == (
      "10.0.0.1:8476", 4, 3, True)
  # Flags win over the environment.
  spec = cluster.cluster_spec("h:1", 2, 0, environ=env)
  assert (spec.coordinator, spec.num_processes, spec.source) == ("h:1", 2, "flags")
  assert not cluster.cluster_spec(environ={}).multi
  assert cluster.cluster_spec(environ={"HARNESSRL_AUTO_CLUSTER": "1"}).auto
  slurm = {"SLURM_STEP_NODELIST": "gpu[01-02]", "SLURM_NTASKS": "2", "SLURM_PROCID": "1"}
  assert cluster.cluster_spec(environ=slurm).auto
  assert not cluster.cluster_spec(environ={**slurm, "SLURM_NTASKS": "1"}).multi
  bad = [({**env, "HARNESSRL_PROCESS_ID": "4"}, "outside 0..3"),
         ({**env, "HARNESSRL_NUM_PROCESSES": "four"}, "not an integer"),
         ({**env, "HARNESSRL_COORDINATOR": "10.0.0.1"}, "not HOST:PORT"),
         ({"HARNESSRL_NUM_PROCESSES": "2"}, "HARNESSRL_COORDINATOR, HARNESSRL_PROCESS_ID "
                                            "missing")]
  for environ, message in bad:
    with pytest.raises(ConfigError, match=message):
      cluster.cluster_spec(environ=environ)
