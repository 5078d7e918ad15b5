"""Named accelerator topologies, compiled for with no device present (deviceless AOT).

`--topology=KIND:SHAPE`:
  GPU   h100:16x8  = 16 hosts x 8 GPUs;  h100:8 = one host of 8.  Kinds: h100, h200, a100.
        Needs jax-cuda12-plugin and jax-cuda12-pjrt at jax's version (requirements-cuda.txt);
        XLA compiles for the device described by a GpuTargetConfig text proto built here.
  TPU   v5p:4x4x8 (chips along each torus axis, as Cloud TPU names slices), v4:2x2x2,
        v5e:4x4, v6e:4x4.  Needs libtpu (requirements-tpu.txt).

`DEVICE_KINDS` is the one table of per-device memory and peak bf16 rate the check and the
plan use. HBM is what the device reports to its runtime (nvidia-smi's total for GPUs);
JAX on GPU preallocates XLA_PYTHON_CLIENT_MEM_FRACTION of it (0.75 unless set), which is why
the verdict compares against a fraction (`usable_bytes`).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import os
import re
import site
import sys
from typing import Any

from harnessrl_jax.errors import ConfigError

# Where `AOT=1 bash launch/setup_venv.sh` puts the compile-only CUDA and TPU plugins
# (requirements-aot.txt): beside the venv's packages, not among them, because jax imports
# every plugin it finds at start-up, in every program: on a machine without a GPU the CUDA
# plugin then writes "Could not find cuda drivers" to stderr, and libtpu tries to start a TPU
# unless JAX_PLATFORMS says otherwise. Only the check looks there. (ACCEL=cuda / tpu installs
# put the plugins among the packages: they are that machine's own.)
PLUGINS_DIR = os.path.join(sys.prefix, "aot-plugins")
_PLUGIN_MODULES = {"cuda": ("jax_plugins", "xla_cuda12"), "tpu": ("libtpu",)}

MIB = 2**20
GIB = 2**30
# JAX's GPU allocator takes 75% of HBM at start-up unless XLA_PYTHON_CLIENT_MEM_FRACTION says
# otherwise; launch/slurm_gpu.sh sets it to this, the check's budget on GPUs.
GPU_MEMORY_FRACTION = 0.92


@dataclasses.dataclass(frozen=True)
class DeviceKind:
  """One accelerator model: what the verdict and the FLOP figures need."""

  name: str
  platform: str            # "cuda" or "tpu"
  hbm_bytes: int           # per device, as its runtime reports
  bf16_flops: float        # dense peak per device, FLOP/s (vendor datasheet)
  # GPU only: the few device facts XLA's GPU compiler reads (gpu_device_info fields).
  gpu_info: tuple[tuple[str, Any], ...] = ()
  tpu_chip_config: str = ""   # libtpu chip_config_name ("megacore": one device per chip)

  @property
  def default_fraction(self) -> float:
    return GPU_MEMORY_FRACTION if self.platform == "cuda" else 1.0


def _hopper(memory_bytes: int, bandwidth: float) -> tuple[tuple[str, Any], ...]:
  return (("core_count", 132), ("memory_bandwidth", int(bandwidth)),
          ("l2_cache_size", 50 * MIB), ("clock_rate_ghz", 1.98),
          ("device_memory_size", memory_bytes), ("shared_memory_per_block_optin", 232448),
          ("shared_memory_per_core", 233472), ("compute_capability", (9, 0)))


DEVICE_KINDS: dict[str, DeviceKind] = {k.name: k for k in (
    # nvidia-smi totals: H100 SXM 80GB 81559 MiB; H200 143771 MiB (seen on the lent H200).
    DeviceKind("h100", "cuda", 81559 * MIB, 989e12, _hopper(81559 * MIB, 3.35e12)),
    DeviceKind("h200", "cuda", 143771 * MIB, 989e12, _hopper(143771 * MIB, 4.8e12)),
    DeviceKind("a100", "cuda", 81920 * MIB, 312e12,
               (("core_count", 108), ("memory_bandwidth", int(2.04e12)),
                ("l2_cache_size", 40 * MIB), ("clock_rate_ghz", 1.41),
                ("device_memory_size", 81920 * MIB), ("shared_memory_per_block_optin", 166912),
                ("shared_memory_per_core", 167936), ("compute_capability", (8, 0)))),
    DeviceKind("v4", "tpu", 32 * GIB, 275e12, tpu_chip_config="megacore"),
    DeviceKind("v5e", "tpu", 16 * GIB, 197e12, tpu_chip_config="default"),
    DeviceKind("v5p", "tpu", 95 * GIB, 459e12, tpu_chip_config="megacore"),
    DeviceKind("v6e", "tpu", 32 * GIB, 918e12, tpu_chip_config="default"),
)}

_GPU_FIXED = {   # the same on every NVIDIA GPU XLA supports
    "threads_per_block_limit": 1024, "threads_per_warp": 32, "shared_memory_per_block": 49152,
    "threads_per_core_limit": 2048, "fpus_per_core": 128, "block_dim_limit_x": 2147483647,
    "block_dim_limit_y": 65535, "block_dim_limit_z": 65535, "registers_per_core_limit": 65536,
    "registers_per_block_limit": 65536}


@dataclasses.dataclass(frozen=True)
class Topology:
  """A parsed --topology value."""

  kind: DeviceKind
  shape: tuple[int, ...]     # GPU: (hosts, gpus per host); TPU: chips per torus axis
  spec: str                  # as the user wrote it

  @property
  def num_devices(self) -> int:
    return math.prod(self.shape)

  @property
  def name(self) -> str:
    return f"{self.kind.name}:{'x'.join(map(str, self.shape))}"


def parse_topology(spec: str) -> Topology:
  """'h100:16x8' / 'h100:8' / 'v5p:4x4x8' -> Topology; a ConfigError lists the choices."""
  m = re.fullmatch(r"\s*([a-z0-9]+)\s*:\s*(\d+(?:x\d+)*)\s*", spec or "")
  choices = ", ".join(DEVICE_KINDS)
  if not m or m.group(1) not in DEVICE_KINDS:
    raise ConfigError(f"--topology={spec!r}: expected KIND:SHAPE with KIND one of {choices} "
                      "(e.g. h100:16x8 for 16 hosts x 8 GPUs, v5p:4x4x8 for a TPU slice)")
  kind = DEVICE_KINDS[m.group(1)]
  shape = tuple(int(x) for x in m.group(2).split("x"))
  if kind.platform == "cuda":
    shape = (1,) + shape if len(shape) == 1 else shape
    if len(shape) != 2:
      raise ConfigError(f"--topology={spec!r}: a GPU topology is HOSTSxGPUS (e.g. h100:16x8) "
                        "or GPUS on one host (h100:8)")
  elif len(shape) not in (2, 3):
    raise ConfigError(f"--topology={spec!r}: a TPU slice is named by its chips per torus "
                      "axis, e.g. v5p:4x4x8 or v5e:4x4")
  if min(shape) < 1:
    raise ConfigError(f"--topology={spec!r}: every size must be >= 1")
  return Topology(kind, shape, spec)


def gpu_target_config(kind: DeviceKind) -> str:
  """The GpuTargetConfig text proto XLA compiles against for `kind` (a subset of the
  fields XLA's own device specs carry: the rest default)."""
  info = dict(_GPU_FIXED, **dict(kind.gpu_info))
  major, minor = info.pop("compute_capability")
  lines = [f"  {k}: {v}" for k, v in info.items()]
  lines.append(f"  cuda_compute_capability {{ major: {major} minor: {minor} }}")
  return ("gpu_device_info {\n" + "\n".join(lines) + "\n}\n"
          'platform_name: "CUDA"\n'
          "dnn_version_info { major: 9 minor: 1 patch: 0 }\n"
          f'device_description_str: "{kind.name.upper()}"\n')


def compile_only_devices(topology: Topology) -> list:
  """The topology's devices, for compiling only (no device needed). Raises a ConfigError
  naming the requirements file when the platform's compiler plugin is not installed."""
  # pylint: disable-next=g-import-not-at-top
  from jax.experimental import topologies
  kind = topology.kind
  try:
    if kind.platform == "cuda":
      hosts, per_host = topology.shape
      desc = topologies.get_topology_desc(platform="cuda", topology=f"1x{hosts}x{per_host}",
                                          target_config=gpu_target_config(kind))
    else:
      os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")   # tests compile in parallel
      shape = topology.shape + (1,) * (3 - len(topology.shape))
      desc = topologies.get_topology_desc(
          topology_name=f"{kind.name}:{'x'.join(map(str, topology.shape))}", platform="tpu",
          chip_config_name=kind.tpu_chip_config, num_slices=1,
          chips_per_host_bounds=_tpu_host_bounds(kind, shape))
  except Exception as e:  # pylint: disable=broad-except
    # Missing plugins surface as several exception types, depending on the jax version.
    first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    req = "requirements-cuda.txt" if kind.platform == "cuda" else "requirements-tpu.txt"
    raise ConfigError(f"--topology={topology.spec}: cannot describe {kind.platform} devices "
                      f"({first}); install the compiler plugin: pip install -r {req}") from None
  devices = list(desc.devices)
  if len(devices) != topology.num_devices:
    raise ConfigError(f"--topology={topology.spec}: the compiler describes {len(devices)} "
                      f"devices, expected {topology.num_devices}")
  return devices


def _tpu_host_bounds(kind: DeviceKind, shape: tuple[int, int, int]) -> tuple[int, int, int]:
  # Cloud TPU hosts hold 4 chips (2x2x1); a slice smaller than that is one host.
  del kind
  return tuple(min(s, b) for s, b in zip(shape, (2, 2, 1)))


def usable_bytes(kind: DeviceKind, fraction: float | None = None) -> int:
  """The bytes a run may plan to use per device: HBM x the allocator's fraction."""
  return int(kind.hbm_bytes * (kind.default_fraction if fraction is None else fraction))


def use_compile_only_plugins() -> None:
  """Adds PLUGINS_DIR (when it exists) as a site directory, as `pip install --target` made
  it: its packages, .pth files and dist-info (jax finds plugins by their entry points)
  become visible to this process only. Call before jax starts a backend."""
  if os.path.isdir(PLUGINS_DIR):
    site.addsitedir(PLUGINS_DIR)   # idempotent: a directory already known is skipped


def has_compiler(platform: str) -> bool:
  """Whether `platform`'s ("cuda", "tpu") compiler plugin is installed, among the packages
  or in PLUGINS_DIR."""
  parts = _PLUGIN_MODULES[platform]
  if os.path.isdir(os.path.join(PLUGINS_DIR, *parts)):
    return True
  try:
    return importlib.util.find_spec(".".join(parts)) is not None
  except ModuleNotFoundError:   # the parent package (jax_plugins) is not installed either
    return False
