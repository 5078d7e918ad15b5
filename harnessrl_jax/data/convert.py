"""Converts an upstream rubric data file to our task JSONL.

  python -m harnessrl_jax.data.convert --format=writingbench IN.jsonl OUT.jsonl

IN is JSON Lines or one JSON array of records. Every record is converted and checked
against our format before anything is written; any problem is printed as
`IN:LINE: field: message` (fields of the upstream record, or of the converted task when the
conversion produced something our loader rejects) and OUT is left untouched. On success OUT
is written in canonical form and read back through `load_tasks` as a final check.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from harnessrl_jax.data.importers import IMPORTERS
from harnessrl_jax.data.loader import dump_tasks, load_tasks, parse_task
from harnessrl_jax.data.schema import Task
from harnessrl_jax.errors import DataError, HarnessError


def _array_records(text: str, path: str) -> tuple[list[tuple[int, Any]], list[str]]:
  """Elements of a top-level JSON array, each with the line it starts on."""
  decoder = json.JSONDecoder()
  line_of = lambda pos: text.count("\n", 0, pos) + 1
  records: list[tuple[int, Any]] = []

  def skip(pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
      pos += 1
    return pos

  pos = skip(text.index("[") + 1)
  if pos < len(text) and text[pos] == "]":
    return records, []
  while True:
    try:
      value, end = decoder.raw_decode(text, pos)
    except json.JSONDecodeError as e:
      return records, [f"{path}:{line_of(e.pos)}: json: bad JSON: {e.msg}"]
    records.append((line_of(pos), value))
    pos = skip(end)
    if pos < len(text) and text[pos] == ",":
      pos = skip(pos + 1)
    elif pos < len(text) and text[pos] == "]":
      if skip(pos + 1) < len(text):
        return records, [f"{path}:{line_of(pos + 1)}: json: text after the closing ']'"]
      return records, []
    else:
      return records, [f"{path}:{line_of(pos)}: json: expected ',' or ']'"]


def read_records(path: str) -> tuple[list[tuple[int, Any]], list[str]]:
  """(line, decoded record) pairs of a JSONL or JSON-array file, and its problems."""
  try:
    with open(path, encoding="utf-8") as f:
      text = f.read()
  except (OSError, UnicodeDecodeError) as e:
    return [], [f"{path}:0: file: cannot read: {e}"]
  if text.lstrip().startswith("["):
    return _array_records(text, path)
  records, problems = [], []
  for lineno, line in enumerate(text.split("\n"), start=1):
    if not line.strip():
      continue
    try:
      records.append((lineno, json.loads(line)))
    except json.JSONDecodeError as e:
      problems.append(f"{path}:{lineno}: json: bad JSON: {e}")
  return records, problems


def convert_file(fmt: str, src: str, *, domain: str | None = None
                 ) -> tuple[tuple[Task, ...], list[str]]:
  """Converts every record of `src`; returns (tasks, problems). Tasks are valid only when
  problems is empty."""
  convert = IMPORTERS[fmt]
  records, problems = read_records(src)
  tasks, first_line = [], {}
  for lineno, record in records:
    where = f"{src}:{lineno}"
    try:
      obj = convert(record)
    except DataError as e:
      problems.extend(f"{where}: {p}" for p in e.problems)
      continue
    except (KeyError, TypeError, ValueError, AttributeError) as e:
      # An importer that trips over an unexpected shape still names the record.
      problems.append(f"{where}: record: cannot convert ({type(e).__name__}: {e})")
      continue
    if domain:
      obj = {**obj, "domain": domain}
    try:
      task = parse_task(obj, where=where)
    except DataError as e:
      problems.extend(e.problems)
      continue
    if task.id in first_line:
      problems.append(f"{where}: id: duplicate task id {task.id!r} (also from line "
                      f"{first_line[task.id]})")
      continue
    first_line[task.id] = lineno
    tasks.append(task)
  if not records and not problems:
    problems.append(f"{src}:1: file: no records")
  # Reading problems were collected before conversion ones; report in file order.
  problems.sort(key=lambda p: int(p[len(src) + 1:].split(":", 1)[0]))
  return tuple(tasks), problems


def main(argv: Sequence[str] | None = None) -> int:
  parser = argparse.ArgumentParser(prog="python -m harnessrl_jax.data.convert",
                                   description=__doc__.splitlines()[0])
  parser.add_argument("--format", required=True, choices=sorted(IMPORTERS),
                      help="upstream format of IN")
  parser.add_argument("--domain", default=None,
                      help="domain for every task, overriding the importer's")
  parser.add_argument("src", metavar="IN", help="upstream records (JSONL or a JSON array)")
  parser.add_argument("dst", metavar="OUT", help="task JSONL to write")
  args = parser.parse_args(argv)
  if os.path.abspath(args.src) == os.path.abspath(args.dst):
    print(f"{args.dst}: refusing to overwrite the input file", file=sys.stderr)
    return 2
  try:
    tasks, problems = convert_file(args.format, args.src, domain=args.domain)
    if problems:
      for line in problems:
        print(line)
      print(f"{len(problems)} problem(s); {args.dst} not written", file=sys.stderr)
      return 1
    dump_tasks(tasks, args.dst)
    if load_tasks(args.dst) != tasks:
      raise HarnessError(f"{args.dst}: reads back different from what was written")
  except HarnessError as e:
    print(e, file=sys.stderr)
    return 1
  except OSError as e:
    print(f"{args.dst}: cannot write: {e}", file=sys.stderr)
    return 1
  except ImportError as e:  # importers load lazily; report a missing one without a traceback
    print(f"importer {args.format!r} is not available: {e}", file=sys.stderr)
    return 2
  criteria = sum(len(t.criteria) for t in tasks)
  checks = sum(c.check is not None for t in tasks for c in t.criteria)
  print(f"{args.src} -> {args.dst}: {len(tasks)} tasks, {criteria} criteria, {checks} checks "
        f"({args.format})")
  return 0


if __name__ == "__main__":
  sys.exit(main())
