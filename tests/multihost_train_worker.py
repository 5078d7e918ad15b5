"""Worker of tests/test_multihost_train.py: two training steps of configs/tiny.py.

  python -m tests.multihost_train_worker OUT_DIR                  (one process)
  python -m harnessrl_jax.distributed ... --then=tests.multihost_train_worker -- OUT_DIR

Run by the second form (launch/local_multiprocess.sh) it is one process of a cluster. It
checks that all processes agree on
config and code, builds the run with train.py's own pieces (preflight, mesh, evolver) and
steps it with loop.rl_step and the evolver over one mesh of every device of every process
(rl.mesh.fsdp = -1). It writes no checkpoints (the driver's writers are
not multi-process yet) and leaves OUT_DIR/result_<process>.json; process 0 also writes
OUT_DIR/params_<processes>.npz.
"""

import importlib.util
import json
import os
import sys

import jax
import numpy as np
from flax import nnx

from harnessrl_jax import distributed

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tiny_config():
  spec = importlib.util.spec_from_file_location("tiny", os.path.join(REPO, "configs", "tiny.py"))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  cfg = module.get_config()
  cfg.rollout.max_new_tokens = 8   # the test's time; the steps are what it checks
  cfg.rl.mesh.fsdp = -1            # the learner and sampler over every device of the cluster
  return cfg


def run(out_dir: str) -> None:
  # pylint: disable=g-import-not-at-top
  from harnessrl_jax import harness, loop, train
  from harnessrl_jax.checkpoint import config_text
  from harnessrl_jax.harness.ops import EnforceSchedule
  from harnessrl_jax.judges.factory import make_judge
  from harnessrl_jax.models.loading import load_model
  from harnessrl_jax.rl import mesh as rl_mesh
  from harnessrl_jax.rl.train_step import (StepConfig, build_step, decoder_forward,
                                           make_logprob_fn)
  from harnessrl_jax.rollout import Sampler
  # pylint: enable=g-import-not-at-top
  cfg = tiny_config()
  distributed.check_consistent(distributed.run_digests(config_text(cfg)))
  train_tasks, _ = train.preflight(cfg)
  loaded = load_model(cfg.model)
  graphdef, params = nnx.split(loaded.model)
  pb = loaded.prompt_builder
  judge = make_judge(cfg.judge, loaded=loaded)
  mesh = train.check_mesh(cfg.rl.mesh)
  sampler = Sampler.from_config(graphdef, cfg.rollout, pad_id=pb.pad_id,
                                eos_token_ids=pb.eos_token_ids, mesh=mesh)
  h = harness.from_tasks(train_tasks, cfg.harness)
  workdir = os.path.join(out_dir, f"work_{jax.process_count()}_{jax.process_index()}")
  os.makedirs(workdir, exist_ok=True)
  evolve, memory, setup_ops = train.build_evolve(cfg, workdir, judge=judge, graphdef=graphdef,
                                                 prompt_builder=pb)
  for op in setup_ops:
    h = harness.apply(h, op)
  if memory is not None:
    memory.sync_rubrics(h)
  initial_sha = train.params_sha256(params)
  initial = {jax.tree_util.keystr(p): np.asarray(x)
             for p, x in jax.tree_util.tree_leaves_with_path(params)}
  initial_harness = harness.digest(h)
  tx, _ = build_step(decoder_forward(graphdef), cfg.rl)
  state, shardings = rl_mesh.init_state(params, tx, mesh,
                                        ref_params=params if cfg.rl.beta > 0 else None)
  _, train_step = build_step(decoder_forward(graphdef), cfg.rl, mesh=mesh,
                             state_sharding=shardings)
  logprob_fn = make_logprob_fn(decoder_forward(graphdef), StepConfig.from_config(cfg.rl),
                               mesh=mesh)
  learner = loop.Learner(train_tasks, pb, sampler, judge, train_step, logprob_fn,
                         int(cfg.rl.tasks_per_step), int(cfg.rollout.num_samples),
                         int(cfg.rl.num_epochs), cfg.rollout, cfg.rl, mesh)
  run_key = jax.random.key(cfg.seed)
  steps = int(cfg.train.steps)
  rows = []
  for step in range(steps):
    h = harness.apply(h, EnforceSchedule(step, steps))
    draw_key, roll_key, evolve_key = loop.step_keys(run_key, step)
    state, rec = loop.rl_step(learner, state, h, step, draw_key, roll_key)
    h, _ = evolve(h, memory, rec, params=state.params, key=evolve_key)
    rows.append({"tasks": list(rec.task_indices), "responses": rec.responses,
                 "rewards": rec.judged.rewards.tolist(),
                 **{k: float(v) for k, v in rec.metrics.items()
                    if k not in ("seconds", "tokens_per_s")}})   # timings differ
  # distributed.local_batch + shard_batch rebuild a whole batch once, on any process count.
  rows_in = {"x": np.arange(8 * 3, dtype=np.float32).reshape(8, 3), "y": np.arange(8)}
  rows_out = distributed.to_host(rl_mesh.shard_batch(distributed.local_batch(rows_in, mesh),
                                                     mesh))
  batch_roundtrip = all(np.array_equal(rows_out[k], rows_in[k]) for k in rows_in)
  host_params = distributed.to_host(state.params)
  leaves = jax.tree_util.tree_leaves_with_path(host_params)
  result = {"process": jax.process_index(), "processes": jax.process_count(),
            "devices": jax.device_count(), "mesh": None if mesh is None else dict(mesh.shape),
            "initial_params_sha256": initial_sha,
            "params_sha256": train.params_sha256(host_params), "harness": harness.digest(h),
            "initial_harness": initial_harness, "batch_roundtrip": batch_roundtrip,
            "steps": rows}
  with open(os.path.join(out_dir, f"result_{jax.process_index()}.json"), "w",
            encoding="utf-8") as f:
    json.dump(result, f)
  if distributed.is_primary():
    np.savez(os.path.join(out_dir, f"params_{jax.process_count()}.npz"),
             **{jax.tree_util.keystr(p): np.asarray(x) for p, x in leaves})
    np.savez(os.path.join(out_dir, "initial_params.npz"), **initial)


if __name__ == "__main__":
  run(sys.argv[1])
