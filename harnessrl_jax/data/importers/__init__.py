"""Importers from upstream rubric formats to our task JSONL (mappings: docs/data-format.md).

Each importer is a module here with `convert_record(record: dict) -> dict`, turning one
upstream record into one task object in our format. A record it cannot convert raises
`DataError` whose problems are `field: message` lines with `field` a path into the upstream
record (e.g. `rubrics[3].points`); `python -m harnessrl_jax.data.convert` prefixes each with
`IN:LINE: `. Modules are imported on first use, so one broken importer cannot break the rest.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any

ConvertFn = Callable[[dict[str, Any]], dict[str, Any]]

_NAMES = ("healthbench", "rar", "rubrichub", "researchqa", "writingbench", "ifbench",
          "ifeval", "rolebench")


class _Registry(Mapping):
  """Format name -> `convert_record` of the module of that name, imported lazily."""

  def __getitem__(self, name: str) -> ConvertFn:
    if name not in _NAMES:
      raise KeyError(name)
    return importlib.import_module(f"{__name__}.{name}").convert_record

  def __iter__(self) -> Iterator[str]:
    return iter(_NAMES)

  def __len__(self) -> int:
    return len(_NAMES)


IMPORTERS: Mapping[str, ConvertFn] = _Registry()
