"""Two JAX processes (gloo CPU collectives), each feeding only its own rows, match one device.

The test runs this file as a script (`python test_rl_multihost.py PORT PROCESS_ID`) for each
worker process; `make_inputs()` is shared by the workers and the single-device reference.
"""

import json
import os
import socket
import subprocess
import sys

import jax
import ml_collections
import numpy as np
from flax import nnx
from jax.experimental import multihost_utils

from harnessrl_jax.models.architecture import ModelConfig
from harnessrl_jax.models.decoder import Decoder
from harnessrl_jax.rl import mesh as rl_mesh
from harnessrl_jax.rl import train_step as ts
from harnessrl_jax.rl.batch import RLBatch
from harnessrl_jax.rl.config import rl_defaults

B, P, N, V = 8, 4, 5, 40


def make_inputs():
  graphdef, params = nnx.split(Decoder(ModelConfig.tiny(vocab_size=V, num_layers=1),
                                       rngs=nnx.Rngs(0)))
  rl = rl_defaults()
  rl.learning_rate, rl.warmup_steps, rl.micro_batch_size = 1e-3, 0, 4
  rl.loss_aggregation, rl.logprob_chunk = "token_mean", 2
  rng = np.random.default_rng(0)
  mask = np.ones((B, P + N), bool)
  mask[:3, :2] = False
  mask[2:, -2:] = False
  batch = dict(
      tokens=rng.integers(0, V, (B, P + N)).astype(np.int32),
      positions=np.maximum(np.cumsum(mask, 1) - 1, 0).astype(np.int32),
      attention_mask=mask, loss_mask=mask[:, P:].astype(np.float32),
      old_logprobs=rng.normal(-3.7, 0.3, (B, N)).astype(np.float32),
      ref_logprobs=rng.normal(-3.7, 0.3, (B, N)).astype(np.float32),
      advantages=rng.normal(size=B).astype(np.float32),
      task_weight=rng.uniform(0.5, 2, B).astype(np.float32),
      group_id=np.repeat(np.arange(2), 4).astype(np.int32))
  return graphdef, params, rl, batch


def main(port: str, pid: int) -> None:
  # Before any array exists: importing jax does not start a backend, creating one does.
  jax.config.update("jax_cpu_collectives_implementation", "gloo")
  jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=2,
                             process_id=pid)
  graphdef, params, rl, batch = make_inputs()
  assert jax.device_count() == 4 and jax.local_device_count() == 2
  mesh = rl_mesh.mesh_from_config(ml_collections.ConfigDict({"data": 2, "fsdp": 2, "tensor": 1}))
  tx, _ = ts.build_step(ts.decoder_forward(graphdef), rl, temperature=1.0)
  state, sh = rl_mesh.init_state(params, tx, mesh)
  _, step = ts.build_step(ts.decoder_forward(graphdef), rl, temperature=1.0, mesh=mesh,
                          state_sharding=sh)
  # This process's rows only: the global batch is assembled across processes.
  half = B // 2
  local = RLBatch(**{k: v[pid * half:(pid + 1) * half] for k, v in batch.items()})
  state, metrics = step(state, rl_mesh.shard_batch(local, mesh))
  emb = multihost_utils.process_allgather(state.params["embed_tokens"][...], tiled=True)
  out = {k: float(v) for k, v in jax.device_get(metrics).items()}
  out["embed_sum"] = float(np.abs(np.asarray(emb)).sum())
  print("RESULT " + json.dumps(out), flush=True)


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def test_two_processes_match_one_device():
  port = _free_port()
  repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2",
             JAX_PLATFORMS="cpu", PYTHONPATH=repo)
  procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), str(port), str(i)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
           for i in range(2)]
  outs = [p.communicate(timeout=300) for p in procs]
  results = []
  for p, (stdout, stderr) in zip(procs, outs):
    assert p.returncode == 0, stderr[-3000:]
    line = [l for l in stdout.splitlines() if l.startswith("RESULT ")][-1]
    results.append(json.loads(line[len("RESULT "):]))

  graphdef, params, rl, batch = make_inputs()
  tx, step = ts.build_step(ts.decoder_forward(graphdef), rl, temperature=1.0)
  state, _ = rl_mesh.init_state(params, tx)
  state, metrics = step(state, rl_mesh.shard_batch(RLBatch(**batch), None))
  want_emb = float(np.abs(np.asarray(state.params["embed_tokens"][...])).sum())
  assert float(metrics["grad_norm"]) > 0
  for got in results:
    for k in ("loss", "grad_norm", "kl", "entropy", "clip_frac", "tokens"):
      np.testing.assert_allclose(got[k], float(metrics[k]), rtol=1e-5, atol=1e-6, err_msg=k)
    np.testing.assert_allclose(got["embed_sum"], want_emb, rtol=1e-6)


if __name__ == "__main__":
  main(sys.argv[1], int(sys.argv[2]))
