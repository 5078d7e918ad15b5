"""The one config tree and its one check.

`base_config()` mounts a section per subpackage; each subpackage documents its fields next
to its code (models/config.py, rollout/config.py, judges/config.py, rl/config.py,
harness/config.py, memory/config.py, evolver/config.py, run/config.py). Experiment files in
configs/ call `base_config()` and override fields; a field that does not exist here cannot
be set (the tree is locked: unknown keys and wrong types fail at start-up).

Code reads a section through its frozen typed view (`RolloutConfig.from_config(cfg.rollout)`,
...), built once where the section enters a subpackage. `validate(cfg)` builds every view
and adds the checks that span sections or depend on the devices, and refuses a config that
cannot run with one ConfigError listing every problem, one line each. Which fields define
the experiment and which may change when a run resumes: run/identity.py.
"""

from __future__ import annotations

import ml_collections

from harnessrl_jax.errors import ConfigError, refuse
from harnessrl_jax.evolver.config import AblationConfig, EvolverConfig, evolver_defaults
from harnessrl_jax.harness.config import HarnessConfig, harness_defaults
from harnessrl_jax.judges.config import JudgeConfig, judge_defaults
from harnessrl_jax.memory.config import MemoryConfig, memory_defaults
from harnessrl_jax.models.config import ModelSettings, model_defaults
from harnessrl_jax.rl.config import RLConfig, rl_defaults
from harnessrl_jax.rl.train_step import StepConfig
from harnessrl_jax.rollout.config import RolloutConfig, rollout_defaults
from harnessrl_jax.run.config import (DataConfig, TrainConfig, ablation_defaults,
                                        data_defaults, train_defaults)


def base_config() -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.seed = 0
  c.data = data_defaults()
  c.model = model_defaults()
  c.rollout = rollout_defaults()
  c.judge = judge_defaults()
  c.rl = rl_defaults()
  c.harness = harness_defaults()
  c.memory = memory_defaults()
  c.evolver = evolver_defaults()
  c.train = train_defaults()
  c.ablation = ablation_defaults()
  c.lock()  # configs may change fields, never add them: typos fail at start-up
  return c


_NO_FIELD = "no such field (configs change base_config()'s fields)"
# Sections other entry points read from a config file a training run cannot take whole.
_FOREIGN = {"config.experiment": (
    "an arms x seeds grid's section: run the grid with `python -m harnessrl_jax.experiment "
    "--config=FILE`, or train one arm with --config=FILE:ARM")}
_KINDS = {bool: "True or False", int: "an integer", float: "a number", str: "a string"}
_PLURALS = {bool: "booleans", int: "integers", float: "numbers", str: "strings"}


def _fits(value, default) -> bool:
  """Whether `value` may stand where base_config() holds `default`: its type (an int for a
  float too), and for a tuple every element like one of the default's (any scalar when the
  default is empty); ml_collections checks neither tuple elements nor a None."""
  if isinstance(default, (tuple, list)):
    return isinstance(value, (tuple, list)) and all(
        any(_fits(v, d) for d in default) if default else isinstance(v, (bool, int, float, str))
        for v in value)
  if isinstance(default, bool) or isinstance(value, bool):
    return isinstance(default, bool) and isinstance(value, bool)
  if isinstance(default, float):
    return isinstance(value, (int, float))
  return isinstance(value, type(default))


def _kind(default) -> str:
  if isinstance(default, (tuple, list)):
    kinds = sorted({_PLURALS.get(type(d), type(d).__name__) for d in default})
    return f"a tuple of {' or '.join(kinds) if kinds else 'strings or numbers'}"
  return _KINDS.get(type(default), type(default).__name__)


def type_problems(cfg, base=None, path: str = "config") -> list[str]:
  """Every field of `cfg` whose value is not of base_config()'s type for it, and every
  field one of them has and the other lacks: one line each, naming the field."""
  base = base_config() if base is None else base
  problems = []
  for key in sorted(set(base.keys()) | set(cfg.keys())):
    name = f"{path}.{key}"
    if key not in base:
      problems.append(f"{name}: {_FOREIGN.get(name, _NO_FIELD)}")
    elif key not in cfg:
      problems.append(f"{name}: missing (build the config on base_config())")
    elif isinstance(base[key], ml_collections.ConfigDict):
      if isinstance(cfg[key], ml_collections.ConfigDict):
        problems += type_problems(cfg[key], base[key], name)
      else:
        problems.append(f"{name} = {cfg[key]!r}: expected a section (ConfigDict)")
    elif not _fits(cfg[key], base[key]):
      problems.append(f"{name} = {cfg[key]!r}: expected {_kind(base[key])}, like its "
                      f"default {base[key]!r}")
  return problems


def _raised(build) -> list[str]:
  """The problems a self-checking view raises when built (one per line), else none."""
  try:
    build()
  except ConfigError as e:
    return str(e).splitlines()
  return []


def validate(cfg: ml_collections.ConfigDict, *, device_count: int | None = None,
             process_count: int = 1) -> None:
  """Refuses a config the training driver cannot run, before anything is loaded.

  Every static check of the tree in one place: first every field's type against
  base_config()'s (`type_problems`), then each section's own (its typed view's), the
  ones between sections (the batch splits over the mesh, the learner scores the sampler's
  law, the driver runs the evolver synchronously) and, given `device_count`, the mesh
  against the devices of `process_count` processes. Files, servers and the model are not
  looked at (the driver's preflight does that).

  Args:
    cfg: the whole tree (`base_config()` with overrides).
    device_count: the devices the run sees (`jax.device_count()`); None skips the checks
      that need it.
    process_count: the processes the run spans (`jax.process_count()`).

  Raises:
    ConfigError: listing every problem found, one line each, naming its field.
  """
  refuse(type_problems(cfg))   # the views below read every field as base_config()'s type
  rl = RLConfig.from_config(cfg.rl, check=False)
  rollout = RolloutConfig.from_config(cfg.rollout, check=False)
  problems = [
      *DataConfig.from_config(cfg.data, check=False).problems(),
      *ModelSettings.from_config(cfg.model, check=False).problems(),
      *rollout.problems(),
      *JudgeConfig.from_config(cfg.judge, check=False).problems(),
      *rl.problems(),
      *_raised(lambda: StepConfig.from_config(cfg.rl)),
      *HarnessConfig.from_config(cfg.harness, check=False).problems(),
      *MemoryConfig.from_config(cfg.memory, check=False).problems(),
      *_raised(lambda: EvolverConfig.from_config(cfg.evolver)),
      *TrainConfig.from_config(cfg.train, check=False).problems(),
      *_raised(lambda: AblationConfig.from_config(cfg.ablation)),
  ]
  if float(cfg.rl.temperature) != rollout.temperature:
    problems.append(f"config.rl.temperature = {cfg.rl.temperature} differs from "
                    f"config.rollout.temperature = {rollout.temperature}: the learner must "
                    "score responses under the law that sampled them; set them equal")
  if bool(cfg.evolver.async_evolver):
    problems.append("config.evolver.async_evolver = True: the training driver runs the "
                    "evolver synchronously (exact resume needs H_{t+1} before step t+1); "
                    "set it to False")
  if device_count is not None and not rl.mesh.problems():
    problems += rl.mesh.device_problems(device_count, process_count)
  problems += _batch_problems(rl, rollout, device_count)
  rows, micro = int(cfg.rl.tasks_per_step) * rollout.num_samples, int(cfg.rl.micro_batch_size)
  if micro > 0 and rows % micro:   # else the first update refuses, minutes into the run
    problems.append(f"config.rl.micro_batch_size = {micro} does not divide the step's "
                    f"rl.tasks_per_step x rollout.num_samples = {rows} rows")
  refuse(problems)


def _batch_problems(rl, rollout, device_count: int | None) -> list[str]:
  """The step's tasks x samples rows must split over the mesh's data x fsdp devices
  (unknowable when a -1 axis among them waits for the device count)."""
  mesh = rl.mesh
  if mesh.problems() or (device_count is None and -1 in (mesh.data, mesh.fsdp)):
    return []
  if device_count is not None and mesh.device_problems(device_count):
    return []
  sizes = mesh.resolve(device_count or 1)
  split = sizes["data"] * sizes["fsdp"]
  rows = rl.tasks_per_step * rollout.num_samples
  if rows % split:
    return [f"config.rl.tasks_per_step x rollout.num_samples = {rows} rows do not split "
            f"over the mesh's data x fsdp = {split} devices: make it a multiple"]
  return []
