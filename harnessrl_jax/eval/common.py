"""What every evaluation protocol shares: the policy callable, the missing-file error and
the JSONL reader that reports bad lines as FILE:LINE."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

from harnessrl_jax.errors import DataError
# The policy under evaluation, `generate(conversations) -> one response each`, re-exported
# for the protocols.
from harnessrl_jax.rollout.texts import Generate  # pylint: disable=unused-import

# Benchmark name -> the evaluate flag that gives its local copy.
FLAGS = {"MedQA": "medqa", "GPQA-Diamond": "gpqa", "RoleBench": "rolebench",
         "IFBench": "ifbench", "IFEval": "ifeval", "WritingBench": "writingbench"}


def require_file(benchmark: str, path: str) -> None:
  """Raises DataError naming the benchmark and where it was looked for."""
  if not path or not os.path.isfile(path):
    raise DataError([f"{benchmark}: no file at {os.path.abspath(path) if path else '(empty)'}; "
                     f"pass the path of a local copy as --{FLAGS.get(benchmark, 'PATH')}=FILE"])


def json_rows(path: str, problems: list[str]) -> Iterator[tuple[int, str, Any]]:
  """(line number, "FILE:LINE", parsed value) for each non-blank line of a JSONL file; a
  line that is not JSON goes to `problems` as "FILE:LINE: not JSON (...)" and is skipped."""
  with open(path, encoding="utf-8") as f:
    for n, line in enumerate(f, 1):
      if not line.strip():
        continue
      where = f"{path}:{n}"
      try:
        row = json.loads(line)
      except json.JSONDecodeError as e:
        problems.append(f"{where}: not JSON ({e.msg})")
        continue
      yield n, where, row
