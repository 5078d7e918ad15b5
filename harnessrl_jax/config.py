"""The one config tree and its one check.

`base_config()` mounts a section per subpackage; each subpackage documents its fields next
to its code (models/config.py, rollout/config.py, judges/config.py, rl/config.py,
harness/config.py, memory/config.py, evolver/config.py, run/config.py). Experiment files in
configs/ call `base_config()` and override fields; a field that does not exist here cannot
be set (the tree is locked: unknown keys and wrong types fail at start-up).

Code reads a section through its frozen typed view (`RolloutConfig.from_config(cfg.rollout)`,
...), built once where the section enters a subpackage; each view's fields are derived from
its section's defaults (config_view.py), so a field is written once: its default, with its
reason, in the room's config.py. `validate(cfg)` builds every view, gathers each view's
`problems()` and adds the checks that span sections or depend on the devices, and refuses a
config that cannot run with one ConfigError listing every problem, one line each. Which
fields define the experiment and which may change when a run resumes: run/identity.py.
docs/config.md walks through all of it, and how to add a field.
"""

from __future__ import annotations

import ml_collections

from harnessrl_jax.config_view import fits, kind
from harnessrl_jax.errors import ConfigError, refuse
from harnessrl_jax.evolver.config import (AblationConfig, EvolverConfig, ablation_defaults,
                                          evolver_defaults)
from harnessrl_jax.harness.config import HarnessConfig, harness_defaults
from harnessrl_jax.judges.config import JudgeConfig, judge_defaults
from harnessrl_jax.memory.config import MemoryConfig, memory_defaults
from harnessrl_jax.models.config import ModelSettings, model_defaults
from harnessrl_jax.rl.config import RLConfig, rl_defaults
from harnessrl_jax.rl.train_step import StepConfig
from harnessrl_jax.rollout.config import RolloutConfig, rollout_defaults
from harnessrl_jax.run.config import DataConfig, TrainConfig, data_defaults, train_defaults


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
    elif not fits(cfg[key], base[key]):
      problems.append(f"{name} = {cfg[key]!r}: expected {kind(base[key])}, like its "
                      f"default {base[key]!r}")
  return problems


def _raised(build) -> list[str]:
  """The problems a view that checks itself when built raises (one per line), else none."""
  try:
    build()
  except ConfigError as e:
    return str(e).splitlines()
  return []


def validate(cfg: ml_collections.ConfigDict, *, device_count: int | None = None,
             process_count: int = 1) -> None:
  """Refuses a config the training driver cannot run, before anything is loaded.

  Every static check of the tree in one place: first every field's type against
  base_config()'s (`type_problems`), then each section's own (its typed view's
  `problems()`), the ones between sections (the batch splits over the mesh and the
  micro-batches) and, given `device_count`, the mesh against the devices of
  `process_count` processes. Files, servers and the model are not
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
      # the loss and step fields, checked next to their code (rl/train_step.py)
      *_raised(lambda: StepConfig.from_config(cfg.rl, temperature=rollout.temperature)),
      *HarnessConfig.from_config(cfg.harness, check=False).problems(),
      *MemoryConfig.from_config(cfg.memory, check=False).problems(),
      *EvolverConfig.from_config(cfg.evolver, check=False).problems(),
      *TrainConfig.from_config(cfg.train, check=False).problems(),
      *AblationConfig.from_config(cfg.ablation, check=False).problems(),
  ]
  if device_count is not None and not rl.mesh.problems():
    problems += rl.mesh.device_problems(device_count, process_count)
  problems += _batch_problems(rl, rollout, device_count)
  rows, micro = rl.tasks_per_step * rollout.num_samples, rl.micro_batch_size
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
