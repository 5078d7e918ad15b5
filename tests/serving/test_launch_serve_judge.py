"""`launch/serve_judge.sh` as a user runs it: two tiny-model JetStream servers on loopback
ports, the trainer's pool overrides it prints, each server answering, the persistent
compilation cache it gives them filling, and the stop command it prints stopping them."""

import os
import signal
import socket
import subprocess
import sys
import time

import portpicker
import pytest

from harnessrl_jax.data.schema import Message
from harnessrl_jax.judges.jetstream_client import JetStreamClient
from harnessrl_jax.models.tokenizer import tiny_prompt_builder
from tests.serving.test_serving_jetstream import REPO

SLOTS = 2


def free_port_pair() -> int:
  """A port p with p and p + 1 both free now (the script takes consecutive ports)."""
  for _ in range(50):
    port = portpicker.pick_unused_port()
    with socket.socket() as s:
      try:
        s.bind(("127.0.0.1", port + 1))
      except OSError:
        continue
    return port
  pytest.fail("no two consecutive free ports")


def kill_servers(port0: int) -> None:
  """Stops whatever the script started on these ports (when it failed before printing its
  stop command)."""
  for port in (port0, port0 + 1):
    out = subprocess.run(["pgrep", "-f", f"harnessrl_jax.serve --model=tiny --port={port} "],
                         capture_output=True, text=True, check=False)
    for pid in out.stdout.split():
      os.kill(int(pid), signal.SIGTERM)


def test_serve_judge_starts_a_pool_and_prints_its_config(tmp_path):
  port0 = free_port_pair()
  cache = tmp_path / "jax_cache"
  env = dict(os.environ, MODEL="tiny", SLOTS=str(SLOTS), MAX_PREFILL="256", MAX_DECODE="32",
             LOG_DIR=str(tmp_path / "logs"), JAX_CACHE=str(cache), PYTHON=sys.executable,
             READY_TIMEOUT="300")
  env.pop("JAX_COMPILATION_CACHE_DIR", None)   # the script's own setting must reach them
  try:
    run = subprocess.run(["bash", "launch/serve_judge.sh", "2", str(port0)], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=400, check=False)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    flags = lines[lines.index("# trainer overrides:") + 1].split()
    stop = lines[lines.index("# stop the servers with:") + 1]
    addresses = [f"127.0.0.1:{port0}", f"127.0.0.1:{port0 + 1}"]
    assert [f for f in flags if f.startswith("--config.judge.endpoints=")] == [
        f"--config.judge.endpoints={a}" for a in addresses]
    assert f"--config.judge.pool.max_in_flight={SLOTS}" in flags
    assert "--config.judge.backend=jetstream" in flags
    assert "--config.evolver.llm_backend=jetstream" in flags
    for address in addresses:
      client = JetStreamClient(address, tiny_prompt_builder(), max_prompt_tokens=256,
                               timeout_s=120)
      try:
        deadline = time.time() + 120
        while not client.health(timeout_s=1.0):
          assert time.time() < deadline, f"{address} never reported healthy"
          time.sleep(0.5)
        [answer] = client.complete([[Message("user", "Say hi.")]], max_tokens=8)
        assert isinstance(answer, str)
      finally:
        client.close()
    # Their first requests compiled prefill and generate into the shared cache.
    assert cache.is_dir() and any(cache.iterdir())
  except BaseException:
    kill_servers(port0)
    raise
  subprocess.run(stop, shell=True, check=True)
  for address in addresses:
    host, port = address.split(":")
    deadline = time.time() + 30
    while True:
      try:
        socket.create_connection((host, int(port)), timeout=1).close()
      except OSError:
        break
      assert time.time() < deadline, f"{address} still accepts connections after the stop"
      time.sleep(0.5)
