"""A run directory's checkpoints and its config guard.

  WORKDIR/config.json          the run's config (canonical JSON) and its SHA-256; a rerun
                               with another config is refused
  WORKDIR/checkpoints/<step>/  Orbax: `state` (params, optimiser state, counters, run key)
                               and `meta` (JSON: harness digest and canonical form, history
                               length, data order, running summary)
  WORKDIR/memory/<step>/       the evolver memory at that checkpoint (memory/store.py)

On several processes (distributed.py) all of them save and restore each checkpoint
together (Orbax writes each process's shards and process 0 the metadata), while
config.json and the memory directories are written by process 0 alone.

Step s is the state after s completed training steps. Orbax writes each step into a
temporary directory and renames it when complete, so `latest()` only ever names a
complete checkpoint; a memory directory is written (atomically) before its checkpoint and
removed only once no kept checkpoint names it. Kept: the latest `keep` checkpoints plus the
best by held-out reward. Saves are synchronous: the next train step donates the buffers.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp
from orbax.checkpoint.checkpoint_managers import preservation_policy as pp

from harnessrl_jax import distributed, run_files
from harnessrl_jax.errors import ConfigError

METRIC = "heldout_reward"


def config_text(config) -> str:
  """The config as canonical JSON (sorted keys, tuples as lists)."""
  return json.dumps(json.loads(config.to_json_best_effort()), sort_keys=True, indent=1)


def _flat(obj: Any, prefix: str = "") -> dict[str, Any]:
  if isinstance(obj, dict):
    out = {}
    for k, v in obj.items():
      out.update(_flat(v, f"{prefix}{k}."))
    return out
  return {prefix[:-1]: obj}


def _check_config(config, workdir: str, *, write: bool) -> bool:
  """True if WORKDIR/config.json holds `config`; writes it when absent and `write`."""
  text = config_text(config)
  digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
  path = os.path.join(workdir, run_files.CONFIG)
  if os.path.exists(path):
    with open(path, encoding="utf-8") as f:
      old = json.load(f)
    if old.get("sha256") == digest:
      return True
    a, b = _flat(old.get("config", {})), _flat(json.loads(text))
    diff = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    shown = ", ".join(f"{k}: {a.get(k)!r} -> {b.get(k)!r}" for k in diff[:6])
    raise ConfigError(f"{workdir} holds a run with another config ({path}); differing "
                      f"fields: {shown}{' ...' if len(diff) > 6 else ''}. Use a new "
                      "--workdir, or rerun with the stored config to resume it")
  if not write:
    raise ConfigError(f"{path}: process 0 wrote the run's config there but this process "
                      "does not see it: --workdir must be on a filesystem every host sees")
  os.makedirs(workdir, exist_ok=True)
  tmp = path + ".tmp"
  with open(tmp, "w", encoding="utf-8") as f:
    json.dump({"sha256": digest, "config": json.loads(text)}, f, indent=1, sort_keys=True)
    f.flush()
    os.fsync(f.fileno())
  os.replace(tmp, path)
  return False


def guard_config(config, workdir: str) -> bool:
  """Writes WORKDIR/config.json on first use; True if the workdir already held this
  config. A different config raises ConfigError naming the fields that differ.

  On several processes process 0 checks and writes, and the others then check what it
  wrote, so every process refuses the same workdir (all must call this: it holds a
  barrier).
  """
  if not distributed.is_primary():
    distributed.barrier("config_guard")   # process 0 has checked (and written) it
    return _check_config(config, workdir, write=False)
  try:
    return _check_config(config, workdir, write=True)
  finally:
    distributed.barrier("config_guard")   # on a refusal too: the others then refuse alike


def state_tree(state, run_key: jax.Array) -> dict[str, Any]:
  """What Orbax stores of a TrainState (the frozen reference is rebuilt from the model).

  The run key goes in as NumPy: it lives on one device of each process, and Orbax refuses
  such host-local arrays on several processes.
  """
  return {"params": state.params, "opt_state": state.opt_state, "step": state.step,
          "skipped_steps": state.skipped_steps,
          "key": np.asarray(jax.random.key_data(run_key))}


def restore_target(tree: dict[str, Any]) -> dict[str, Any]:
  """The abstract tree that restores `tree`'s arrays with their shardings (NumPy leaves
  come back as NumPy)."""
  return jax.tree.map(
      lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding)
      if isinstance(x, jax.Array) else x, tree)


def run_key_of(tree: dict[str, Any]) -> jax.Array:
  """The run key a restored `state_tree` holds."""
  return jax.random.wrap_key_data(np.asarray(tree["key"]))


class RunCheckpoints:
  """Save / find / restore a run's checkpoints (see module docstring)."""

  def __init__(self, workdir: str, keep: int = 2):
    self.workdir = os.path.abspath(workdir)
    self.memory_root = os.path.join(self.workdir, run_files.MEMORY)
    policy = pp.AnyPreservationPolicy([
        pp.LatestN(max(int(keep), 1)),
        pp.BestN(get_metric_fn=lambda m: m[METRIC], n=1,
                 keep_checkpoints_without_metrics=False)])
    # best_fn only makes Orbax store each step's metrics (and answer best_step); what is
    # kept is the policy's call.
    options = ocp.CheckpointManagerOptions(
        preservation_policy=policy, best_fn=lambda m: m[METRIC], best_mode="max",
        enable_async_checkpointing=False, create=True, cleanup_tmp_directories=True)
    self.manager = ocp.CheckpointManager(os.path.join(self.workdir, run_files.CHECKPOINTS),
                                         options=options, item_names=("state", "meta"))

  def memory_dir(self, step: int) -> str:
    return os.path.join(self.memory_root, str(step))

  def latest(self) -> int | None:
    self.manager.reload()
    return self.manager.latest_step()

  def steps(self) -> list[int]:
    self.manager.reload()
    return sorted(self.manager.all_steps())

  def best(self) -> int | None:
    return self.manager.best_step()

  def save(self, step: int, tree: dict[str, Any], meta: dict[str, Any], *, memory=None,
           heldout_reward: float | None = None) -> None:
    if memory is not None and distributed.is_primary():   # every process holds the same
      memory.save(self.memory_dir(step))
    metrics = None if heldout_reward is None else {METRIC: float(heldout_reward)}
    self.manager.save(step, args=ocp.args.Composite(state=ocp.args.StandardSave(tree),
                                                    meta=ocp.args.JsonSave(meta)),
                      metrics=metrics, force=True)
    self.manager.wait_until_finished()
    if distributed.is_primary():
      self._collect_memory()

  def restore(self, step: int, abstract_tree: dict[str, Any]) -> tuple[dict, dict]:
    out = self.manager.restore(step, args=ocp.args.Composite(
        state=ocp.args.StandardRestore(abstract_tree), meta=ocp.args.JsonRestore()))
    return out["state"], out["meta"]

  def meta(self, step: int) -> dict[str, Any]:
    return self.manager.restore(step, args=ocp.args.Composite(
        meta=ocp.args.JsonRestore()))["meta"]

  def _collect_memory(self) -> None:
    if not os.path.isdir(self.memory_root):
      return
    kept = {str(s) for s in self.steps()}
    for name in os.listdir(self.memory_root):
      if name not in kept:
        shutil.rmtree(os.path.join(self.memory_root, name), ignore_errors=True)

  def close(self) -> None:
    self.manager.close()
