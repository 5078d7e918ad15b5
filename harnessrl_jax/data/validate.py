"""Checks task JSONL files: `python -m harnessrl_jax.data.validate FILE...`.

Prints every problem as `FILE:LINE: field: message` and exits 1 when there is any; prints
one `FILE: OK: ...` summary per problem-free file. Task ids must be unique across all the
files given, as they must be across the files of one training run.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from harnessrl_jax.data.loader import validate_files


def summary(path: str, tasks) -> str:
  criteria = [c for t in tasks for c in t.criteria]
  checks = sum(c.check is not None for c in criteria)
  return f"{path}: OK: {len(tasks)} tasks, {len(criteria)} criteria, {checks} checks"


def main(argv: Sequence[str] | None = None) -> int:
  parser = argparse.ArgumentParser(prog="python -m harnessrl_jax.data.validate",
                                   description=__doc__.splitlines()[0])
  parser.add_argument("files", nargs="+", metavar="FILE", help="task JSONL files")
  args = parser.parse_args(argv)
  good, problems = validate_files(args.files)
  for line in problems:
    print(line)
  for path in args.files:
    if path in good:
      print(summary(path, good[path]))
  if problems:
    print(f"{len(problems)} problem(s) in {len(args.files) - len(good)} file(s)",
          file=sys.stderr)
    return 1
  return 0


if __name__ == "__main__":
  sys.exit(main())
