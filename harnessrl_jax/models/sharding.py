"""Logical parameter axes -> mesh axes ('data', 'fsdp', 'tensor') -> NamedShardings.

Every parameter names its dimensions with logical axes (see layers.py). `DEFAULT_RULES` map
them to mesh axes:

  logical   mesh       why
  batch     data,fsdp  activations: batch rows split over data- and fsdp-parallel devices
  vocab     tensor     embedding rows / unembedding columns
  embed     fsdp       the model dimension of every matrix: ZeRO-3 style parameter sharding
  q_heads   tensor     attention heads (Megatron-style column / row parallel)
  kv_heads  tensor
  mlp       tensor     the SwiGLU hidden dimension
  norm, head_dim  -    replicated (vectors)
  layers    -          the stacked-layer axis of scanned blocks
  linear_v, linear_heads  tensor   Gated DeltaNet value heads (its z, gates, out_proj)
  linear_conv, linear_conv_kernel  -   its q|k|v conv channels: splitting them would cut
                       across the q/k/v boundaries the layer splits at
  per_layer  -         Gemma 4's per-layer inputs (layers x 256 wide: small)
  experts    -         Gemma 4 MoE: the expert axis (every expert runs on every token)
  moe_mlp    tensor    an expert's hidden dimension (its gate|up rows, down columns)

A dimension whose size is not divisible by its mesh axes' total size stays replicated (e.g.
9 heads on a 4-way tensor axis), and a mesh axis absent from the mesh is ignored, so one rule
set serves every mesh shape.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import numpy as np
from flax import nnx
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from harnessrl_jax.errors import ConfigError

MESH_AXES = ("data", "fsdp", "tensor")
Rules = Mapping[str, str | tuple[str, ...] | None]

DEFAULT_RULES: Rules = {
    "batch": ("data", "fsdp"),
    "vocab": "tensor",
    "embed": "fsdp",
    "q_heads": "tensor",
    "kv_heads": "tensor",
    "mlp": "tensor",
    "norm": None,
    "head_dim": None,
    "layers": None,
    "linear_v": "tensor",
    "linear_heads": "tensor",
    "linear_conv": None,
    "linear_conv_kernel": None,
    "per_layer": None,
    "experts": None,
    "moe_mlp": "tensor",
}


def make_mesh(shape: Mapping[str, int], devices: Sequence[jax.Device] | None = None) -> Mesh:
  """A mesh with axes ('data', 'fsdp', 'tensor'); missing axes get size 1.

  The product of the sizes must equal the number of devices used (all devices by default).
  """
  unknown = sorted(set(shape) - set(MESH_AXES))
  if unknown:
    raise ConfigError(f"mesh shape: unknown axes {unknown}; use {MESH_AXES}")
  sizes = tuple(int(shape.get(a, 1)) for a in MESH_AXES)
  devices = list(jax.devices() if devices is None else devices)
  if math.prod(sizes) != len(devices):
    raise ConfigError(f"mesh shape {dict(zip(MESH_AXES, sizes))} needs {math.prod(sizes)} "
                      f"devices; {len(devices)} available")
  return Mesh(np.asarray(devices).reshape(sizes), MESH_AXES)


def logical_to_spec(axes: Sequence[str | None] | None, shape: Sequence[int], mesh: Mesh,
                    rules: Rules | None = None) -> PartitionSpec:
  """The PartitionSpec for one array with logical `axes` on `mesh`."""
  rules = DEFAULT_RULES if rules is None else rules
  if not axes:
    return PartitionSpec()
  used: set[str] = set()
  spec = []
  for name, size in zip(axes, shape):
    target = rules.get(name) if name is not None else None
    if name is not None and name not in rules:
      raise ConfigError(f"sharding rules: no rule for logical axis {name!r}; have {sorted(rules)}")
    mesh_axes = (target,) if isinstance(target, str) else tuple(target or ())
    mesh_axes = tuple(a for a in mesh_axes if a in mesh.shape and a not in used)
    total = math.prod(mesh.shape[a] for a in mesh_axes)
    if not mesh_axes or total == 1 or size % total:
      spec.append(None)
      continue
    used.update(mesh_axes)
    spec.append(mesh_axes[0] if len(mesh_axes) == 1 else mesh_axes)
  return PartitionSpec(*spec)


def _variable_sharding(v: nnx.Variable, mesh: Mesh, rules: Rules) -> nnx.Variable:
  axes = v.get_metadata().get("out_sharding")
  return v.replace(NamedSharding(mesh, logical_to_spec(axes, v.shape, mesh, rules)))


def param_shardings(params: Any, mesh: Mesh, rules: Rules | None = None) -> Any:
  """NamedShardings for a model, its `nnx.State` (concrete or abstract), same tree structure.

  Use as `jax.device_put(state, param_shardings(state, mesh))` or as jit in/out shardings.
  Leaves that are not nnx Variables (plain arrays) are replicated.
  """
  rules = DEFAULT_RULES if rules is None else rules
  if isinstance(params, nnx.Module):
    params = nnx.state(params)
  replicated = NamedSharding(mesh, PartitionSpec())

  def one(x):
    if isinstance(x, nnx.Variable):
      return _variable_sharding(x, mesh, rules)
    return replicated

  return jax.tree.map(one, params, is_leaf=lambda x: isinstance(x, nnx.Variable))


def batch_sharding(mesh: Mesh, ndim: int = 2, rules: Rules | None = None) -> NamedSharding:
  """Sharding for a [batch, ...] input: rows over the 'batch' rule's mesh axes."""
  rules = DEFAULT_RULES if rules is None else rules
  target = rules.get("batch")
  mesh_axes = (target,) if isinstance(target, str) else tuple(target or ())
  mesh_axes = tuple(a for a in mesh_axes if a in mesh.shape and mesh.shape[a] > 1)
  first = None if not mesh_axes else (mesh_axes[0] if len(mesh_axes) == 1 else mesh_axes)
  return NamedSharding(mesh, PartitionSpec(first, *([None] * (ndim - 1))))


def rows_on(mesh: Mesh | None):
  """A context to trace a jitted function under: `constrain_rows` splits rows over `mesh`'s
  batch axes inside it (nothing happens without a mesh)."""
  return (contextlib.nullcontext() if mesh is None
          else jax.sharding.use_abstract_mesh(mesh.abstract_mesh))


def constrain_rows(x: jax.Array) -> jax.Array:
  """`x` [rows, ...] with its rows split over the batch axes of the mesh the caller traces
  under (`jax.sharding.use_abstract_mesh`: the train step, the log-prob forward and the
  rollout set it); unchanged without one, or when the rows do not divide.

  The decoder applies it to the residual stream after the embedding and every block. Left
  to itself, XLA's sharding propagation resolved FSDP's [D, F] weight shards (D over
  'fsdp') by moving the activations' contraction dim onto 'fsdp' instead of gathering the
  weights, so each device held 8x the rows it owns: the paper-scale train step peaked at
  52.3 GiB per H100 that way, 20.7 GiB with these constraints (`python -m harnessrl_jax.aot
  --config=configs/paper.py --topology=h100:16x8`; docs/models.md).
  """
  mesh = jax.sharding.get_abstract_mesh()
  if mesh.empty:
    return x
  rows = batch_sharding(mesh, x.ndim)
  axes = rows.spec[0]
  if axes is None or x.shape[0] % math.prod(
      mesh.shape[a] for a in ((axes,) if isinstance(axes, str) else axes)):
    return x
  return jax.lax.with_sharding_constraint(x, rows)


# ---- per-process rows (several hosts: each feeds and reads its own part)


def local_rows(sharding: jax.sharding.Sharding, num_rows: int) -> slice:
  """The rows of a global [num_rows, ...] batch this process feeds under `sharding`.

  `jax.make_array_from_process_local_data(sharding, batch[local_rows(...)])` then builds
  the global array; the rows of one process are contiguous for a batch split on dim 0.
  """
  starts, stops = [], []
  for index in sharding.addressable_devices_indices_map((num_rows,)).values():
    rows = index[0]
    starts.append(rows.start or 0)
    stops.append(num_rows if rows.stop is None else rows.stop)
  lo, hi = min(starts), max(stops)
  return slice(lo, hi)


def local_batch(batch: Any, mesh: jax.sharding.Mesh | None) -> Any:
  """This process's rows of a batch every process holds whole (rows split on dim 0).

  For `rl.mesh.shard_batch`, which builds global arrays from process-local rows: passing
  the whole batch from each of P processes would make a batch of P copies.
  """
  if mesh is None or jax.process_count() == 1:
    return batch
  def rows(x):
    x = np.asarray(x)
    return x[local_rows(batch_sharding(mesh, x.ndim), x.shape[0])]

  return jax.tree.map(rows, batch)


def to_host(tree: Any) -> Any:
  """NumPy copies of a pytree's arrays on every process, also of arrays spread over hosts."""

  def get(x):
    if isinstance(x, jax.Array) and not x.is_fully_addressable:
      return np.asarray(multihost_utils.process_allgather(x, tiled=True))
    return np.asarray(x)

  return jax.tree.map(get, tree)
