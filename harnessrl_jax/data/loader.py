"""Task JSONL loading and validation (format: docs/data-format.md).

A file is read whole before anything is returned: every problem in it is collected and
reported at once, each as `FILE:LINE: field: message` with `field` a dotted path such as
`criteria[2].weight`, and a file with any problem yields no tasks at all (a half-loaded
training set would silently change the task distribution).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from harnessrl_jax.data import checks
from harnessrl_jax.data.frozen import FrozenMap
from harnessrl_jax.data.schema import ROLES, Check, Criterion, Message, Task
from harnessrl_jax.errors import DataError

TASK_FIELDS = ("id", "domain", "source", "prompt", "criteria", "reference_answer", "meta")
CRITERION_FIELDS = ("id", "text", "weight", "anchor", "tags", "check")
MESSAGE_FIELDS = ("role", "content")


class _Problems:
  """Collects `WHERE: field: message` lines for one record."""

  def __init__(self, where: str):
    self.where = where
    self.lines: list[str] = []

  def add(self, field: str, message: str) -> None:
    self.lines.append(f"{self.where}: {field}: {message}")


def _type_name(value: Any) -> str:
  if value is None:
    return "null"
  return {bool: "bool", int: "int", float: "float", str: "str", list: "list",
          dict: "object"}.get(type(value), type(value).__name__)


def _nonempty_str(value: Any, field: str, p: _Problems) -> str | None:
  if not isinstance(value, str):
    p.add(field, f"must be a string, got {_type_name(value)}")
    return None
  if not value.strip():
    p.add(field, "must not be empty")
    return None
  return value


def _unknown_fields(obj: Mapping[str, Any], allowed: Sequence[str], prefix: str,
                    p: _Problems) -> None:
  for key in obj:
    if key not in allowed:
      p.add(f"{prefix}{key}", f"unknown field (allowed: {', '.join(allowed)})")


def _parse_prompt(value: Any, p: _Problems) -> tuple[Message, ...] | None:
  if value is None:
    p.add("prompt", "missing")
    return None
  if isinstance(value, str):
    if not value.strip():
      p.add("prompt", "must not be empty")
      return None
    return (Message("user", value),)
  if not isinstance(value, list):
    p.add("prompt", f"must be a string or a list of messages, got {_type_name(value)}")
    return None
  if not value:
    p.add("prompt", "must contain at least one message")
    return None
  messages, ok = [], True
  for i, m in enumerate(value):
    f = f"prompt[{i}]"
    if not isinstance(m, dict):
      p.add(f, f"must be an object {{role, content}}, got {_type_name(m)}")
      ok = False
      continue
    _unknown_fields(m, MESSAGE_FIELDS, f + ".", p)
    role, content = m.get("role"), m.get("content")
    if role not in ROLES:
      p.add(f + ".role", f"must be one of {', '.join(ROLES)}, got {role!r}")
      ok = False
    if not isinstance(content, str):
      p.add(f + ".content", f"must be a string, got {_type_name(content)}")
      ok = False
    elif not content.strip():
      p.add(f + ".content", "must not be empty")
      ok = False
    if ok:
      messages.append(Message(role, content))
  if not ok:
    return None
  if not any(m.role == "user" for m in messages):
    p.add("prompt", "must contain a user message")
    return None
  return tuple(messages)


def _parse_check(value: Any, field: str, p: _Problems) -> Check | None:
  if not isinstance(value, dict):
    p.add(field, f"must be an object {{type, ...args}}, got {_type_name(value)}")
    return None
  kind = value.get("type")
  if not isinstance(kind, str) or not kind:
    p.add(field + ".type", "missing check type (a name from checks.CHECKS)" if kind is None
          else f"must be the name of a check, got {_type_name(kind)}")
    return None
  try:  # building the Check validates it: the one validation a check ever gets
    return Check(kind, FrozenMap({k: v for k, v in value.items() if k != "type"}))
  except checks.InvalidCheck as e:
    for msg in e.problems:
      p.add(field, msg)
    return None


def _parse_criterion(value: Any, field: str, p: _Problems) -> Criterion | None:
  if not isinstance(value, dict):
    p.add(field, f"must be an object, got {_type_name(value)}")
    return None
  before = len(p.lines)
  _unknown_fields(value, CRITERION_FIELDS, field + ".", p)
  cid = _nonempty_str(value.get("id"), field + ".id", p)
  text = _nonempty_str(value.get("text"), field + ".text", p)
  weight = value.get("weight")
  if isinstance(weight, bool) or not isinstance(weight, (int, float)):
    p.add(field + ".weight", f"must be a number, got {_type_name(weight)}")
    weight = None
  elif not math.isfinite(weight):
    p.add(field + ".weight", f"must be finite, got {weight}")
    weight = None
  anchor = value.get("anchor", True)
  if not isinstance(anchor, bool):
    p.add(field + ".anchor", f"must be true or false, got {_type_name(anchor)}")
  tags = value.get("tags", [])
  if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
    p.add(field + ".tags", "must be a list of strings")
  check = None
  if value.get("check") is not None:
    check = _parse_check(value["check"], field + ".check", p)
  if len(p.lines) > before:
    return None
  return Criterion(id=cid, text=text, weight=float(weight), anchor=anchor, tags=tuple(tags),
                   check=check)


def _parse_criteria(value: Any, p: _Problems) -> tuple[Criterion, ...] | None:
  if value is None:
    p.add("criteria", "missing")
    return None
  if not isinstance(value, list):
    p.add("criteria", f"must be a list of criteria, got {_type_name(value)}")
    return None
  if not value:
    p.add("criteria", "must contain at least one criterion")
    return None
  before = len(p.lines)
  criteria, first_index = [], {}
  for i, c in enumerate(value):
    parsed = _parse_criterion(c, f"criteria[{i}]", p)
    cid = c.get("id") if isinstance(c, dict) else None
    if isinstance(cid, str) and cid.strip():
      if cid in first_index:
        p.add(f"criteria[{i}].id", f"duplicate criterion id {cid!r} (also criteria"
                                   f"[{first_index[cid]}])")
      else:
        first_index[cid] = i
    if parsed is not None:
      criteria.append(parsed)
  if len(p.lines) > before:
    return None
  if not any(c.weight > 0 for c in criteria):
    p.add("criteria", "needs at least one criterion with a positive weight (the reward is "
                      "normalised by the sum of positive weights)")
    return None
  return tuple(criteria)


def _parse(obj: Any, where: str) -> tuple[Task | None, list[str]]:
  p = _Problems(where)
  if not isinstance(obj, dict):
    p.add("task", f"must be a JSON object, got {_type_name(obj)}")
    return None, p.lines
  _unknown_fields(obj, TASK_FIELDS, "", p)
  tid = obj.get("id")
  if tid is None:
    p.add("id", "missing")
  else:
    tid = _nonempty_str(tid, "id", p)
  domain = obj.get("domain")
  if domain is None:
    p.add("domain", "missing")
  else:
    domain = _nonempty_str(domain, "domain", p)
  source = obj.get("source", "")
  if not isinstance(source, str):
    p.add("source", f"must be a string, got {_type_name(source)}")
  prompt = _parse_prompt(obj.get("prompt"), p)
  criteria = _parse_criteria(obj.get("criteria"), p)
  ref = obj.get("reference_answer")
  if ref is not None and not isinstance(ref, str):
    p.add("reference_answer", f"must be a string or null, got {_type_name(ref)}")
  elif isinstance(ref, str) and not ref.strip():
    # Canonical form: "no reference" is spelled null, so dump/load round-trips exactly.
    p.add("reference_answer", "is empty; write null when there is no reference answer")
  meta = obj.get("meta", {})
  if not isinstance(meta, dict):
    p.add("meta", f"must be an object, got {_type_name(meta)}")
  if p.lines:
    return None, p.lines
  return Task(id=tid, domain=domain, prompt=prompt, criteria=criteria, reference_answer=ref,
              source=source, meta=meta), []


def parse_task(obj: Any, *, where: str) -> Task:
  """Builds a Task from one decoded JSON object.

  Args:
    obj: the decoded JSON value of one line.
    where: the location prefix for messages, e.g. `"train.jsonl:12"`.

  Returns:
    The Task.

  Raises:
    DataError: listing every problem of the object as `WHERE: field: message`.
  """
  task, problems = _parse(obj, where)
  if problems:
    raise DataError(problems)
  return task


def _strict_constant(name: str):
  raise ValueError(f"{name} is not valid JSON")


def _decode_line(text: str) -> tuple[Any, list[str]]:
  """json.loads that rejects NaN/Infinity and reports duplicate keys instead of dropping them."""
  duplicates: list[str] = []

  def pairs_hook(pairs):
    out = {}
    for k, v in pairs:
      if k in out:
        duplicates.append(k)
      out[k] = v
    return out

  value = json.loads(text, object_pairs_hook=pairs_hook, parse_constant=_strict_constant)
  return value, duplicates


def _read(path: str) -> tuple[list[tuple[int, Task]], list[str]]:
  """Returns (line number, task) pairs and every problem of one file."""
  try:
    with open(path, "rb") as f:
      raw_lines = f.read().split(b"\n")
  except OSError as e:
    return [], [f"{path}:0: file: cannot read: {e.strerror or e}"]
  tasks, problems, first_line = [], [], {}
  for lineno, raw in enumerate(raw_lines, start=1):
    where = f"{path}:{lineno}"
    try:
      text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
      problems.append(f"{where}: json: not valid UTF-8 ({e.reason} at byte {e.start})")
      continue
    if not text.strip():
      continue  # blank lines (and the final newline) carry no task
    try:
      obj, duplicates = _decode_line(text)
    except ValueError as e:
      problems.append(f"{where}: json: bad JSON: {e}")
      continue
    problems.extend(f"{where}: json: duplicate key {k!r} in one object" for k in duplicates)
    task, task_problems = _parse(obj, where)
    problems.extend(task_problems)
    tid = obj.get("id") if isinstance(obj, dict) else None
    if isinstance(tid, str) and tid.strip():
      if tid in first_line:
        problems.append(f"{where}: id: duplicate task id {tid!r} (first on line "
                        f"{first_line[tid]})")
      else:
        first_line[tid] = lineno
    if task is not None:
      tasks.append((lineno, task))
  if not problems and not tasks:
    problems.append(f"{path}:1: file: no tasks (the file is empty)")
  return tasks, problems


def validate_files(paths: Iterable[str | os.PathLike]
                   ) -> tuple[dict[str, tuple[Task, ...]], list[str]]:
  """Reads every file; checks each and task-id uniqueness across all of them.

  Returns:
    (tasks of each problem-free file keyed by path, every problem of every file).
  """
  good: dict[str, tuple[Task, ...]] = {}
  problems: list[str] = []
  seen: dict[str, tuple[int, str]] = {}  # task id -> (file index, "FILE:LINE") of its first use
  for index, path in enumerate(map(os.fspath, paths)):
    tasks, file_problems = _read(path)
    for lineno, task in tasks:
      first = seen.setdefault(task.id, (index, f"{path}:{lineno}"))
      if first[0] != index:  # duplicates inside one file are already reported by _read
        file_problems.append(f"{path}:{lineno}: id: duplicate task id {task.id!r} (first in "
                             f"{first[1]})")
    problems.extend(file_problems)
    if not file_problems:
      good[path] = tuple(t for _, t in tasks)
  return good, problems


def load_tasks(path: str | os.PathLike) -> tuple[Task, ...]:
  """Loads one task JSONL file.

  Raises:
    DataError: listing every problem of the file; no task is returned then.
  """
  tasks, problems = _read(os.fspath(path))
  if problems:
    raise DataError(problems)
  return tuple(t for _, t in tasks)


def task_line(task: Task) -> str:
  """The canonical one-line JSON of a task (fixed key order, UTF-8 text, no NaN)."""
  return json.dumps(task.to_json(), ensure_ascii=False, allow_nan=False)


def dump_tasks(tasks: Iterable[Task], path: str | os.PathLike) -> None:
  """Writes tasks as canonical JSONL that `load_tasks` reads back equal.

  The file is written next to its destination and renamed into place, so a crash never
  leaves a half-written data file behind.
  """
  path = os.fspath(path)
  tmp = f"{path}.tmp{os.getpid()}"
  try:
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
      for task in tasks:
        f.write(task_line(task) + "\n")
    os.replace(tmp, path)
  finally:
    if os.path.exists(tmp):
      os.remove(tmp)
