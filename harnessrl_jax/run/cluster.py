"""Multi-process JAX: forming the cluster, refusing hosts that disagree, who writes files.

A run on several hosts (or several CPU processes on one machine) is one JAX cluster: every
process runs the same driver, sees all devices through `jax.devices()`, feeds only its own
rows of each batch (`models.sharding.local_rows`), and only process 0 writes the run's files
(`is_primary`); Orbax checkpoints are written cooperatively by all processes.

Where the cluster comes from, first match wins:
  1. explicit arguments / the --coordinator_address, --num_processes, --process_id flags;
  2. HARNESSRL_COORDINATOR, HARNESSRL_NUM_PROCESSES, HARNESSRL_PROCESS_ID (all three);
  3. HARNESSRL_AUTO_CLUSTER=1: JAX's own detection (SLURM srun steps, Cloud TPU pods);
  4. an srun step of several tasks (SLURM_STEP_NODELIST, SLURM_NTASKS > 1): the same;
  5. none of these: a single process, nothing to initialise.

The driver needs one call before it creates any array:
  cluster.initialize_from_flags()
and, once its config is known, one check that every host runs the same config and code:
  cluster.check_consistent(cluster.run_digests(config_text))

`python -m harnessrl_jax.distributed` (the launcher) does both for a driver that does not.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import os
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import numpy as np
from jax.experimental import multihost_utils

from harnessrl_jax.errors import ConfigError, HarnessError

ENV_COORDINATOR = "HARNESSRL_COORDINATOR"
ENV_NUM_PROCESSES = "HARNESSRL_NUM_PROCESSES"
ENV_PROCESS_ID = "HARNESSRL_PROCESS_ID"
ENV_AUTO = "HARNESSRL_AUTO_CLUSTER"
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # harnessrl_jax/
# Library versions that change numerics or the checkpoint format between hosts.
LIBRARIES = ("jax", "jaxlib", "flax", "optax", "orbax-checkpoint", "numpy")
DIGEST_PARTS = ("config", "code", "libraries")


@dataclasses.dataclass(frozen=True)
class ClusterSpec:
  """How this process joins the cluster; `auto` leaves the three fields to JAX."""

  coordinator: str | None = None
  num_processes: int = 1
  process_id: int = 0
  auto: bool = False
  source: str = "single process"

  @property
  def multi(self) -> bool:
    return self.auto or self.num_processes > 1


def _int(value: str, name: str) -> int:
  try:
    return int(value)
  except ValueError:
    raise ConfigError(f"{name} = {value!r}: not an integer") from None


def _validate(spec: ClusterSpec) -> ClusterSpec:
  if spec.auto:
    return spec
  where = spec.source
  if spec.num_processes < 1:
    raise ConfigError(f"{where}: num_processes = {spec.num_processes}: must be >= 1")
  if not 0 <= spec.process_id < spec.num_processes:
    raise ConfigError(f"{where}: process_id = {spec.process_id} is outside 0.."
                      f"{spec.num_processes - 1} (num_processes = {spec.num_processes})")
  if spec.num_processes > 1:
    host, _, port = (spec.coordinator or "").rpartition(":")
    if not host or not port.isdigit():
      raise ConfigError(f"{where}: coordinator address {spec.coordinator!r} is not HOST:PORT "
                        "(process 0's address and a free port, e.g. 10.0.0.1:8476)")
  return spec


def cluster_spec(coordinator: str | None = None, num_processes: int | None = None,
                 process_id: int | None = None,
                 environ: Mapping[str, str] | None = None) -> ClusterSpec:
  """The cluster this process belongs to (see the module docstring for the order)."""
  environ = os.environ if environ is None else environ
  given = (coordinator, num_processes, process_id)
  if any(v is not None for v in given):
    if num_processes is None or process_id is None or (coordinator is None
                                                       and num_processes > 1):
      raise ConfigError("flags: give --coordinator_address, --num_processes and --process_id "
                        f"together (got {coordinator!r}, {num_processes!r}, {process_id!r})")
    return _validate(ClusterSpec(coordinator, int(num_processes), int(process_id),
                                 source="flags"))
  names = (ENV_COORDINATOR, ENV_NUM_PROCESSES, ENV_PROCESS_ID)
  present = [n for n in names if environ.get(n)]
  if present:
    missing = [n for n in names if n not in present]
    if missing:
      raise ConfigError(f"environment: {', '.join(present)} set but {', '.join(missing)} "
                        "missing; set all three (or none)")
    return _validate(ClusterSpec(environ[ENV_COORDINATOR],
                                 _int(environ[ENV_NUM_PROCESSES], ENV_NUM_PROCESSES),
                                 _int(environ[ENV_PROCESS_ID], ENV_PROCESS_ID),
                                 source="environment (HARNESSRL_*)"))
  if environ.get(ENV_AUTO, "") not in ("", "0"):
    return ClusterSpec(auto=True, source=f"{ENV_AUTO} (JAX cluster detection)")
  if environ.get("SLURM_STEP_NODELIST") and _int(environ.get("SLURM_NTASKS", "1"),
                                                 "SLURM_NTASKS") > 1:
    # An srun step of several tasks: JAX reads the node list, task count and id itself.
    return ClusterSpec(auto=True, source="SLURM step (JAX cluster detection)")
  return ClusterSpec()


def initialize(coordinator: str | None = None, num_processes: int | None = None,
               process_id: int | None = None, *,
               environ: Mapping[str, str] | None = None) -> ClusterSpec:
  """Joins the cluster (a no-op for a single process); call before any array exists."""
  spec = cluster_spec(coordinator, num_processes, process_id, environ)
  if not spec.multi:
    return spec
  if jax.distributed.is_initialized():
    return spec
  # CPU processes need a collectives backend to talk to each other; GPU/TPU ignore this.
  jax.config.update("jax_cpu_collectives_implementation", "gloo")
  try:
    if spec.auto:
      jax.distributed.initialize()
    else:
      jax.distributed.initialize(coordinator_address=spec.coordinator,
                                 num_processes=spec.num_processes,
                                 process_id=spec.process_id)
  except RuntimeError as e:
    raise HarnessError(f"{spec.source}: joining the JAX cluster failed: {e}. Call "
                       "distributed.initialize before any JAX array is created, and start "
                       "process 0 (the coordinator) at the address given") from None
  except ValueError as e:   # auto-detection found no cluster
    raise ConfigError(f"{spec.source}: {e}") from None
  return spec


_FLAGS_DEFINED: list[Any] = []


def define_flags() -> None:
  """Registers --coordinator_address / --num_processes / --process_id with absl (once)."""
  if _FLAGS_DEFINED:
    return
  from absl import flags  # pylint: disable=g-import-not-at-top
  _FLAGS_DEFINED.extend([
      flags.DEFINE_string("coordinator_address", None,
                          f"HOST:PORT of process 0 (else ${ENV_COORDINATOR})"),
      flags.DEFINE_integer("num_processes", None,
                           f"processes in the JAX cluster (else ${ENV_NUM_PROCESSES})"),
      flags.DEFINE_integer("process_id", None,
                           f"this process's index (else ${ENV_PROCESS_ID})"),
  ])


def initialize_from_flags() -> ClusterSpec:
  """`initialize` from the absl flags of `define_flags` (unset: the environment)."""
  if not _FLAGS_DEFINED:
    return initialize()
  coord, num, pid = (f.value for f in _FLAGS_DEFINED)
  return initialize(coord, num, pid)


# ---- one config, one code version


def _sha(parts: Sequence[bytes]) -> str:
  m = hashlib.sha256()
  for p in parts:
    m.update(len(p).to_bytes(8, "little"))
    m.update(p)
  return m.hexdigest()


def code_digest(root: str = PACKAGE_DIR) -> str:
  """SHA-256 over the package's .py files (relative path and bytes, sorted by path)."""
  parts = []
  for dirpath, dirnames, filenames in os.walk(root):
    dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
    for name in sorted(filenames):
      if name.endswith(".py"):
        path = os.path.join(dirpath, name)
        with open(path, "rb") as f:
          parts += [os.path.relpath(path, root).encode(), f.read()]
  return _sha(parts)


def library_digest() -> str:
  versions = []
  for lib in LIBRARIES:
    try:
      versions.append(f"{lib}=={importlib.metadata.version(lib)}".encode())
    except importlib.metadata.PackageNotFoundError:
      versions.append(f"{lib} missing".encode())
  return _sha(versions)


def run_digests(config_text: str) -> dict[str, str]:
  """{config, code, libraries} -> hex SHA-256, the parts `check_consistent` compares."""
  return {"config": _sha([config_text.encode("utf-8")]), "code": code_digest(),
          "libraries": library_digest()}


def check_consistent(digests: Mapping[str, str]) -> None:
  """Raises HarnessError unless every process passed the same digests (a no-op alone).

  All processes must call it (it is a collective). The message names each differing part
  and the processes that disagree with process 0.
  """
  if jax.process_count() == 1:
    return
  names = sorted(digests)
  mine = np.stack([np.frombuffer(bytes.fromhex(digests[n]), np.uint8) for n in names])
  every = np.asarray(multihost_utils.process_allgather(mine))   # [processes, parts, 32]
  problems = []
  for j, name in enumerate(names):
    odd = [p for p in range(every.shape[0]) if not np.array_equal(every[p, j], every[0, j])]
    if odd:
      problems.append(f"{name} differs on process(es) {odd} from process 0")
  if problems:
    raise HarnessError(f"process {jax.process_index()}: the hosts disagree: "
                       f"{'; '.join(problems)}. Run the same config file, the same checkout "
                       "of harnessrl_jax and the same requirements on every host")


# ---- per-process I/O


def is_primary() -> bool:
  """Process 0 writes the run's logs, metrics and summaries; the others write nothing."""
  return jax.process_index() == 0


def barrier(name: str) -> None:
  """All processes wait here (e.g. before reading what process 0 just wrote)."""
  if jax.process_count() > 1:
    multihost_utils.sync_global_devices(name)
