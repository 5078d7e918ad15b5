"""Official-mode checkers of the 25 IFEval ids (google-research instruction_following_eval,
also in IFBench's registry): each reproduces the verdict of IFEval's check_following for
that id (quirks included; each quirk named in a comment and listed in docs/evaluation.md).

Arguments reach a checker as IFEval's build_description receives them (the row's kwargs
without nulls). Where build_description would draw a random argument (a missing or negative
count, a missing keyword or relation) or where the official code would raise (an unknown
argument, a bad regex, a relation other than "less than"/"at least"), the instruction counts
as not followed. IFEval's data holds JSON ints; an integral float (2.0, as HF/pandas copies
store them) is read as the int it stands for.

The prompt argument is unused: IFEval's evaluation re-builds an instruction with
prompt=row["prompt"] only when its args hold a "prompt" key, and none of the 25 does
(combination:repeat_prompt compares with its own kwarg prompt_to_repeat).
"""

from __future__ import annotations

import functools
import json
import re
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from harnessrl_jax.eval.ifverify import text

Checker = Callable[[str, Mapping[str, Any], str], bool]

# id -> checker(response, kwargs without nulls, prompt) -> followed
CHECKERS: dict[str, Checker] = {}

_RELATIONS = ("less than", "at least")
_CONSTRAINED_OPTIONS = ("My answer is yes.", "My answer is no.", "My answer is maybe.")
_FIRST_WORD_STOP = frozenset(".,?!'\"")
# IFEval's LANGUAGE_CODES: build_description looks the code up there (KeyError otherwise).
_LANGUAGES = frozenset("en es pt ar hi fr ru de ja it bn uk th ur ta te bg ko pl he fa vi ne "
                       "sw kn mr gu pa ml fi".split())


class _Unreproducible(Exception):
  """The official build_description would draw a random argument (or raise)."""


def _register(iid: str, *args: str) -> Callable[[Checker], Checker]:
  """Adds the checker under `iid`; `args` are the keyword arguments its build_description
  accepts (any other one is a TypeError there). Official crashes count as not followed."""
  allowed = frozenset(args)

  def deco(fn: Checker) -> Checker:
    @functools.wraps(fn)
    def safe(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
      if not set(kwargs) <= allowed:
        return False
      try:
        return bool(fn(response, {k: _as_int(v) for k, v in kwargs.items()}, prompt))
      except (_Unreproducible, re.error, AttributeError, IndexError, KeyError, TypeError,
              ValueError, RecursionError):
        return False
    CHECKERS[iid] = safe
    return safe
  return deco


def _as_int(value: Any) -> Any:
  return int(value) if isinstance(value, float) and value.is_integer() else value


def _count(kwargs: Mapping[str, Any], key: str, negative_ok: bool = False) -> Any:
  """`if x is None or x < 0: x = random.randint(...)` (capital_frequency checks only None)."""
  value = kwargs.get(key)
  if value is None or (value < 0 and not negative_ok):
    raise _Unreproducible(key)
  return value


def _relation(kwargs: Mapping[str, Any], key: str = "relation") -> str:
  """None draws a random relation; anything else than the two raises ValueError."""
  value = kwargs.get(key)
  if value not in _RELATIONS:
    raise _Unreproducible(key)
  return value


def _compare(actual: int, relation: str, threshold: Any) -> bool:
  return actual < threshold if relation == "less than" else actual >= threshold


def _stripped(kwargs: Mapping[str, Any], key: str) -> str:
  """String args are .strip()ped by build_description; a missing one is drawn at random."""
  value = kwargs.get(key)
  if value is None:
    raise _Unreproducible(key)
  return value.strip()


@functools.cache
def _language_factory() -> Any:
  """A private langdetect factory with seed 0. The official code calls langdetect.detect
  unseeded, so its verdict on borderline text varies from run to run; seed 0 (langdetect's
  documented way to be deterministic) keeps ours repeatable without touching the global
  factory other code may use."""
  from langdetect import detector_factory  # pylint: disable=g-import-not-at-top
  factory = detector_factory.DetectorFactory()
  factory.load_profile(detector_factory.PROFILES_DIRECTORY)
  factory.seed = 0
  return factory


def _is_language(response: str, code: str) -> bool:
  """langdetect's guess == code. Quirk: text langdetect cannot read (no letters: digits,
  punctuation, emoji only) raises LangDetectException, which the official code counts as
  followed."""
  from langdetect import LangDetectException  # pylint: disable=g-import-not-at-top
  detector = _language_factory().create()
  detector.append(response)
  try:
    return detector.detect() == code
  except LangDetectException:
    return True


# ---- keywords:*


@_register("keywords:existence", "keywords")
def _existence(response, kwargs, prompt):
  keywords = kwargs.get("keywords")
  if not keywords:
    raise _Unreproducible("keywords")
  # Quirk: each keyword is an unescaped regex searched case-insensitively as a substring:
  # "cat" is found in "Concatenate"; "c++" is a bad regex (official crash -> False).
  return all(re.search(k, response, flags=re.IGNORECASE) for k in sorted(keywords))


@_register("keywords:frequency", "keyword", "frequency", "relation")
def _frequency(response, kwargs, prompt):
  if not kwargs.get("keyword"):
    raise _Unreproducible("keyword")
  keyword = kwargs["keyword"].strip()
  # Quirk: occurrences are non-overlapping case-insensitive substring (regex) matches, so
  # "war" counts in "software" and "Warning".
  found = len(re.findall(keyword, response, flags=re.IGNORECASE))
  return _compare(found, _relation(kwargs), _count(kwargs, "frequency"))


@_register("keywords:forbidden_words", "forbidden_words")
def _forbidden_words(response, kwargs, prompt):
  words = kwargs.get("forbidden_words")
  if not words:
    raise _Unreproducible("forbidden_words")
  # Whole words (\b on both sides), case-insensitive: "rocks" does not contain "rock";
  # the word is an unescaped regex.
  return not any(re.search(rf"\b{w}\b", response, flags=re.IGNORECASE)
                 for w in sorted(set(words)))


@_register("keywords:letter_frequency", "letter", "let_frequency", "let_relation")
def _letter_frequency(response, kwargs, prompt):
  letter = kwargs.get("letter")
  if not letter or len(letter) > 1:
    raise _Unreproducible("letter")
  # Case-insensitive character count; the "letter" may be any character ("#", "!").
  found = Counter(response.lower())[letter.strip().lower()]
  return _compare(found, _relation(kwargs, "let_relation"), _count(kwargs, "let_frequency"))


# ---- language:*, change_case:*


@_register("language:response_language", "language")
def _response_language(response, kwargs, prompt):
  if kwargs.get("language") is None:
    raise _Unreproducible("language")
  if kwargs["language"] not in _LANGUAGES:  # official KeyError in build_description
    return False
  return _is_language(response, kwargs["language"])


@_register("change_case:english_capital")
def _english_capital(response, kwargs, prompt):
  # str.isupper: digits and punctuation are ignored, at least one cased letter needed.
  return response.isupper() and _is_language(response, "en")


@_register("change_case:english_lowercase")
def _english_lowercase(response, kwargs, prompt):
  return response.islower() and _is_language(response, "en")


@_register("change_case:capital_word_frequency", "capital_frequency", "capital_relation")
def _capital_word_frequency(response, kwargs, prompt):
  # Tokens of nltk.word_tokenize that are str.isupper(): "I" and "A" count, "U.S." and
  # "COVID-19" count as one each, "NASA's" counts once ("NASA" + "'s").
  found = sum(1 for t in text.word_tokens(response) if t.isupper())
  return _compare(found, _relation(kwargs, "capital_relation"),
                  _count(kwargs, "capital_frequency", negative_ok=True))


# ---- length_constraints:*


@_register("length_constraints:number_sentences", "num_sentences", "relation")
def _number_sentences(response, kwargs, prompt):
  # NLTK's English Punkt sentences (a bullet list without full stops is one sentence).
  return _compare(len(text.sentences(response)), _relation(kwargs),
                  _count(kwargs, "num_sentences"))


@_register("length_constraints:number_words", "num_words", "relation")
def _number_words(response, kwargs, prompt):
  # Words are runs of \w: "don't" is 2 words, "state-of-the-art" 4.
  return _compare(text.count_words(response), _relation(kwargs), _count(kwargs, "num_words"))


@_register("length_constraints:number_paragraphs", "num_paragraphs")
def _number_paragraphs(response, kwargs, prompt):
  # Paragraphs are split on "***" (with one optional whitespace either side), not on blank
  # lines. Quirk: any run of 3+ asterisks splits, so "**bold**" text does not, but
  # "****" or "***bold***" does; a blank piece is allowed only first or last.
  pieces = re.split(r"\s?\*\*\*\s?", response)
  count = len(pieces)
  for i, piece in enumerate(pieces):
    if not piece.strip():
      if i not in (0, len(pieces) - 1):
        return False
      count -= 1
  return count == _count(kwargs, "num_paragraphs")


@_register("length_constraints:nth_paragraph_first_word",
           "num_paragraphs", "nth_paragraph", "first_word")
def _nth_paragraph_first_word(response, kwargs, prompt):
  num = _count(kwargs, "num_paragraphs")
  nth = kwargs.get("nth_paragraph")
  if nth is None or nth <= 0 or nth > num:
    raise _Unreproducible("nth_paragraph")
  if kwargs.get("first_word") is None:
    raise _Unreproducible("first_word")
  wanted = kwargs["first_word"].lower()
  pieces = response.split("\n\n")
  count = sum(1 for p in pieces if p.strip())
  if nth > count:
    return False
  # Quirk: the nth piece is taken from the list that still holds the blank pieces (from
  # "\n\n\n\n"), so a blank one there fails although the count skips it.
  paragraph = pieces[nth - 1].strip()
  if not paragraph:
    return False
  # First whitespace token, leading ' then " removed, cut at the first of . , ? ! ' ":
  # "**Hello**" stays "**hello**" (markdown is not removed), "Don't" reads as "don".
  word = paragraph.split()[0].lstrip("'").lstrip('"')
  first = ""
  for ch in word:
    if ch in _FIRST_WORD_STOP:
      break
    first += ch.lower()
  return count == num and first == wanted


# ---- detectable_content:*


@_register("detectable_content:number_placeholders", "num_placeholders")
def _number_placeholders(response, kwargs, prompt):
  # Any "[...]" on one line counts, including "[]" and markdown links "[text](url)".
  return len(re.findall(r"\[.*?\]", response)) >= _count(kwargs, "num_placeholders")


@_register("detectable_content:postscript", "postscript_marker")
def _postscript(response, kwargs, prompt):
  marker = _stripped(kwargs, "postscript_marker")
  if marker == "P.P.S":
    pattern = r"\s*p\.\s?p\.\s?s.*$"
  elif marker == "P.S.":
    pattern = r"\s*p\.\s?s\..*$"
  else:
    pattern = r"\s*" + marker.lower() + r".*$"  # quirk: the marker is an unescaped regex
  # Quirk: case-insensitive and found anywhere in the text, not only at its end nor at a
  # line start: "Thanks (p.s. call me) and more text" has a P.S.
  return bool(re.findall(pattern, response.lower(), flags=re.MULTILINE))


# ---- detectable_format:*


@_register("detectable_format:number_bullet_lists", "num_bullets")
def _number_bullet_lists(response, kwargs, prompt):
  # Lines starting with "*" + a non-"*" character, or with "-". Quirks: a "---" rule and a
  # line starting "*italic*" count as bullets; "+" and "1." bullets do not; "**bold**"
  # lines do not.
  stars = re.findall(r"^\s*\*[^\*].*$", response, flags=re.MULTILINE)
  dashes = re.findall(r"^\s*-.*$", response, flags=re.MULTILINE)
  return len(stars) + len(dashes) == _count(kwargs, "num_bullets")


@_register("detectable_format:constrained_response")
def _constrained_response(response, kwargs, prompt):
  # Quirk: an option anywhere in the text suffices ("I'd say: My answer is no. Because...").
  return any(option in response.strip() for option in _CONSTRAINED_OPTIONS)


@_register("detectable_format:number_highlighted_sections", "num_highlights")
def _number_highlighted_sections(response, kwargs, prompt):
  # "*x*" and "**x**" spans on one line with some non-blank text. Quirk: "**x**" counts
  # once (its "**" halves are empty single spans), "*a* *b*" counts 2, but "*a*b*" 1.
  single = re.findall(r"\*[^\n\*]*\*", response)
  double = re.findall(r"\*\*[^\n\*]*\*\*", response)
  found = sum(1 for h in single if h.strip("*").strip())
  found += sum(1 for h in double if h.removeprefix("**").removesuffix("**").strip())
  return found >= _count(kwargs, "num_highlights")


@_register("detectable_format:multiple_sections", "section_spliter", "num_sections")
def _multiple_sections(response, kwargs, prompt):
  splitter = _stripped(kwargs, "section_spliter")
  # Quirks: "at least" num_sections (not exactly); the splitter is case-sensitive and
  # found anywhere followed by a number ("see Section 2 above" starts a section).
  pieces = re.split(r"\s?" + splitter + r"\s?\d+\s?", response)
  return len(pieces) - 1 >= _count(kwargs, "num_sections")


@_register("detectable_format:json_format")
def _json_format(response, kwargs, prompt):
  # One ``` fence (```json, ```Json, ```JSON or bare) may wrap it. Quirk: any JSON value
  # passes: "42", '"text"', "null", and Python's NaN/Infinity extensions.
  value = response.strip()
  for fence in ("```json", "```Json", "```JSON", "```"):
    value = value.removeprefix(fence)  # each in turn, as the official chain does
  value = value.removesuffix("```").strip()
  try:
    json.loads(value)
  except ValueError:
    return False
  return True


@_register("detectable_format:title")
def _title(response, kwargs, prompt):
  # "<<...>>" on one line with non-blank text inside; anywhere in the text.
  titles = re.findall(r"<<[^\n]+>>", response)
  return any(t.lstrip("<").rstrip(">").strip() for t in titles)


# ---- combination:*, startend:*, punctuation:*


@_register("combination:two_responses")
def _two_responses(response, kwargs, prompt):
  # Split on "******"; blank pieces allowed only first or last; exactly two non-blank
  # pieces that differ after strip. Quirk: "*******" (7) splits too, leaving a "*".
  pieces = response.split("******")
  valid = []
  for i, piece in enumerate(pieces):
    if piece.strip():
      valid.append(piece)
    elif i not in (0, len(pieces) - 1):
      return False
  return len(valid) == 2 and valid[0].strip() != valid[1].strip()


@_register("combination:repeat_prompt", "prompt_to_repeat")
def _repeat_prompt(response, kwargs, prompt):
  to_repeat = kwargs.get("prompt_to_repeat")
  if not to_repeat:  # official: ValueError("prompt_to_repeat must be set.")
    raise _Unreproducible("prompt_to_repeat")
  # Case-insensitive prefix after strip; whatever follows is not looked at.
  return response.strip().lower().startswith(to_repeat.strip().lower())


@_register("startend:end_checker", "end_phrase")
def _end_checker(response, kwargs, prompt):
  phrase = _stripped(kwargs, "end_phrase").lower()
  # Quirk: '"' is stripped from both ends of the response first (a quoted ending passes),
  # so a phrase that itself ends with '"' can never match.
  return response.strip().strip('"').lower().endswith(phrase)


@_register("startend:quotation")
def _quotation(response, kwargs, prompt):
  # Straight double quotes only (“curly” ones fail); '""' alone passes.
  value = response.strip()
  return len(value) > 1 and value[0] == '"' and value[-1] == '"'


@_register("punctuation:no_comma")
def _no_comma(response, kwargs, prompt):
  # Only the ASCII comma: "，" (fullwidth) and "،" (Arabic) pass.
  return "," not in response
