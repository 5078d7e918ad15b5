"""Multiple-choice benchmarks (MedQA, GPQA-Diamond): loaders, prompts, answer extraction.

Local copies only; nothing is downloaded.
  - MedQA (US, 4/5 options), JSONL: {"question": str, "options": {"A": str, ...},
    "answer_idx": "C", "answer": str}; options may also be [{"key": "A", "value": str}].
  - GPQA-Diamond, CSV with the columns "Question", "Correct Answer", "Incorrect Answer 1",
    "Incorrect Answer 2", "Incorrect Answer 3" ("Record ID", where present, names the item;
    other columns are ignored). Options are
    shuffled per question with a generator seeded by (seed, sha256 of the question), so an
    order does not depend on file order and is the same in every run with the same seed.

Answer extraction (`extract_choice`) tries these rules in order; the first that yields a
letter among the item's options wins (letters are upper-case only, so "a" in "a patient"
never counts):
  1. explicit: the LAST "answer is C", "Answer: (C)", "final answer: **C**", "correct
     option/choice is C", "best option is C" ("answer" in any case);
  2. LaTeX: the last \\boxed{C};
  3. bold: the last **C**, **(C)** or **C.**;
  4. bare: the whole response (stripped of punctuation and markup) is one letter, "C" or "C)";
  5. parentheses: "(C)" where exactly ONE distinct option letter appears in parentheses
     (responses that restate every option give several, so they fall through);
  6. option text: exactly one option's text (case and whitespace folded) occurs in the
     response, after dropping options whose text is contained in another matched option;
  7. last line: the last non-empty line holds exactly ONE distinct standalone option letter
     not followed by a lower-case word (so the article "A" in "A patient ..." is skipped and
     a line restating several options gives nothing).
No rule matching gives None, which scores as wrong.

`extract_choice_simple_evals` reproduces openai/simple-evals' GPQA rule instead (the first
"Answer: X", case-insensitive); protocols report the accuracy under both rules.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import re
from collections.abc import Sequence

import numpy as np

from harnessrl_jax.data.schema import Message
from harnessrl_jax.errors import DataError
from harnessrl_jax.eval.common import json_rows, require_file

LETTERS = "ABCDEFGHIJ"
INSTRUCTION = ("Answer the following multiple-choice question. Think briefly, then give "
               "the letter of the correct option on the last line as 'Answer: X'.")

_L = r"([A-J])"
_END = r"(?![A-Za-z0-9])"
_EXPLICIT = re.compile(
    r"(?i:answer|correct\s+option|correct\s+choice|best\s+option|best\s+choice)"
    r"(?:\s*(?i:is|would\s+be|=|:|-))?\s*(?:(?i:option|choice)\s+)?[:\s]*"
    r"(?:\*\*|\(|\[)?\s*" + _L + r"\s*(?:\*\*|\)|\])?" + _END)
_BOXED = re.compile(r"\\boxed\{\s*(?:\\text\{)?\s*" + _L + r"\s*\}?\s*\}")
_BOLD = re.compile(r"\*\*\s*\(?" + _L + r"[.)]?\s*\*\*")
_BARE = re.compile(r"^[\s*(\[]*" + _L + r"[\s.)\]*:]*$")
_PAREN = re.compile(r"\(" + _L + r"\)")
_LAST = re.compile(r"(?<![A-Za-z0-9'])" + _L + r"(?![A-Za-z0-9'])(?!\s+[a-z])")


@dataclasses.dataclass(frozen=True)
class ChoiceItem:
  """One multiple-choice question; `options` maps letters to option texts in prompt order."""

  id: str
  question: str
  options: tuple[tuple[str, str], ...]
  answer: str

  def prompt(self) -> tuple[Message, ...]:
    body = "\n".join(f"{letter}. {text}" for letter, text in self.options)
    return (Message("user", f"{INSTRUCTION}\n\n{self.question.strip()}\n\n{body}"),)


def _fold(text: str) -> str:
  return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


def extract_choice(response: str, options: Sequence[tuple[str, str]]) -> str | None:
  """The option letter a response chose, or None (rules in the module docstring)."""
  valid = {letter for letter, _ in options}
  for pattern in (_EXPLICIT, _BOXED, _BOLD):
    found = [m.group(1) for m in pattern.finditer(response) if m.group(1) in valid]
    if found:
      return found[-1]
  bare = _BARE.match(response)
  if bare and bare.group(1) in valid:
    return bare.group(1)
  paren = {m.group(1) for m in _PAREN.finditer(response)} & valid
  if len(paren) == 1:
    return paren.pop()
  folded = f" {_fold(response)} "
  matched = {letter: _fold(text) for letter, text in options
             if _fold(text) and f" {_fold(text)} " in folded}
  maximal = [letter for letter, text in matched.items()
             if not any(text != other and text in other for other in matched.values())]
  if len(maximal) == 1:
    return maximal[0]
  lines = [line for line in response.splitlines() if line.strip()]
  if lines:
    found = {m.group(1) for m in _LAST.finditer(lines[-1])} & valid
    if len(found) == 1:
      return found.pop()
  return None


def extract_choice_simple_evals(response: str,
                                options: Sequence[tuple[str, str]]) -> str | None:
  r"""The letter openai/simple-evals would read from `response`, or None.

  Reproduces simple-evals' GPQA extraction as read at commit
  9e2fafd122f057f373467fc0d45901889d8c4926 (gpqa_eval.py; ANSWER_PATTERN_MULTICHOICE in
  common.py, unchanged at 01ac108d27478a71ead72e966d68810a18a776fb): one `re.search` of
  `Answer[ \t]*:[ \t]*$?X$?` with the IGNORECASE flag on the raw response, so
    - the FIRST match wins, not the last;
    - "answer"/"ANSWER" count, only spaces or tabs may surround the colon (no newline, no
      "**", "(" or "\boxed{" between colon and letter), an optional "$" may precede it;
    - the letter is not delimited: "Answer: Because ..." reads B;
    - the letter is matched in either case and returned AS WRITTEN: "Answer: c" gives "c",
      which simple-evals compares case-sensitively with "C" and so scores wrong.
  No normalisation is applied: common.normalize_response (strips "**", "\boxed{", "$") is
  used by simple-evals' multilingual MMLU, not by GPQA. simple-evals' class is [A-D] (its
  template has four options); here it is the item's option letters, which for four options
  is the same and for 5-option MedQA also admits E.
  """
  letters = "".join(letter for letter, _ in options)
  found = re.search(r"(?i)Answer[ \t]*:[ \t]*\$?([" + letters + r"])\$?", response)
  return found.group(1) if found else None


def load_medqa(path: str) -> tuple[ChoiceItem, ...]:
  """MedQA JSONL -> items; every malformed line is reported as FILE:LINE: problem."""
  require_file("MedQA", path)
  items, problems = [], []
  for n, where, row in json_rows(path, problems):
    options = row.get("options") if isinstance(row, dict) else None
    if isinstance(options, list) and all(isinstance(o, dict) for o in options):
      options = {o.get("key"): o.get("value") for o in options}   # the bigbio layout
    if not isinstance(options, dict) or not options or not all(
        isinstance(k, str) and k in LETTERS and isinstance(v, str) for k, v in options.items()):
      problems.append(f"{where}: options: must map letters A.. to option texts")
      continue
    answer = row.get("answer_idx")
    if answer not in options:
      problems.append(f"{where}: answer_idx: {answer!r} is not one of {sorted(options)}")
      continue
    if not isinstance(row.get("question"), str) or not row["question"].strip():
      problems.append(f"{where}: question: must be a non-empty string")
      continue
    items.append(ChoiceItem(f"medqa/{n}", row["question"], tuple(sorted(options.items())),
                            answer))
  if problems:
    raise DataError(problems)
  return tuple(items)


GPQA_COLUMNS = ("Question", "Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2",
                "Incorrect Answer 3")


def load_gpqa(path: str, *, seed: int = 0) -> tuple[ChoiceItem, ...]:
  """GPQA-Diamond CSV -> items with options shuffled by (seed, question)."""
  require_file("GPQA-Diamond", path)
  with open(path, encoding="utf-8", newline="") as f:
    reader = csv.DictReader(f)
    absent = [c for c in GPQA_COLUMNS if c not in (reader.fieldnames or ())]
    if absent:
      raise DataError([f"{path}:1: header lacks the columns {absent}"])
    items, problems = [], []
    for n, row in enumerate(reader, 1):   # rows, not lines: GPQA cells span lines
      texts = [(row[c] or "").strip() for c in GPQA_COLUMNS]
      if not all(texts):
        empty = [c for c, t in zip(GPQA_COLUMNS, texts) if not t]
        problems.append(f"{path}: row {n}: empty cell in {empty}")
        continue
      digest = int(hashlib.sha256(texts[0].encode("utf-8")).hexdigest()[:15], 16)
      order = np.random.default_rng([seed, digest]).permutation(4)
      options = tuple((LETTERS[i], texts[1 + k]) for i, k in enumerate(order))
      answer = LETTERS[int(np.flatnonzero(order == 0)[0])]
      items.append(ChoiceItem(f"gpqa/{(row.get('Record ID') or '').strip() or n}", texts[0],
                              options, answer))
  if problems:
    raise DataError(problems)
  return tuple(items)
