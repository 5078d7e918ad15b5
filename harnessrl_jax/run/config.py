"""The training driver's config sections, `config.data` and `config.train` (mounted by
`harnessrl_jax.config.base_config()`): their documented defaults and the typed views
`DataConfig` and `TrainConfig`. (`config.ablation` switches parts of the evolver off: it
lives with the evolver, in evolver/config.py.)"""

from __future__ import annotations

import ml_collections

from harnessrl_jax.config_view import section_view


def data_defaults() -> ml_collections.ConfigDict:
  """Where the tasks come from (`data.splits.load_split` reads them).

  Fields:
    train: the training tasks' JSONL file; relative paths resolve against the repo root.
    heldout: the held-out tasks' JSONL file (scored at the start, every
      train.eval_every steps and at the end).
    domains: keep only the tasks of these domains in both files; empty: every domain.
  """
  d = ml_collections.ConfigDict()
  d.train = "data/train.jsonl"
  d.heldout = "data/heldout.jsonl"
  d.domains = ()
  return d


def train_defaults() -> ml_collections.ConfigDict:
  """The training driver's documented defaults.

  Fields:
    steps: RL steps (paper: ~500).
    log_every: a progress line on the terminal every this many steps.
    eval_every: held-out evaluation (seed rubrics, no guidance, greedy) every this many
      steps besides the start and the end; 0: only at the start and the end. The best
      held-out checkpoint is chosen among these evaluations.
    eval_tasks: held-out tasks evaluated: the first N taken round-robin over the domains
      (each in file order); 0: all of them.
    checkpoint_every: a checkpoint every this many steps, and after every held-out
      evaluation and the last step.
    keep_checkpoints: the latest checkpoints kept; the best held-out one is kept besides.
    oracle_groups_every: write every this many steps' groups (prompt, J responses,
      rewards) to oracle_groups.jsonl for the oracle analysis; 0: never. At the paper's
      scale a step's groups are ~10-20 MB.
  """
  t = ml_collections.ConfigDict()
  t.steps = 10
  t.log_every = 1
  t.eval_every = 0
  t.eval_tasks = 0
  t.checkpoint_every = 1
  t.keep_checkpoints = 2
  t.oracle_groups_every = 1
  return t


class DataConfig(section_view(data_defaults, "config.data")):
  """`config.data`, typed (fields and their meanings: `data_defaults`)."""

  def problems(self) -> list[str]:
    return [f"config.data.{name} is empty: point it at a task JSONL file"
            for name in ("train", "heldout") if not getattr(self, name)]


class TrainConfig(section_view(train_defaults, "config.train")):
  """`config.train`, typed (fields and their meanings: `train_defaults`)."""

  def problems(self) -> list[str]:
    out = []
    for name in ("steps", "log_every", "checkpoint_every", "keep_checkpoints"):
      if getattr(self, name) < 1:
        out.append(f"config.train.{name} = {getattr(self, name)}: must be >= 1")
    for name in ("eval_every", "eval_tasks", "oracle_groups_every"):
      if getattr(self, name) < 0:
        out.append(f"config.train.{name} = {getattr(self, name)}: must be >= 0 (0: "
                   f"{_ZERO_MEANS[name]})")
    return out


_ZERO_MEANS = {"eval_every": "only at the start and the end", "eval_tasks": "all of them",
               "oracle_groups_every": "never"}
