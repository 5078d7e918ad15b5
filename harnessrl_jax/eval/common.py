"""What every evaluation protocol shares: the policy callable and the missing-file error."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from harnessrl_jax.data.schema import Message
from harnessrl_jax.errors import DataError

# The policy under evaluation: one greedy response per conversation, in order.
Generate = Callable[[Sequence[tuple[Message, ...]]], list[str]]

# Benchmark name -> the evaluate flag that gives its local copy.
FLAGS = {"MedQA": "medqa", "GPQA-Diamond": "gpqa", "RoleBench": "rolebench",
         "IFBench": "ifbench", "WritingBench": "writingbench"}


def require_file(benchmark: str, path: str) -> None:
  """Raises DataError naming the benchmark and where it was looked for."""
  if not path or not os.path.isfile(path):
    raise DataError([f"{benchmark}: no file at {os.path.abspath(path) if path else '(empty)'}; "
                     f"pass the path of a local copy as --{FLAGS.get(benchmark, 'PATH')}=FILE"])
