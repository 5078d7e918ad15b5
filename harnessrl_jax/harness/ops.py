"""Harness operations as frozen dataclasses, one pure `apply`, and their JSON form.

`apply(h, op)` returns a new harness or raises HarnessError naming the operation and the
rule it breaks; `h` is never changed. Each op serialises to a JSON object
`{"op": <kind>, ...fields}` for the history log and parses back with `op_from_json`.

`RubricCreate` and `RubricRewrite` may carry a programmatic `check` (a `data.schema.Check`;
in JSON `{"type": NAME, ...args}` as a task criterion's "check" field), so that a judge
without an LLM can grade the criterion. A rewrite with `check` None keeps the criterion's
check; a rewrite cannot remove one (delete the criterion and create another instead). An op
without a check has no "check" key in its JSON (the form it had before ops carried checks).
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Union

from harnessrl_jax.data import checks
from harnessrl_jax.data.frozen import FrozenMap
from harnessrl_jax.data.schema import Check
from harnessrl_jax.errors import HarnessError
from harnessrl_jax.harness import guidance, rubric, sampling
from harnessrl_jax.harness.state import Harness


@dataclasses.dataclass(frozen=True)
class SamplingLevelDown:
  kind: ClassVar[str] = "sampling_level_down"
  task_id: str


@dataclasses.dataclass(frozen=True)
class SamplingLevelUp:
  kind: ClassVar[str] = "sampling_level_up"
  task_id: str


@dataclasses.dataclass(frozen=True)
class SetLadder:
  """Cold start's level weights (1, gamma1, gamma2, gamma3)."""
  kind: ClassVar[str] = "set_ladder"
  ladder: tuple[float, ...]


@dataclasses.dataclass(frozen=True)
class AddGuidance:
  kind: ClassVar[str] = "add_guidance"
  task_id: str
  field: str
  content: str


@dataclasses.dataclass(frozen=True)
class DropGuidance:
  kind: ClassVar[str] = "drop_guidance"
  task_id: str
  field: str


@dataclasses.dataclass(frozen=True)
class EnforceSchedule:
  """Sets the guidance cap for `step` of `total_steps` and drops the oldest excess fields."""
  kind: ClassVar[str] = "enforce_schedule"
  step: int
  total_steps: int


@dataclasses.dataclass(frozen=True)
class RubricCreate:
  kind: ClassVar[str] = "rubric_create"
  task_id: str
  criterion_id: str
  text: str
  weight: float
  tags: tuple[str, ...] = ()
  check: Check | None = None


@dataclasses.dataclass(frozen=True)
class RubricRewrite:
  """New text and, if `check` is given, a new check (None keeps the current check)."""
  kind: ClassVar[str] = "rubric_rewrite"
  task_id: str
  criterion_id: str
  text: str
  check: Check | None = None


@dataclasses.dataclass(frozen=True)
class RubricDelete:
  kind: ClassVar[str] = "rubric_delete"
  task_id: str
  criterion_id: str


@dataclasses.dataclass(frozen=True)
class RubricReweight:
  kind: ClassVar[str] = "rubric_reweight"
  task_id: str
  criterion_id: str
  weight: float


@dataclasses.dataclass(frozen=True)
class RubricMerge:
  kind: ClassVar[str] = "rubric_merge"
  task_id: str
  criterion_ids: tuple[str, ...]
  new_id: str
  text: str
  weight: float | None = None


@dataclasses.dataclass(frozen=True)
class RubricSplit:
  """`parts`: (new_id, text, weight) triples."""
  kind: ClassVar[str] = "rubric_split"
  task_id: str
  criterion_id: str
  parts: tuple[tuple[str, str, float], ...]


Op = Union[SamplingLevelDown, SamplingLevelUp, SetLadder, AddGuidance, DropGuidance,
           EnforceSchedule, RubricCreate, RubricRewrite, RubricDelete, RubricReweight,
           RubricMerge, RubricSplit]

_APPLY = {
    SamplingLevelDown: lambda h, o: sampling.level_down(h, o.task_id),
    SamplingLevelUp: lambda h, o: sampling.level_up(h, o.task_id),
    SetLadder: lambda h, o: sampling.set_ladder(h, o.ladder),
    AddGuidance: lambda h, o: guidance.add_guidance(h, o.task_id, o.field, o.content),
    DropGuidance: lambda h, o: guidance.drop_guidance(h, o.task_id, o.field),
    EnforceSchedule: lambda h, o: guidance.enforce_schedule(h, o.step, o.total_steps),
    RubricCreate: lambda h, o: rubric.create(h, o.task_id, o.criterion_id, o.text, o.weight,
                                             o.tags, o.check),
    RubricRewrite: lambda h, o: rubric.rewrite(h, o.task_id, o.criterion_id, o.text, o.check),
    RubricDelete: lambda h, o: rubric.delete(h, o.task_id, o.criterion_id),
    RubricReweight: lambda h, o: rubric.reweight(h, o.task_id, o.criterion_id, o.weight),
    RubricMerge: lambda h, o: rubric.merge(h, o.task_id, o.criterion_ids, o.new_id, o.text,
                                           o.weight),
    RubricSplit: lambda h, o: rubric.split(h, o.task_id, o.criterion_id, o.parts),
}
OPS = {cls.kind: cls for cls in _APPLY}


def apply(h: Harness, op: Op) -> Harness:
  """H -> H' under `op`; HarnessError (naming op and rule) if the op is illegal on `h`."""
  fn = _APPLY.get(type(op))
  if fn is None:
    raise HarnessError(f"{op!r} is not a harness operation (known: {sorted(OPS)})")
  try:
    return fn(h, op)
  except (HarnessError, TypeError, ValueError) as e:  # malformed fields count as illegal
    raise HarnessError(f"{op.kind} refused: {e} [op: {op_to_json(op)}]") from None


def apply_all(h: Harness, ops) -> Harness:
  """Applies `ops` in order; all or nothing (the input harness is never changed)."""
  for op in ops:
    h = apply(h, op)
  return h


def touches(op: Op) -> tuple[str, tuple[str, ...]]:
  """(task_id, criterion ids the op reads or writes); ("", ()) for harness-wide ops."""
  task = getattr(op, "task_id", "")
  ids = []
  for name in ("criterion_id", "new_id"):
    if getattr(op, name, None):
      ids.append(getattr(op, name))
  ids.extend(getattr(op, "criterion_ids", ()))
  ids.extend(p[0] for p in getattr(op, "parts", ()))
  return task, tuple(ids)


def _to_plain(v: Any) -> Any:
  if isinstance(v, tuple):
    return [_to_plain(x) for x in v]
  if isinstance(v, Check):
    return v.to_json()
  return v


def op_to_json(op: Op) -> dict[str, Any]:
  out = {"op": op.kind}
  for f in dataclasses.fields(op):
    v = getattr(op, f.name)
    if f.name == "check" and v is None:
      continue  # check-free ops keep their JSON (and old history lines their meaning)
    out[f.name] = _to_plain(v)
  return out


def _to_tuple(v: Any) -> Any:
  if isinstance(v, list):
    return tuple(_to_tuple(x) for x in v)
  return v


def check_from_json(value: Any, where: str) -> Check | None:
  """A check from its JSON `{"type": NAME, ...args}` (null: none); HarnessError naming
  `where` and every problem of a malformed or invalid one."""
  if value is None:
    return None
  if not isinstance(value, dict) or not isinstance(value.get("type"), str):
    raise HarnessError(f"{where}: check must be an object {{\"type\": NAME, ...args}}, "
                       f"got {value!r}")
  try:
    return Check(value["type"], FrozenMap({k: v for k, v in value.items() if k != "type"}))
  except checks.InvalidCheck as e:
    raise HarnessError(f"{where}: invalid check: {e}") from None


def op_from_json(obj: dict[str, Any]) -> Op:
  """Parses `op_to_json` output; HarnessError on an unknown kind, wrong fields or an invalid
  check."""
  if not isinstance(obj, dict) or obj.get("op") not in OPS:
    raise HarnessError(f"not a harness operation: {obj!r} (known kinds: {sorted(OPS)})")
  cls = OPS[obj["op"]]
  names = {f.name for f in dataclasses.fields(cls)}
  given = set(obj) - {"op"}
  required = {f.name for f in dataclasses.fields(cls)
              if f.default is dataclasses.MISSING}
  if not required <= given <= names:
    raise HarnessError(f"{obj['op']}: fields {sorted(given)}; expected {sorted(required)} "
                       f"and optionally {sorted(names - required)}")
  fields = {k: _to_tuple(obj[k]) for k in given - {"check"}}
  if "check" in given:
    fields["check"] = check_from_json(obj["check"], obj["op"])
  return cls(**fields)
