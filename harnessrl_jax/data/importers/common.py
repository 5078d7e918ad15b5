"""Helpers the importers share: typed field access that collects problems, stable ids."""

from __future__ import annotations

import hashlib
import math
from typing import Any

from harnessrl_jax.errors import DataError

_MISSING = object()


class Fields:
  """Reads fields of one upstream record, collecting `path: message` problems.

  Accessors return None on a problem so an importer can read every field, then call
  `done()` once to raise all problems together.
  """

  def __init__(self, record: Any):
    if not isinstance(record, dict):
      raise DataError([f"record: must be a JSON object, got {type(record).__name__}"])
    self.record = record
    self.problems: list[str] = []

  def add(self, path: str, message: str) -> None:
    self.problems.append(f"{path}: {message}")

  def get(self, obj: dict[str, Any], key: str, path: str, kind: type | tuple[type, ...], *,
          optional: bool = False) -> Any:
    """obj[key] when it has type `kind`; None (and a problem unless optional) otherwise."""
    value = obj.get(key, _MISSING)
    if value is _MISSING or value is None:
      if not optional:
        self.add(path, "missing")
      return None
    # bool is an int subclass; no upstream format means true/false as a number.
    if isinstance(value, bool) and bool not in _as_tuple(kind):
      self.add(path, f"must be {_kind_name(kind)}, got bool")
      return None
    if not isinstance(value, kind):
      self.add(path, f"must be {_kind_name(kind)}, got {type(value).__name__}")
      return None
    return value

  def text(self, obj: dict[str, Any], key: str, path: str, *, optional: bool = False
           ) -> str | None:
    """A string field with surrounding whitespace removed; empty counts as missing."""
    value = self.get(obj, key, path, str, optional=optional)
    if value is None:
      return None
    if not value.strip():
      if not optional:
        self.add(path, "must not be empty")
      return None
    return value.strip()

  def number(self, obj: dict[str, Any], key: str, path: str) -> float | None:
    value = self.get(obj, key, path, (int, float))
    if value is not None and not math.isfinite(value):
      self.add(path, f"must be finite, got {value}")
      return None
    return None if value is None else float(value)

  def items(self, obj: dict[str, Any], key: str, path: str) -> list[tuple[str, dict]]:
    """The (path, object) pairs of a non-empty list of objects."""
    value = self.get(obj, key, path, list)
    if value is None:
      return []
    if not value:
      self.add(path, "must not be empty")
    out = []
    for i, item in enumerate(value):
      if isinstance(item, dict):
        out.append((f"{path}[{i}]", item))
      else:
        self.add(f"{path}[{i}]", f"must be an object, got {type(item).__name__}")
    return out

  def done(self) -> None:
    if self.problems:
      raise DataError(self.problems)


def _as_tuple(kind):
  return kind if isinstance(kind, tuple) else (kind,)


def _kind_name(kind) -> str:
  names = {str: "a string", int: "an integer", float: "a number", list: "a list",
           dict: "an object", bool: "true or false"}
  kinds = _as_tuple(kind)
  if set(kinds) == {int, float}:
    return "a number"
  return " or ".join(names.get(k, k.__name__) for k in kinds)


def task_id(source: str, upstream_id: Any) -> str:
  """`SOURCE-ID` for records that carry their own id."""
  return f"{source}-{upstream_id}"


def content_id(source: str, *parts: str) -> str:
  """`SOURCE-HASH` for records without an id: 12 hex digits of SHA-1 over the parts.

  Deterministic across runs and machines (unlike `hash()`); identical records get identical
  ids, which the loader then reports as duplicates rather than silently keeping both.
  """
  digest = hashlib.sha1("\x1f".join(parts).encode("utf-8")).hexdigest()[:12]
  return f"{source}-{digest}"


def criterion_id(index: int) -> str:
  """Criterion ids follow upstream order: c0, c1, ..."""
  return f"c{index}"
