"""Typed views of the config tree's sections, derived from the sections' defaults.

A room's config.py writes its section's defaults once, each with its reason
(`rollout_defaults()`), and derives the section's typed view from them:

  class RolloutConfig(section_view(rollout_defaults, "config.rollout")):
    def problems(self) -> list[str]: ...   # the room's checks of the values

The view is a frozen dataclass with one field per default, typed like it (a nested section
is a nested view), so a new default is a new field of the view with nothing else to write.
`View.from_config(section)` reads every field by name from a section: a ConfigDict, a view
(a view is a section too), or a plain dict whose missing fields take the defaults (tools
and tests name only what they change). Each value must fit its default's type (`fits`: an
int where the default is a float, a list where it is a tuple); it is stored as that type.
A missing or ill-typed field raises one ConfigError naming `config.<section>.<field>`, every
such field on its own line; with `check` (the default) so do the view's `problems()`.
`harnessrl_jax.config.validate` collects every section's problems at once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import ml_collections

from harnessrl_jax.errors import ConfigError, refuse

_KINDS = {bool: "True or False", int: "an integer", float: "a number", str: "a string"}
_PLURALS = {bool: "booleans", int: "integers", float: "numbers", str: "strings"}


def fits(value, default) -> bool:
  """Whether `value` may stand where the defaults hold `default`: its type (an int for a
  float too), and for a tuple every element like one of the default's (any scalar when the
  default is empty); ml_collections checks neither tuple elements nor a None."""
  if isinstance(default, (tuple, list)):
    return isinstance(value, (tuple, list)) and all(
        any(fits(v, d) for d in default) if default else isinstance(v, (bool, int, float, str))
        for v in value)
  if isinstance(default, bool) or isinstance(value, bool):
    return isinstance(default, bool) and isinstance(value, bool)
  if isinstance(default, float):
    return isinstance(value, (int, float))
  return isinstance(value, type(default))


def kind(default) -> str:
  """What a value fitting `default` is, in words ("an integer", "a tuple of numbers")."""
  if isinstance(default, (tuple, list)):
    kinds = sorted({_PLURALS.get(type(d), type(d).__name__) for d in default})
    return f"a tuple of {' or '.join(kinds) if kinds else 'strings or numbers'}"
  return _KINDS.get(type(default), type(default).__name__)


def _as_default(value, default):
  """`value` (it fits `default`) as the default's type: 2 -> 2.0 for a float, lists ->
  tuples, elements of an all-float (all-int) tuple as floats (ints)."""
  if isinstance(default, (tuple, list)):
    types = {type(d) for d in default}
    cast = types.pop() if len(types) == 1 and types <= {int, float} else None
    return tuple(cast(v) if cast is not None else v for v in value)
  return float(value) if isinstance(default, float) else value


class SectionView:
  """The base of `section_view`'s views: `from_config`, and no problems by default."""

  defaults: ClassVar[Callable[[], ml_collections.ConfigDict]]
  where: ClassVar[str]
  nested: ClassVar[Mapping[str, type]]

  @classmethod
  def from_config(cls, section: Any, *, where: str | None = None, check: bool = True):
    """The view of `section` (a ConfigDict, a view, or a dict; see the module doc), named
    `where` in messages (default: the section's own path). Raises one ConfigError listing
    every missing or ill-typed field, then, if `check`, one listing `problems()`."""
    where = cls.where if where is None else where
    values, problems = cls._read(section, where)
    refuse(problems)
    view = cls(**values)
    if check:
      refuse(view.problems())
    return view

  @classmethod
  def _read(cls, section: Any, where: str) -> tuple[dict[str, Any], list[str]]:
    defaults = cls.defaults()
    partial = isinstance(section, Mapping)   # a plain dict: missing fields take defaults
    values, problems = {}, []
    for field in dataclasses.fields(cls):
      name, default, path = field.name, defaults[field.name], f"{where}.{field.name}"
      if partial:
        value = section.get(name, default)
      elif isinstance(section, ml_collections.ConfigDict) and name not in section:
        problems.append(f"{path}: missing (build the section on its defaults)")
        continue
      elif not isinstance(section, ml_collections.ConfigDict) and not hasattr(section, name):
        problems.append(f"{path}: missing (build the section on its defaults)")
        continue
      else:
        value = getattr(section, name)
      view = cls.nested.get(name)
      if view is not None:
        if isinstance(value, view):
          values[name] = value
          continue
        try:
          values[name] = view.from_config(value, where=path, check=False)
        except ConfigError as e:
          problems += str(e).splitlines()
      elif fits(value, default):
        values[name] = _as_default(value, default)
      else:
        problems.append(f"{path} = {value!r}: expected {kind(default)}, like its default "
                        f"{default!r}")
    if partial:
      known = {f.name for f in dataclasses.fields(cls)}
      problems += [f"{where}.{k}: no such field; expected some of {sorted(known)}"
                   for k in sorted(set(section) - known)]
    return values, problems

  def problems(self) -> list[str]:
    """What is wrong with the values, one `config.<section>.<field> = value: reason` each."""
    return []


def section_view(defaults: Callable[[], ml_collections.ConfigDict], where: str, *,
                 nested: Mapping[str, type] | None = None) -> type:
  """A frozen dataclass with one field per field of `defaults()`, typed like its default,
  to subclass as the section's view (module doc).

  Args:
    defaults: the section's defaults (the room's `<section>_defaults`).
    where: the section's path in messages, "config.<section>".
    nested: the views of sub-sections that have their own class (`{"mesh": MeshConfig}`);
      every other sub-section gets a plain derived view.
  """
  section = defaults()
  nested = dict(nested or {})
  for name, value in section.items():
    if isinstance(value, ml_collections.ConfigDict) and name not in nested:
      nested[name] = section_view(lambda name=name: defaults()[name], f"{where}.{name}")
  fields = [(name, nested[name] if name in nested else type(value))
            for name, value in section.items()]
  base = dataclasses.make_dataclass(
      "".join(p.title() for p in where.split(".")[1:]) + "Fields", fields,
      bases=(SectionView,), frozen=True)
  base.defaults, base.where, base.nested = staticmethod(defaults), where, nested
  return base
