"""Two CPU processes form one JAX cluster and train configs/tiny.py like one process does.

launch/local_multiprocess.sh starts 2 processes of 2 devices each; every process runs
tests/multihost_train_worker.py through `python -m harnessrl_jax.distributed --then`, so
the mesh (rl.mesh.fsdp = -1) spans 4 devices on 2 processes. The reference is the same
worker in one process with 4 devices. Both processes must end with the same parameters
(bitwise) and harness digest, and those must match the reference's (parameters to float32
round-off: the cross-process reductions may sum in another order).

The check that hosts agree is tested here too: two processes with different config files
must refuse to start, naming the part that differs and the process.
"""

import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

from harnessrl_jax import distributed
from harnessrl_jax.errors import ConfigError

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKER = "tests.multihost_train_worker"


def _env(devices: int) -> dict:
  return dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}",
              JAX_PLATFORMS="cpu", PYTHONPATH=REPO)


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def test_two_processes_train_like_one(tmp_path):
  multi, single = tmp_path / "multi", tmp_path / "single"
  multi.mkdir()
  single.mkdir()
  logs = tmp_path / "logs"
  # Both runs at once: the machine has few cores, and the pair waits on each other anyway.
  ref = subprocess.Popen([sys.executable, "-m", WORKER, str(single)], cwd=REPO, env=_env(4),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
  pair = subprocess.run(["bash", os.path.join(REPO, "launch", "local_multiprocess.sh"),
                         str(multi)], cwd=REPO, capture_output=True, text=True, timeout=600,
                        env=dict(os.environ, NUM_PROCESSES="2", DEVICES_PER_PROCESS="2",
                                 MODULE=WORKER, LOG_DIR=str(logs),
                                 PYTHON=sys.executable))
  if pair.returncode:
    ref.kill()   # the comparison is moot; do not wait for the reference
  ref_out, _ = ref.communicate(timeout=600)
  proc_logs = "\n".join((logs / f"process_{i}.log").read_text()[-3000:] for i in range(2)
                        if (logs / f"process_{i}.log").exists())
  assert pair.returncode == 0, pair.stderr[-2000:] + proc_logs
  assert ref.returncode == 0, ref_out[-3000:]
  for i in range(2):
    assert f"process {i}/2 joined" in (logs / f"process_{i}.log").read_text()

  got = [json.loads((multi / f"result_{i}.json").read_text()) for i in range(2)]
  want = json.loads((single / "result_0.json").read_text())
  assert [g["process"] for g in got] == [0, 1]
  assert all(g["processes"] == 2 and g["devices"] == 4 for g in got)
  assert want["processes"] == 1 and want["devices"] == 4
  assert got[0]["mesh"] == got[1]["mesh"] == want["mesh"] == {"data": 1, "fsdp": 4,
                                                              "tensor": 1}
  # Both processes: bitwise the same parameters and the same harness.
  assert got[0]["params_sha256"] == got[1]["params_sha256"]
  assert got[0]["harness"] == got[1]["harness"]
  assert got[0]["steps"] == got[1]["steps"]

  # Against one process: the same draws, responses and rewards, hence the same harness.
  assert got[0]["harness"] == want["harness"]
  assert want["harness"] != want["initial_harness"]   # the harness moved in those steps
  assert got[0]["initial_params_sha256"] == want["initial_params_sha256"]
  assert got[0]["batch_roundtrip"] and got[1]["batch_roundtrip"] and want["batch_roundtrip"]
  assert len(want["steps"]) == 2
  for g, w in zip(got[0]["steps"], want["steps"]):
    assert g["tasks"] == w["tasks"] and g["responses"] == w["responses"]
    np.testing.assert_allclose(g["rewards"], w["rewards"], rtol=1e-6)
    for k in ("loss", "kl", "grad_norm", "entropy"):
      np.testing.assert_allclose(g[k], w[k], rtol=1e-4, atol=1e-7, err_msg=k)
  assert want["steps"][1]["grad_norm"] > 0.1   # step 0's groups may all tie (no gradient)

  # Parameters: Adam turns round-off in near-zero gradients into steps of +-lr, so compare
  # the update as a whole and count the elements that moved differently.
  p2, p1 = np.load(multi / "params_2.npz"), np.load(single / "params_1.npz")
  p0 = np.load(single / "initial_params.npz")
  assert sorted(p2.files) == sorted(p1.files) == sorted(p0.files)
  delta_1 = np.concatenate([(p1[k] - p0[k]).ravel() for k in p1.files])
  delta_2 = np.concatenate([(p2[k] - p0[k]).ravel() for k in p1.files])
  assert np.linalg.norm(delta_1) > 0.05   # training moved the parameters
  assert np.linalg.norm(delta_2 - delta_1) < 0.03 * np.linalg.norm(delta_1)
  assert np.mean(np.abs(delta_2 - delta_1) > 1e-5) < 1e-3

  # The learner's global batch holds each row once, not once per process.
  for g, w in zip(got[0]["steps"], want["steps"]):
    assert g["tokens"] == w["tokens"], (
        f"2 processes trained on {g['tokens']} tokens, 1 process on {w['tokens']}: every "
        "process passed all rows to rl.mesh.shard_batch; loop.rl_step must pass "
        "distributed.local_batch(batch, mesh)")


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
  spec = distributed.cluster_spec(environ=env)
  assert (spec.coordinator, spec.num_processes, spec.process_id, spec.multi) == (
      "10.0.0.1:8476", 4, 3, True)
  # Flags win over the environment.
  spec = distributed.cluster_spec("h:1", 2, 0, environ=env)
  assert (spec.coordinator, spec.num_processes, spec.source) == ("h:1", 2, "flags")
  assert not distributed.cluster_spec(environ={}).multi
  assert distributed.cluster_spec(environ={"HARNESSRL_AUTO_CLUSTER": "1"}).auto
  slurm = {"SLURM_STEP_NODELIST": "gpu[01-02]", "SLURM_NTASKS": "2", "SLURM_PROCID": "1"}
  assert distributed.cluster_spec(environ=slurm).auto
  assert not distributed.cluster_spec(environ={**slurm, "SLURM_NTASKS": "1"}).multi
  bad = [({**env, "HARNESSRL_PROCESS_ID": "4"}, "outside 0..3"),
         ({**env, "HARNESSRL_NUM_PROCESSES": "four"}, "not an integer"),
         ({**env, "HARNESSRL_COORDINATOR": "10.0.0.1"}, "not HOST:PORT"),
         ({"HARNESSRL_NUM_PROCESSES": "2"}, "HARNESSRL_COORDINATOR, HARNESSRL_PROCESS_ID "
                                            "missing")]
  for environ, message in bad:
    with pytest.raises(ConfigError, match=message):
      distributed.cluster_spec(environ=environ)
