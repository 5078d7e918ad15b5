"""Where config paths point and how a task split is read: the one `resolve` and `load_split`.

Paths in a config are relative to the repository root unless absolute (so a run means the
same files whatever the working directory); `load_split` reads a task JSONL file, keeps the
configured domains and refuses a split with no tasks, naming the config field.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from harnessrl_jax.data.loader import load_tasks
from harnessrl_jax.data.schema import Task
from harnessrl_jax.errors import ConfigError

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def resolve(path: str) -> str:
  """A config path: absolute as given (after ~), relative ones against the repository root."""
  path = os.path.expanduser(path)
  return path if os.path.isabs(path) else os.path.join(REPO_ROOT, path)


def load_split(path: str, domains: Sequence[str] = (), *,
               field: str = "train") -> tuple[Task, ...]:
  """The tasks of `config.data.<field>` = `path` whose domain is in `domains` (all if empty).

  Raises ConfigError for a missing file or an empty selection and DataError (every problem
  as FILE:LINE) for a malformed file.
  """
  full = resolve(path)
  if not os.path.isfile(full):
    raise ConfigError(f"config.data.{field} = {path!r}: no such file ({full}); point it at "
                      "a task JSONL file (the bundled data is data/train.jsonl and "
                      "data/heldout.jsonl)")
  tasks = load_tasks(full)
  if domains:
    tasks = tuple(t for t in tasks if t.domain in domains)
  if not tasks:
    raise ConfigError(f"config.data.{field} = {path!r} holds no tasks for data.domains = "
                      f"{tuple(domains) or 'any'}: check the file or config.data.domains")
  return tasks
