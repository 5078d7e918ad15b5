"""IFBench's evaluation protocol over one row, in either mode (package docstring).

A row is a test row with its response: {key, prompt, instruction_id_list, kwargs,
response}. As the official evaluation does:
  strict  an instruction is followed when the response is not blank and its checker passes;
  loose   when its checker passes on any non-blank one of 8 variants: the response, without
          its first line, its last line or both (each stripped), and each of these four with
          every "*" removed.
kwargs entries are used without their null values; "prompt" is the row's prompt.

A checker that needs data this machine lacks (NLTK's POS tagger for words:start_verb)
raises ConfigError; with skip_unavailable=True its verdict is None instead, the prompt's
follow_all_instructions None too, and the row lists it under "unscored".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from harnessrl_jax.data import checks
from harnessrl_jax.data.importers import ifbench as ifbench_importer
from harnessrl_jax.data.importers.common import criterion_id
from harnessrl_jax.data.loader import parse_task
from harnessrl_jax.errors import ConfigError, DataError
from harnessrl_jax.eval.ifverify import (official_count, official_format, official_ifeval,
                                         official_words)

Checker = Callable[[str, Mapping[str, Any], str], bool]
MODES = ("official", "strict")

OFFICIAL: dict[str, Checker] = {**official_count.CHECKERS, **official_format.CHECKERS,
                                **official_words.CHECKERS, **official_ifeval.CHECKERS}


def loose_variants(response: str) -> list[str]:
  """The 8 responses the official loose evaluation tries, in its order."""
  lines = response.split("\n")
  first, last, both = ("\n".join(part).strip() for part in
                       (lines[1:], lines[:-1], lines[1:-1]))
  plain = [response, first, last, both]
  return [plain[0], plain[0].replace("*", ""), *plain[1:],
          *(p.replace("*", "") for p in plain[1:])]


def _followed(checker: Callable[[str], bool], response: str, loose: bool) -> bool:
  candidates = loose_variants(response) if loose else [response]
  return any(r.strip() and checker(r) for r in candidates)


def _official_checker(iid: str, kwargs: Mapping[str, Any], prompt: str, where: str):
  fn = OFFICIAL.get(iid)
  if fn is None:
    raise DataError([f"{where}: instruction id {iid!r} has no official checker; known ids: "
                     f"{len(OFFICIAL)} (harnessrl_jax/eval/ifverify/official_*.py)"])
  return lambda r: bool(fn(r, kwargs, prompt))


def _strict_checkers(row: Mapping[str, Any], where: str) -> list[Callable[[str], bool] | None]:
  """Our check per instruction (None where the importer leaves it unverified)."""
  task = parse_task(ifbench_importer.convert_record(dict(row)), where=where)
  by_id = {c.id: c for c in task.criteria}
  out = []
  for i in range(len(row["instruction_id_list"])):
    crit = by_id.get(criterion_id(i))
    if crit is None or crit.check is None:
      out.append(None)
    else:
      out.append(lambda r, c=crit.check: bool(checks.run_check(c, r, prompt=task.user_text)))
  return out


def verify_row(row: Mapping[str, Any], mode: str, loose: bool, *, where: str = "row",
               skip_unavailable: bool = False) -> dict[str, Any]:
  """{key, instruction_id_list, follow_all_instructions, follow_instruction_list} (+ in
  strict mode "official_fallback": the ids our checks leave unverified, which took the
  official verdict; + "unscored": {id: why} where a checker could not run, see above)."""
  if mode not in MODES:
    raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
  for field in ("prompt", "instruction_id_list", "kwargs", "response"):
    if field not in row:
      raise DataError([f"{where}: missing field {field!r}"])
  ids: Sequence[str] = row["instruction_id_list"]
  kwargs_list = row["kwargs"]
  if len(ids) != len(kwargs_list):
    raise DataError([f"{where}: kwargs has {len(kwargs_list)} entries but "
                     f"instruction_id_list has {len(ids)}"])
  response = row["response"] if isinstance(row["response"], str) else ""
  prompt = row["prompt"]
  strict = _strict_checkers(row, where) if mode == "strict" else [None] * len(ids)
  follows, fallback, unscored = [], [], {}
  for iid, raw, ours in zip(ids, kwargs_list, strict):
    kwargs = {k: v for k, v in (raw or {}).items() if v is not None}
    checker = ours
    if checker is None:
      checker = _official_checker(iid, kwargs, prompt, where)
      if mode == "strict":
        fallback.append(iid)
    try:
      follows.append(bool(_followed(checker, response, loose)))
    except ConfigError as e:
      if not skip_unavailable:
        raise
      follows.append(None)
      unscored[iid] = str(e)
  out = {"key": row.get("key"), "instruction_id_list": list(ids),
         "follow_all_instructions": None if unscored else all(follows),
         "follow_instruction_list": follows}
  if unscored:
    out["unscored"] = unscored
  if mode == "strict":
    out["official_fallback"] = fallback
  return out
