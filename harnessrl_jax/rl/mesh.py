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
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from harnessrl_jax.errors import refuse
from harnessrl_jax.models import sharding as model_sharding
from harnessrl_jax.rl.batch import RLBatch
from harnessrl_jax.rl.config import MeshConfig
from harnessrl_jax.rl.train_state import TrainState, create_train_state


def mesh_from_config(mesh_cfg: Any, devices: Sequence[jax.Device] | None = None) -> Mesh:
  """config.rl.mesh (a section or its `MeshConfig`) over `devices` (default: all of them);
  a -1 axis takes the devices the others leave, a fully sized mesh the first ones."""
  devices = list(jax.devices() if devices is None else devices)
  m = MeshConfig.from_config(mesh_cfg)
  refuse(m.device_problems(len(devices)))
  sizes = m.resolve(len(devices))
  return model_sharding.make_mesh(sizes, devices[:math.prod(sizes.values())])


def mesh_for_devices(mesh_cfg: Any, devices: Sequence[jax.Device] | None = None
                     ) -> Mesh | None:
  """The learner's mesh: `mesh_from_config`, or None when it holds a single device (the
  run then places nothing). `harnessrl_jax.config.validate` refuses meshes that do not fit
  the devices (with the process count) beforehand; this raises the same problems if not."""
  mesh = mesh_from_config(mesh_cfg, devices)
  return mesh if mesh.size > 1 else None


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
    # Own buffers for the policy too: the loaded model that `params` came from may live on
    # (a local judge reusing it, `judges.config.same_model`), and donation would free it.
    return create_train_state(jax.tree.map(jnp.copy, params), tx, ref_params), None
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
