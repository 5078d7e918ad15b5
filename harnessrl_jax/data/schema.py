"""The task schema: frozen dataclasses shared by every stage.

On disk a task is one JSON object per line (see docs/data-format.md):

  {"id": str, "domain": str, "source": str?,
   "prompt": [{"role": "system"|"user"|"assistant", "content": str}, ...] | str,
   "criteria": [{"id": str, "text": str, "weight": float, "anchor": bool?,
                 "tags": [str]?, "check": {"type": str, ...args}?}, ...],
   "reference_answer": str | null, "meta": {...}?}

A negative weight marks a penalty criterion: judged "met" means the bad behaviour happened.
Criteria loaded from data are anchors (seed criteria) unless the file says otherwise; only
the evolver creates non-anchor criteria.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from harnessrl_jax.data import checks
from harnessrl_jax.data.frozen import FrozenMap, freeze, thaw

DOMAINS = ("medical", "science", "writing", "roleplay", "instruction_following")
ROLES = ("system", "user", "assistant")


@dataclasses.dataclass(frozen=True)
class Message:
  role: str
  content: str


@dataclasses.dataclass(frozen=True)
class Check:
  """A programmatic verifier: `type` names an entry of `checks.CHECKS`, `args` its kwargs.

  Validated once, here: a Check that exists can run, so grading a cell only runs its
  predicate (`checks.run_check`).

  Raises:
    checks.InvalidCheck: the kind is unknown or the args are malformed; its `problems`
      lists every one of them.
  """

  type: str
  args: FrozenMap = dataclasses.field(default_factory=FrozenMap)

  def __post_init__(self):
    object.__setattr__(self, "args", freeze(self.args))
    problems = checks.validate_check(self.type, self.args)
    if problems:
      raise checks.InvalidCheck(self.type, problems)

  def to_json(self) -> dict[str, Any]:
    return {"type": self.type, **thaw(self.args)}


@dataclasses.dataclass(frozen=True)
class Criterion:
  id: str
  text: str
  weight: float
  anchor: bool = True
  tags: tuple[str, ...] = ()
  check: Check | None = None

  def to_json(self) -> dict[str, Any]:
    out = {"id": self.id, "text": self.text, "weight": self.weight, "anchor": self.anchor,
           "tags": list(self.tags)}
    if self.check is not None:
      out["check"] = self.check.to_json()
    return out


@dataclasses.dataclass(frozen=True)
class Task:
  id: str
  domain: str
  prompt: tuple[Message, ...]
  criteria: tuple[Criterion, ...]
  reference_answer: str | None = None
  source: str = ""
  meta: FrozenMap = dataclasses.field(default_factory=FrozenMap)

  def __post_init__(self):
    object.__setattr__(self, "meta", freeze(self.meta))

  @property
  def user_text(self) -> str:
    """The last user message: what checks such as `repeat_prompt` compare against."""
    for m in reversed(self.prompt):
      if m.role == "user":
        return m.content
    return ""

  def to_json(self) -> dict[str, Any]:
    return {"id": self.id, "domain": self.domain, "source": self.source,
            "prompt": [{"role": m.role, "content": m.content} for m in self.prompt],
            "criteria": [c.to_json() for c in self.criteria],
            "reference_answer": self.reference_answer, "meta": thaw(self.meta)}
