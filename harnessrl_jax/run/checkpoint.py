"""A run directory's checkpoints and its config guard.

  WORKDIR/config.json          the run's config (canonical JSON) and its experiment part's
                               SHA-256 (run/identity.py), written once a start has
                               passed its checks; once the run has a checkpoint, a rerun
                               with another experiment is refused, while operational
                               fields may change
  WORKDIR/config_changes.jsonl each operational field a resume changed, with its step
  WORKDIR/checkpoints/<step>/  Orbax: `state` (params, optimiser state, counters, run key)
                               and `meta` (JSON: harness digest and canonical form, history
                               length and chain head, data order, running summary, and
                               the records ledger's length and head after the entry that
                               pins this metadata: run_ledger.py)
  WORKDIR/memory/<step>/       the evolver memory at that checkpoint (memory/store.py)

On several processes (run/cluster.py) all of them save and restore each checkpoint
together (Orbax writes each process's shards and process 0 the metadata), while
config.json, config_changes.jsonl and the memory directories are written by process 0
alone.

Step s is the state after s completed training steps. Orbax writes each step into a
temporary directory and renames it when complete, so `latest()` only ever names a
complete checkpoint; a memory directory is written (atomically) before its checkpoint and
removed only once no kept checkpoint names it. Kept: the latest `keep` checkpoints plus the
best by held-out reward. Saves are synchronous: the next train step donates the buffers.
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp
from orbax.checkpoint.checkpoint_managers import preservation_policy as pp

from harnessrl_jax import run_files
from harnessrl_jax.run import cluster, metrics
from harnessrl_jax.run.identity import (config_tree, differences, experiment_digest,
                                           shown)
from harnessrl_jax.errors import ConfigError
from harnessrl_jax.run_ledger import append_jsonl, write_text

METRIC = "heldout_reward"


def config_text(config) -> str:
  """The whole config as canonical JSON (sorted keys, tuples as lists): what every process
  of a run must agree on (cluster.run_digests), operational fields included."""
  return json.dumps(config_tree(config), sort_keys=True, indent=1)


def has_checkpoint(workdir: str) -> bool:
  """Whether WORKDIR holds a complete checkpoint (reads only; creates nothing)."""
  path = os.path.join(workdir, run_files.CHECKPOINTS)
  return os.path.isdir(path) and bool(ocp.utils.checkpoint_steps(path))


def _stored(path: str) -> dict[str, Any] | None:
  """The config tree WORKDIR/config.json holds, None if there is none."""
  if not os.path.exists(path):
    return None
  try:
    with open(path, encoding="utf-8") as f:
      return json.load(f)[run_files.CONFIG_TREE]
  except (OSError, ValueError, KeyError, TypeError) as e:
    raise ConfigError(f"{path}: cannot read the run's stored config ({e!r}); restore it, or "
                      "use a new --workdir") from None


def guard_config(config, workdir: str) -> None:
  """Refuses to run `config` in a workdir whose run has another experiment.

  Only a run with a complete checkpoint has an identity to protect: a workdir without one
  holds at most the config of a start that stopped before its first checkpoint, which the
  next start replaces (`record_config`). Operational fields (config_identity.OPERATIONAL)
  may differ. Reads only, so it can come before the start's other checks; every process
  calls it and, reading the same files, refuses alike.

  Raises:
    ConfigError: naming the experiment fields that differ.
  """
  path = os.path.join(workdir, run_files.CONFIG)
  stored = _stored(path)
  if stored is None or not has_checkpoint(workdir):
    return
  diff = [c for c in differences(stored, config_tree(config)) if not c.operational]
  if diff:
    raise ConfigError(f"{workdir} holds a run with another experiment ({path}); differing "
                      f"fields: {shown(diff)}. Use a new --workdir, or rerun with the stored "
                      "values to resume it (operational fields may change: "
                      "docs/operational.md)")


def record_config(config, workdir: str, *, resumed_at: int | None) -> list[str]:
  """Writes WORKDIR/config.json once a start has passed its checks; returns the lines to
  print (on process 0).

  A fresh start (`resumed_at` None) writes the config (replacing that of an earlier start
  without a checkpoint) and starts config_changes.jsonl over. A resume from checkpoint
  `resumed_at` appends each operational field whose value differs from the stored one to
  config_changes.jsonl, as {step: resumed_at, field, old, new}, after dropping rows of
  steps past the checkpoint (what the interrupted run wrote after it), and stores the new
  values; the experiment digest stays (`guard_config` refused any other experiment).

  All processes call it (it holds a barrier): process 0 writes, the others then check
  that they see what it wrote.
  """
  tree = config_tree(config)
  digest = experiment_digest(tree)
  path = os.path.join(workdir, run_files.CONFIG)
  if not cluster.is_primary():
    cluster.barrier("config_recorded")   # process 0 has written it
    try:
      with open(path, encoding="utf-8") as f:
        seen = json.load(f).get(run_files.EXPERIMENT_SHA256)
    except (OSError, ValueError):
      seen = None
    if seen != digest:
      raise ConfigError(f"{path}: process 0 wrote the run's config there but this process "
                        "does not see it: --workdir must be on a filesystem every host sees")
    return []
  try:
    return _record(tree, digest, path, os.path.join(workdir, run_files.CONFIG_CHANGES),
                   resumed_at)
  finally:
    cluster.barrier("config_recorded")   # on a failure too: the others then stop


def _record(tree: dict[str, Any], digest: str, path: str, changes_path: str,
            resumed_at: int | None) -> list[str]:
  """Process 0's part of `record_config`."""
  stored = _stored(path)
  diff = () if stored is None else differences(stored, tree)
  lines = []
  if resumed_at is None:
    if os.path.exists(changes_path):
      os.remove(changes_path)
    if diff:
      lines.append(f"{path}: replaced the config of an earlier start that stopped before "
                   f"its first checkpoint ({shown(diff)})")
  else:
    metrics.truncate_jsonl(changes_path, lambda r: r[run_files.STEP] <= resumed_at)
    rows = [{run_files.STEP: resumed_at, run_files.CHANGED_FIELD: c.field,
             run_files.OLD_VALUE: c.old, run_files.NEW_VALUE: c.new} for c in diff]
    append_jsonl(changes_path, rows)   # each row enters the run's records ledger
    lines += [f"config.{c} from step {resumed_at} on (operational; "
              f"{run_files.CONFIG_CHANGES})" for c in diff]
  _write_json(path, {run_files.EXPERIMENT_SHA256: digest, run_files.CONFIG_TREE: tree})
  return lines


def _write_json(path: str, obj: Any) -> None:
  """Writes `obj` to `path` atomically (a kill leaves the old file or the new one), through
  the run's records ledger when it has one."""
  write_text(path, json.dumps(obj, indent=1, sort_keys=True))


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
    if memory is not None and cluster.is_primary():   # every process holds the same
      memory.save(self.memory_dir(step))
    metrics = None if heldout_reward is None else {METRIC: float(heldout_reward)}
    self.manager.save(step, args=ocp.args.Composite(state=ocp.args.StandardSave(tree),
                                                    meta=ocp.args.JsonSave(meta)),
                      metrics=metrics, force=True)
    self.manager.wait_until_finished()
    if cluster.is_primary():
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
