"""Placing the learner on a device mesh ('data', 'fsdp', 'tensor').

Params (and the frozen reference) follow the model's logical-axis rules
(`models.sharding.param_shardings`); every optimiser-state copy of the params follows the
params; counters are replicated. Batches split their rows over data x fsdp. Batches are built
from each process's local rows (`jax.make_array_from_process_local_data`), so the same code
runs on one device, fake CPU devices, a GPU host, a TPU slice or several hosts.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from harnessrl_jax.errors import ConfigError
from harnessrl_jax.models import sharding as model_sharding
from harnessrl_jax.rl.batch import RLBatch
from harnessrl_jax.rl.train_state import TrainState, create_train_state


def mesh_from_config(mesh_cfg: ml_collections.ConfigDict,
                     devices: Sequence[jax.Device] | None = None) -> Mesh:
  """config.rl.mesh -> Mesh; one axis may be -1 (the devices the others leave)."""
  devices = list(jax.devices() if devices is None else devices)
  sizes = {a: int(mesh_cfg.get(a, 1)) for a in model_sharding.MESH_AXES}
  free = [a for a, s in sizes.items() if s == -1]
  if len(free) > 1 or any(s == 0 or s < -1 for s in sizes.values()):
    raise ConfigError(f"config.rl.mesh = {sizes}: sizes must be positive, at most one -1")
  if free:
    known = math.prod(s for s in sizes.values() if s > 0)
    if len(devices) % known:
      raise ConfigError(f"config.rl.mesh = {sizes}: {len(devices)} devices are not a "
                        f"multiple of {known}")
    sizes[free[0]] = len(devices) // known
  return model_sharding.make_mesh(sizes, devices)


def state_shardings(params: Any, tx: optax.GradientTransformation, mesh: Mesh,
                    with_ref: bool = False, rules=None) -> TrainState:
  """A TrainState of NamedShardings for `params` (concrete or abstract) and optimiser `tx`."""
  replicated = NamedSharding(mesh, PartitionSpec())
  param_sh = model_sharding.param_shardings(params, mesh, rules)
  opt_abstract = jax.eval_shape(tx.init, params)
  opt_sh = optax.tree_utils.tree_map_params(
      tx, lambda _, s: s, opt_abstract, param_sh, transform_non_params=lambda _: replicated,
      is_leaf=lambda x: isinstance(x, NamedSharding))
  return TrainState(step=replicated, params=param_sh, opt_state=opt_sh,
                    ref_params=param_sh if with_ref else None, skipped_steps=replicated)


def init_state(params: Any, tx: optax.GradientTransformation, mesh: Mesh | None = None,
               ref_params: Any = None) -> tuple[TrainState, TrainState | None]:
  """A step-0 TrainState placed on `mesh` and its shardings (None without a mesh)."""
  if ref_params is not None:
    # Own buffers: the step donates its state, and a reference sharing the policy's arrays
    # (the usual start, ref = initial policy) would be donated twice.
    ref_params = jax.tree.map(jnp.copy, ref_params)
  if mesh is None:
    return create_train_state(params, tx, ref_params), None
  sh = state_shardings(params, tx, mesh, with_ref=ref_params is not None)
  # Place params first so init never gathers a whole model on one device.
  params = jax.device_put(params, sh.params)
  if ref_params is not None:
    ref_params = jax.device_put(ref_params, sh.ref_params)
  state = jax.jit(lambda p, r: create_train_state(p, tx, r), out_shardings=sh)(params,
                                                                               ref_params)
  return state, sh


def shard_batch(local: RLBatch, mesh: Mesh | None) -> RLBatch:
  """Global batch arrays from this process's rows (all rows on a single host)."""
  if mesh is None:
    return jax.tree.map(jnp.asarray, local)

  def put(x):
    x = np.asarray(x)
    return jax.make_array_from_process_local_data(
        model_sharding.batch_sharding(mesh, x.ndim), x)

  return jax.tree.map(put, local)
