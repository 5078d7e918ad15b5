"""Strict JSON answers from LLM roles: one object, nothing else (a ```json fence allowed).

An answer that fails is re-asked once with the parse error appended; a second failure
raises ParseError (the caller falls back or records the failure). Never guesses.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from harnessrl_jax.data.schema import Message
from harnessrl_jax.errors import HarnessError

T = TypeVar("T")
_FENCE = re.compile(r"^```(?:json)?\s*\n(.*)\n```$", re.DOTALL)


class ParseError(HarnessError):
  """An LLM role's answer is not the JSON asked for."""


def _reject_constant(name: str):
  raise ParseError(f"{name} is not JSON")


def parse_object(text: str) -> dict[str, Any]:
  """The answer as a JSON object; ParseError on anything else (prose, two objects, ...)."""
  if not isinstance(text, str):
    raise ParseError("no answer")
  body = text.strip()
  m = _FENCE.match(body)
  if m:
    body = m.group(1).strip()
  try:
    obj = json.loads(body, parse_constant=_reject_constant)
  except json.JSONDecodeError as e:
    raise ParseError(f"not one JSON object: {e}") from None
  if not isinstance(obj, dict):
    raise ParseError(f"expected a JSON object, got {type(obj).__name__}")
  return obj


def require_keys(obj: Any, keys: set[str], where: str) -> None:
  if not isinstance(obj, dict):
    raise ParseError(f"{where}: expected an object")
  if set(obj) != keys:
    raise ParseError(f"{where}: keys {sorted(obj)}; expected exactly {sorted(keys)}")


def ask(client, messages: Sequence[Message], max_tokens: int,
        parse: Callable[[str], T], schema: dict[str, Any] | None = None) -> tuple[T, int]:
  """(parsed answer, requests sent); re-asks once on a ParseError. `schema`: the answer's
  JSON schema, sent to servers that decode under one (judges/client.py); `parse` still
  checks everything."""
  answer = client.complete([tuple(messages)], max_tokens=max_tokens, schema=schema)[0]
  try:
    return parse(answer), 1
  except ParseError as e:
    retry = (*messages, Message("assistant", answer),
             Message("user", f"That answer could not be used: {e}. Reply with only the JSON "
                             "object in the format asked for."))
    return parse(client.complete([retry], max_tokens=max_tokens, schema=schema)[0]), 2
