"""Reading a verdict out of a judge's answer.

Tolerates code fences, prose before the object and trailing text: the first JSON object
in the answer that has a boolean-valued "criteria_met" wins. Strings "true"/"false" are
accepted (some servers' JSON modes quote booleans); anything else is unparseable and the
caller retries the cell, then leaves it unscored: a verdict is never defaulted.
"""

from __future__ import annotations

import json

_DECODER = json.JSONDecoder()


def first_json_with(text: str, key: str) -> dict | None:
  """The first JSON object in `text` that has `key`, or None."""
  start = text.find("{")
  while start != -1:
    try:
      obj, _ = _DECODER.raw_decode(text, start)
    except json.JSONDecodeError:
      obj = None
    if isinstance(obj, dict) and key in obj:
      return obj
    start = text.find("{", start + 1)
  return None


def parse_verdict(text: str | None) -> bool | None:
  """criteria_met of the first usable JSON object in `text`, or None."""
  if not text:
    return None
  obj = first_json_with(text, "criteria_met")
  if obj is None:
    return None
  value = obj["criteria_met"]
  if isinstance(value, bool):
    return value
  if isinstance(value, str) and value.strip().lower() in ("true", "false"):
    return value.strip().lower() == "true"
  return None  # the object is there but its verdict is not a boolean: do not guess
