"""Deep-immutable, hashable views of JSON-like values (dict -> FrozenMap, list -> tuple)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class FrozenMap(Mapping):
  """An immutable, hashable mapping with sorted, stable iteration order."""

  __slots__ = ("_items", "_hash")

  def __init__(self, items: Mapping[str, Any] | None = None):
    items = dict(items or {})
    self._items = {k: freeze(items[k]) for k in sorted(items)}
    self._hash = None

  def __getitem__(self, key):
    return self._items[key]

  def __iter__(self):
    return iter(self._items)

  def __len__(self):
    return len(self._items)

  def __hash__(self):
    if self._hash is None:
      self._hash = hash(tuple(self._items.items()))
    return self._hash

  def __eq__(self, other):
    if isinstance(other, FrozenMap):
      return self._items == other._items
    return isinstance(other, Mapping) and self._items == dict(other)

  def __repr__(self):
    return f"FrozenMap({self._items!r})"


def freeze(value: Any) -> Any:
  """Returns a deep-immutable copy of a JSON-like value."""
  if isinstance(value, FrozenMap):
    return value
  if isinstance(value, Mapping):
    return FrozenMap(value)
  if isinstance(value, (list, tuple)):
    return tuple(freeze(v) for v in value)
  return value


def thaw(value: Any) -> Any:
  """Inverse of `freeze`: plain dicts and lists, ready for `json.dumps`."""
  if isinstance(value, Mapping):
    return {k: thaw(v) for k, v in value.items()}
  if isinstance(value, tuple):
    return [thaw(v) for v in value]
  return value
