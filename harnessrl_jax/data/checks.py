"""Programmatic verifiers for criteria that carry `"check": {"type": NAME, ...args}`.

Each kind is a pure predicate `fn(response, args, prompt) -> bool` registered in `CHECKS`
with its argument spec. `validate_check` reports malformed args; `schema.Check` runs it once,
when the check is built (a malformed one raises `InvalidCheck`), so `run_check`, called for
every (criterion, response) cell, only evaluates the predicate. Shared conventions:
  * bounds `min`/`max` are inclusive; where a kind takes both as optional, at least one is
    required;
  * keywords and words match case-insensitively on word boundaries (no word character
    directly on either side) unless `case_sensitive: true`;
  * words, sentences and paragraphs are as defined in `text_units`.
The first block of kinds is the shared data contract; the second block adds the
verifiers the IFBench and IFEval importers need (see importers/ifbench.py, ifeval.py).
"""

from __future__ import annotations

import collections
import csv
import dataclasses
import functools
import inspect
import json
import re
import string
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, get_args, get_origin

from harnessrl_jax.data import text_units as tu
from harnessrl_jax.errors import HarnessError

if TYPE_CHECKING:  # schema imports this module to validate a Check when it is built
  from harnessrl_jax.data.schema import Check

Predicate = Callable[[str, Mapping[str, Any], str], bool]
Validator = Callable[[Mapping[str, Any]], list[str]]


class InvalidCheck(HarnessError):
  """A check whose kind is unknown or whose args are malformed; `problems` lists them all."""

  def __init__(self, kind: str, problems: list[str]):
    self.problems = tuple(problems)
    super().__init__(f"check {kind!r}: " + "; ".join(self.problems))


@dataclasses.dataclass(frozen=True)
class CheckSpec:
  """One check kind.

  Attributes:
    name: the `type` string used in data.
    fn: `fn(response, args, prompt) -> bool`; args are already validated.
    params: `{arg: (type, required)}`; type is int, float, str, bool, list[str] or list[int].
    doc: what the check verifies.
    bounds: whether at least one of the optional `min`/`max` must be given.
    extra: value-level validation beyond types (e.g. a regex that must compile).
  """

  name: str
  fn: Predicate
  params: Mapping[str, tuple[Any, bool]]
  doc: str
  bounds: bool = False
  extra: Validator | None = None


_REGISTRY: dict[str, CheckSpec] = {}
CHECKS: Mapping[str, CheckSpec] = MappingProxyType(_REGISTRY)

_INT_BOUNDS = {"min": (int, False), "max": (int, False)}
_FLOAT_BOUNDS = {"min": (float, False), "max": (float, False)}
_CASE = {"case_sensitive": (bool, False)}


def _register(name: str, params: Mapping[str, tuple[Any, bool]] | None = None, *,
              bounds: bool = False, extra: Validator | None = None):
  def wrap(fn: Predicate) -> Predicate:
    _REGISTRY[name] = CheckSpec(name, fn, MappingProxyType(dict(params or {})),
                                inspect.cleandoc(fn.__doc__ or ""), bounds, extra)
    return fn
  return wrap


# ---------------------------------------------------------------------------------------
# Validation.


def _type_name(t: Any) -> str:
  if get_origin(t) is list:
    return f"list[{_type_name(get_args(t)[0])}]"
  return t.__name__


def _value_type_name(v: Any) -> str:
  if v is None:
    return "null"
  if isinstance(v, (list, tuple)):
    inner = sorted({_value_type_name(x) for x in v})
    return f"list[{'|'.join(inner)}]" if inner else "list"
  if isinstance(v, Mapping):  # a JSON object, frozen or not
    return "dict"
  return type(v).__name__


def _type_ok(v: Any, t: Any) -> bool:
  if get_origin(t) is list:
    return isinstance(v, (list, tuple)) and all(_type_ok(x, get_args(t)[0]) for x in v)
  if t is bool:
    return isinstance(v, bool)
  if t is int:
    return isinstance(v, int) and not isinstance(v, bool)
  if t is float:
    return isinstance(v, (int, float)) and not isinstance(v, bool)
  return isinstance(v, t)


# `type` shadows the builtin because the shared contract names the parameter so.
def validate_check(type: str, args: Mapping[str, Any]) -> list[str]:  # pylint: disable=W0622
  """Problems with a check's kind and args; [] when it can run."""
  spec = CHECKS.get(type)
  if spec is None:
    return [f"unknown check type {type!r} (known: {', '.join(sorted(CHECKS))})"]
  problems = [f"unexpected arg {k!r}" for k in args if k not in spec.params]
  for name, (t, required) in spec.params.items():
    if name not in args:
      if required:
        problems.append(f"missing arg {name!r}")
    elif not _type_ok(args[name], t):
      problems.append(f"arg {name!r} must be {_type_name(t)}, got "
                      f"{_value_type_name(args[name])}")
  if spec.bounds and "min" not in args and "max" not in args:
    problems.append("give at least one of min/max")
  if problems:
    return problems
  if args.get("min") is not None and args.get("max") is not None and args["min"] > args["max"]:
    problems.append(f"min ({args['min']}) is greater than max ({args['max']})")
  if spec.extra is not None:
    problems.extend(spec.extra(args))
  return problems


def run_check(check: Check, response: str, *, prompt: str = "") -> bool:
  """Whether `response` passes `check`; `prompt` is the task's last user message.

  A blank response passes no check (as the official IFBench/IFEval evaluations rule): "at
  most 100 words" or "no commas" is not followed by saying nothing. No validation here:
  `check` was validated when it was built.
  """
  if not response.strip():
    return False
  return bool(CHECKS[check.type].fn(response, check.args, prompt))


def _nonempty(*names: str) -> Validator:
  """Each named arg, where given, must be a non-blank string or a non-empty list of them."""
  def validate(args):
    out = []
    for n in names:
      v = args.get(n)
      if v is None:
        continue
      if isinstance(v, str) and not v.strip():
        out.append(f"arg {n!r} must not be empty")
      elif isinstance(v, (list, tuple)) and (not v or any(
          isinstance(x, str) and not x.strip() for x in v)):
        out.append(f"arg {n!r} must be a non-empty list of non-empty items")
    return out
  return validate


def _at_least(lowest: int | float, *names: str) -> Validator:
  def validate(args):
    return [f"arg {n!r} must be >= {lowest}, got {args[n]}"
            for n in names if args.get(n) is not None and args[n] < lowest]
  return validate


def _all(*validators: Validator) -> Validator:
  def validate(args):
    return [p for v in validators for p in v(args)]
  return validate


def _within(value: float, args: Mapping[str, Any], default_min: float | None = None) -> bool:
  lo = args.get("min", default_min)
  hi = args.get("max")
  return (lo is None or value >= lo) and (hi is None or value <= hi)


def _count(pattern: re.Pattern, text: str) -> int:
  return sum(1 for _ in pattern.finditer(text))


def _fold(text: str, case_sensitive: bool) -> str:
  return text if case_sensitive else text.lower()


# ---------------------------------------------------------------------------------------
# The shared contract.


@_register("keyword_present", {"keywords": (list[str], True), "mode": (str, False), **_CASE},
           extra=_all(_nonempty("keywords"), lambda a: [] if a.get("mode", "all") in (
               "all", "any") else [f"arg 'mode' must be 'all' or 'any', got {a['mode']!r}"]))
def _keyword_present(response, args, prompt):
  """The keywords occur as whole words/phrases: all of them (mode "all") or any (mode "any")."""
  cs = args.get("case_sensitive", False)
  found = [bool(tu.keyword_regex(k, cs).search(response)) for k in args["keywords"]]
  return all(found) if args.get("mode", "all") == "all" else any(found)


@_register("keyword_count", {"keyword": (str, True), **_INT_BOUNDS, **_CASE}, bounds=True,
           extra=_nonempty("keyword"))
def _keyword_count(response, args, prompt):
  """The number of whole-word occurrences of `keyword` lies within min/max."""
  pattern = tu.keyword_regex(args["keyword"], args.get("case_sensitive", False))
  return _within(_count(pattern, response), args)


@_register("forbidden_words", {"words": (list[str], True), **_CASE}, extra=_nonempty("words"))
def _forbidden_words(response, args, prompt):
  """None of `words` occurs as a whole word/phrase."""
  cs = args.get("case_sensitive", False)
  return not any(tu.keyword_regex(w, cs).search(response) for w in args["words"])


@_register("word_count", _INT_BOUNDS, bounds=True)
def _word_count(response, args, prompt):
  """The number of words lies within min/max."""
  return _within(len(tu.words(response)), args)


@_register("sentence_count", _INT_BOUNDS, bounds=True)
def _sentence_count(response, args, prompt):
  """The number of sentences lies within min/max."""
  return _within(len(tu.sentences(response)), args)


@_register("paragraph_count", {**_INT_BOUNDS, "separator": (str, False)}, bounds=True,
           extra=_nonempty("separator"))
def _paragraph_count(response, args, prompt):
  """The number of blank-line-separated paragraphs lies within min/max.

  With `separator` (e.g. "***"), paragraphs are the non-blank pieces between lines that
  hold only the separator (surrounding spaces allowed) instead.
  """
  if "separator" not in args:
    return _within(len(tu.paragraphs(response)), args)
  line = re.compile(r"^[ \t]*" + re.escape(args["separator"]) + r"[ \t]*$", re.M)
  return _within(sum(1 for p in line.split(response) if p.strip()), args)


@_register("char_count", _INT_BOUNDS, bounds=True)
def _char_count(response, args, prompt):
  """The number of characters (surrounding whitespace excluded) lies within min/max."""
  return _within(len(response.strip()), args)


_BULLET_RE = re.compile(r"^[ \t]*[-*][ \t]+\S", re.M)
_NUMBERED_RE = re.compile(r"^[ \t]*\d+[.)][ \t]+\S", re.M)
_HEADING_RE = re.compile(r"^[ \t]{0,3}#+[ \t]+\S", re.M)


@_register("bullet_list", _INT_BOUNDS, bounds=True)
def _bullet_list(response, args, prompt):
  """The number of lines starting with "- " or "* " (after optional indent) lies within min/max."""
  return _within(_count(_BULLET_RE, response), args)


@_register("numbered_list", _INT_BOUNDS, bounds=True)
def _numbered_list(response, args, prompt):
  """The number of lines starting with "1." / "2)" etc. lies within min/max."""
  return _within(_count(_NUMBERED_RE, response), args)


@_register("markdown_headings", _INT_BOUNDS, bounds=True)
def _markdown_headings(response, args, prompt):
  """The number of lines starting with one or more "#" then a space lies within min/max."""
  return _within(_count(_HEADING_RE, response), args)


@_register("sections", {"marker": (str, True), "min": (int, True), "max": (int, False)},
           extra=_nonempty("marker"))
def _sections(response, args, prompt):
  """At least `min` (and at most `max`, where given) lines start with `marker` and a number
  ("Section 1", "## SECTION 2: ...").

  Markdown decoration (#, *, _, >) before the marker is allowed; case-insensitive.
  """
  pattern = re.compile(r"^[\s#*_>]*" + re.escape(args["marker"]) + r"[ \t]+\d+\b",
                       re.M | re.I)
  return _within(_count(pattern, response), args)


_HIGHLIGHT_RE = re.compile(r"\*(?![\s*])[^\n*]+?(?<![\s*])\*")


@_register("highlighted_sections", {"min": (int, True)})
def _highlighted_sections(response, args, prompt):
  """At least `min` *highlighted* spans (markdown italics or bold, on one line)."""
  return _count(_HIGHLIGHT_RE, response) >= args["min"]


_FENCE_RE = re.compile(r"```[\w-]*[ \t]*\n?(.*?)\n?[ \t]*```", re.S)


def _unfence(text: str) -> str:
  """The body of a whole-response ``` fence (any language tag), else the stripped text."""
  text = text.strip()
  m = _FENCE_RE.fullmatch(text)
  return m.group(1).strip() if m else text


@_register("json_format")
def _json_format(response, args, prompt):
  """The whole response is valid JSON; a ```json fence around it is allowed."""
  try:
    json.loads(_unfence(response))
  except ValueError:
    return False
  return True


@_register("starts_with", {"prefix": (str, True), **_CASE}, extra=_nonempty("prefix"))
def _starts_with(response, args, prompt):
  """The response, leading whitespace ignored, starts with `prefix`."""
  cs = args.get("case_sensitive", False)
  return _fold(response.lstrip(), cs).startswith(_fold(args["prefix"], cs))


@_register("ends_with", {"suffix": (str, True), **_CASE}, extra=_nonempty("suffix"))
def _ends_with(response, args, prompt):
  """The response, trailing whitespace ignored, ends with `suffix`."""
  cs = args.get("case_sensitive", False)
  return _fold(response.rstrip(), cs).endswith(_fold(args["suffix"], cs))


@_register("first_word", {"word": (str, True), **_CASE}, extra=_nonempty("word"))
def _first_word(response, args, prompt):
  """The first word is `word`."""
  ws = tu.words(response)
  cs = args.get("case_sensitive", False)
  return bool(ws) and _fold(ws[0], cs) == _fold(args["word"].strip(), cs)


@_register("all_lowercase")
def _all_lowercase(response, args, prompt):
  """There is at least one letter and no uppercase letter."""
  return response.islower()


@_register("all_uppercase")
def _all_uppercase(response, args, prompt):
  """There is at least one letter and no lowercase letter."""
  return response.isupper()


def _is_capital_word(word: str) -> bool:
  letters = [c for c in word if c.isalpha()]
  return len(letters) >= 2 and all(c.isupper() for c in letters)


@_register("capital_words", _INT_BOUNDS, bounds=True)
def _capital_words(response, args, prompt):
  """The number of ALL-CAPS words with 2+ letters lies within min/max."""
  return _within(sum(_is_capital_word(w) for w in tu.words(response)), args)


_PLACEHOLDER_RE = re.compile(r"\[[^\[\]\n]*\S[^\[\]\n]*\](?!\()")


@_register("placeholders", {"min": (int, True)})
def _placeholders(response, args, prompt):
  """At least `min` square-bracket placeholders like [name] (markdown links excluded)."""
  return _count(_PLACEHOLDER_RE, response) >= args["min"]


@_register("quotation_wrapped")
def _quotation_wrapped(response, args, prompt):
  """The whole response is wrapped in double quotes ("..." or \u201c...\u201d)."""
  s = response.strip()
  return len(s) >= 2 and ((s[0] == s[-1] == '"') or (s[0] == "\u201c" and s[-1] == "\u201d"))


def _squash(text: str) -> str:
  return " ".join(text.split())


@_register("repeat_prompt", {"text": (str, False)}, extra=_nonempty("text"))
def _repeat_prompt(response, args, prompt):
  """The response begins with the task's user prompt verbatim (runs of whitespace collapse);
  with `text`, with that text instead (the request without the instruction to repeat it).

  False when no prompt is given.
  """
  p = _squash(args.get("text", prompt))
  return bool(p) and _squash(response).startswith(p)


@_register("length_ratio", _FLOAT_BOUNDS, bounds=True)
def _length_ratio(response, args, prompt):
  """len(response) / len(prompt), in characters after stripping, lies within min/max.

  Counts characters, not words, so it is language-independent; false without a prompt.
  """
  p = len(prompt.strip())
  return p > 0 and _within(len(response.strip()) / p, args)


@_register("no_commas")
def _no_commas(response, args, prompt):
  """No comma, ASCII or fullwidth (\uff0c)."""
  return "," not in response and "\uff0c" not in response


@_register("title")
def _title(response, args, prompt):
  """A title wrapped in double angular brackets, <<like this>>, on one line."""
  return re.search(r"<<[^\n<>]*\S[^\n<>]*>>", response) is not None


@_register("postscript", {"marker": (str, False)}, extra=_nonempty("marker"))
def _postscript(response, args, prompt):
  """A line (typically the last paragraph) starts with `marker` (default "P.S."), any case."""
  marker = args.get("marker", "P.S.")
  return re.search(r"^[ \t*_]*" + re.escape(marker), response, re.M | re.I) is not None


@_register("letter_frequency", {"letter": (str, True), **_INT_BOUNDS, **_CASE}, bounds=True,
           extra=lambda a: [] if len(a["letter"]) == 1 else [
               f"arg 'letter' must be one character, got {a['letter']!r}"])
def _letter_frequency(response, args, prompt):
  """The number of occurrences of `letter` lies within min/max."""
  cs = args.get("case_sensitive", False)
  return _within(_fold(response, cs).count(_fold(args["letter"], cs)), args)


@_register("two_responses", {"separator": (str, False)}, extra=_nonempty("separator"))
def _two_responses(response, args, prompt):
  """Exactly two different non-empty responses separated by `separator` (default "******")."""
  parts = [p.strip() for p in response.split(args.get("separator", "******"))]
  return len(parts) == 2 and all(parts) and parts[0] != parts[1]


@_register("question_count", _INT_BOUNDS, bounds=True)
def _question_count(response, args, prompt):
  """The number of sentences ending with "?" lies within min/max."""
  return _within(sum(tu.terminal_mark(s) == "?" for s in tu.sentences(response)), args)


@_register("digit_count", _INT_BOUNDS, bounds=True)
def _digit_count(response, args, prompt):
  """The number of digit characters lies within min/max."""
  return _within(len(re.findall(r"\d", response)), args)


def _regex_problems(args):
  try:
    re.compile(args["pattern"])
  except re.error as e:
    return [f"arg 'pattern' is not a valid regex: {e}"]
  if "min" not in args and args.get("max", 1) < 1:
    return [f"max ({args['max']}) is below the default min 1; give min: 0 to require that "
            "nothing matches"]
  return []


@_register("regex_match", {"pattern": (str, True), **_INT_BOUNDS}, extra=_regex_problems)
def _regex_match(response, args, prompt):
  """The number of non-overlapping matches of `pattern` lies within min (default 1)/max.

  Python `re` syntax with re.MULTILINE, so ^ and $ anchor at line boundaries.
  """
  return _within(_count(re.compile(args["pattern"], re.M), response), args, default_min=1)


@_register("language_english")
def _language_english(response, args, prompt):
  """Heuristic English test: >= 90% of letters are ASCII and, for 8+ words, >= 15% of the
  words are common English stop words (non-English Latin-script text has almost none)."""
  letters = [c for c in response if c.isalpha()]
  if not letters or sum(c.isascii() for c in letters) < 0.9 * len(letters):
    return False
  ws = [w.lower() for w in tu.words(response)]
  return len(ws) < 8 or sum(w in tu.STOP_WORDS for w in ws) >= 0.15 * len(ws)


# ---------------------------------------------------------------------------------------
# Further kinds, each named after what it verifies (used by the IFBench and IFEval importers).

# langdetect's language profiles (its ISO 639-1 codes, Chinese split in two).
LANGDETECT_CODES = frozenset("""af ar bg bn ca cs cy da de el en es et fa fi fr gu he hi hr hu id
it ja kn ko lt lv mk ml mr ne nl no pa pl pt ro ru sk sl so sq sv sw ta te th tl tr uk ur vi
zh-cn zh-tw""".split())


@functools.cache
def _language_factory() -> Any:
  """A private langdetect factory with seed 0: the same verdict every run, and the global
  factory other code may use is left alone (as eval/ifverify/official_ifeval.py does)."""
  from langdetect import detector_factory  # pylint: disable=g-import-not-at-top
  factory = detector_factory.DetectorFactory()
  factory.load_profile(detector_factory.PROFILES_DIRECTORY)
  factory.seed = 0
  return factory


def _language_problems(args):
  out = []
  if args["code"] not in LANGDETECT_CODES:
    out.append(f"arg 'code' must be a langdetect language code "
               f"({', '.join(sorted(LANGDETECT_CODES))}), got {args['code']!r}")
  if args.get("case", "upper") not in ("upper", "lower"):
    out.append(f"arg 'case' must be 'upper' or 'lower', got {args['case']!r}")
  return out


@_register("language", {"code": (str, True), "case": (str, False)}, extra=_language_problems)
def _language(response, args, prompt):
  """langdetect (seeded) reads the response as language `code`; text it cannot read (no
  letters) fails. With `case` "upper" or "lower", every letter is also in that case (at
  least one letter)."""
  from langdetect import LangDetectException  # pylint: disable=g-import-not-at-top
  case = args.get("case")
  if case is not None and not (response.isupper() if case == "upper" else response.islower()):
    return False
  detector = _language_factory().create()
  detector.append(response)
  try:
    return detector.detect() == args["code"]
  except LangDetectException:
    return False


@_register("nth_paragraph_first_word", {"paragraphs": (int, True), "n": (int, True),
                                        "word": (str, True), **_CASE},
           extra=_all(_nonempty("word"), _at_least(1, "paragraphs", "n"),
                      lambda a: [] if a["n"] <= a["paragraphs"] else [
                          f"arg 'n' ({a['n']}) is greater than 'paragraphs' "
                          f"({a['paragraphs']})"]))
def _nth_paragraph_first_word(response, args, prompt):
  """Exactly `paragraphs` blank-line-separated paragraphs, and the first word of the `n`-th
  (1-based) is `word` (Markdown around it, such as "**", does not count)."""
  ps = tu.paragraphs(response)
  if len(ps) != args["paragraphs"]:
    return False
  ws = tu.words(ps[args["n"] - 1])
  cs = args.get("case_sensitive", False)
  return bool(ws) and _fold(ws[0], cs) == _fold(args["word"].strip(), cs)




def _same_length(a: str, b: str) -> Validator:
  return lambda args: [] if len(args[a]) == len(args[b]) else [
      f"args {a!r} and {b!r} must have the same length ({len(args[a])} vs {len(args[b])})"]


@_register("keyword_counts", {"keywords": (list[str], True), "counts": (list[int], True),
                              **_CASE},
           extra=_all(_nonempty("keywords"), _same_length("keywords", "counts")))
def _keyword_counts(response, args, prompt):
  """Each `keywords[i]` occurs exactly `counts[i]` times as a whole word."""
  cs = args.get("case_sensitive", False)
  return all(_count(tu.keyword_regex(k, cs), response) == n
             for k, n in zip(args["keywords"], args["counts"]))


_NUMBER_RE = re.compile(r"\d+(?:[.,]\d+)*")


@_register("number_count", _INT_BOUNDS, bounds=True)
def _number_count(response, args, prompt):
  """The number of numbers written with digits lies within min/max ("1,000.5" is one)."""
  return _within(_count(_NUMBER_RE, response), args)


@_register("pronoun_count", _INT_BOUNDS, bounds=True)
def _pronoun_count(response, args, prompt):
  """The number of English pronoun tokens (personal, possessive, reflexive, demonstrative,
  interrogative, indefinite) lies within min/max."""
  return _within(sum(w.lower() in tu.PRONOUNS for w in tu.words(response)), args)


@_register("punctuation_cover")
def _punctuation_cover(response, args, prompt):
  """An interrobang (?!, !? or \u203d) and, besides it, each of . , ? ! ; : at least once."""
  if "\u203d" in response:
    rest = response.replace("\u203d", "", 1)
  else:
    m = re.search(r"\?!|!\?", response)
    if m is None:
      return False
    rest = response[:m.start()] + response[m.end():]
  return all(mark in rest for mark in ".,?!;:")


@_register("unique_word_count", _INT_BOUNDS, bounds=True)
def _unique_word_count(response, args, prompt):
  """The number of distinct words, case-folded, lies within min/max."""
  return _within(len({w.lower() for w in tu.words(response)}), args)


@_register("csv_table", {"columns": (list[str], True), "rows": (int, True),
                         "delimiter": (str, False), "quoted_special": (bool, False),
                         "all_quoted": (bool, False)},
           extra=_all(_nonempty("columns"), _at_least(1, "rows"),
                      lambda a: [] if len(a.get("delimiter", ",")) == 1 else [
                          "arg 'delimiter' must be one character"]))
def _csv_table(response, args, prompt):
  """CSV with exactly the header `columns`, `rows` data rows of as many fields each (blank
  lines and a ``` fence ignored; `delimiter` defaults to ","); with `quoted_special`, at
  least one data field is enclosed in double quotes and contains a character other than
  letters, digits and spaces; with `all_quoted`, every field, header included, is enclosed
  in double quotes."""
  delim = args.get("delimiter", ",")
  lines = tu.nonblank_lines(_unfence(response))
  table = list(csv.reader(lines, delimiter=delim, skipinitialspace=True))
  width = len(args["columns"])
  if not table or [c.strip() for c in table[0]] != [c.strip() for c in args["columns"]]:
    return False
  if len(table) - 1 != args["rows"] or any(len(row) != width for row in table[1:]):
    return False
  field = r'[ \t]*"((?:[^"]|"")*)"[ \t]*'
  if args.get("all_quoted", False):
    row = re.compile(field + "(?:" + re.escape(delim) + field + ")*")
    if not all(row.fullmatch(line) for line in lines):
      return False
  if args.get("quoted_special", False):
    quoted = re.compile("(?:^|" + re.escape(delim) + ")" + field)
    return any(re.search(r"[^\w\s]", m.group(1).replace('""', '"'))
               for line in lines[1:] for m in quoted.finditer(line))
  return True


@_register("number_sequence", {"numbers": (list[int], True)},
           extra=lambda a: [] if all(n >= 0 for n in a["numbers"]) else [
               "arg 'numbers' must hold non-negative integers"])
def _number_sequence(response, args, prompt):
  """The digit runs of the response, read as integers in order, are exactly `numbers`."""
  return [int(n) for n in re.findall(r"\d+", response)] == list(args["numbers"])


@_register("sentence_initials", {"letters": (str, True)}, extra=_nonempty("letters"))
def _sentence_initials(response, args, prompt):
  """Exactly len(letters) sentences; sentence i starts (after punctuation) with letters[i],
  any case."""
  ss = tu.sentences(response)
  if len(ss) != len(args["letters"]):
    return False
  for s, letter in zip(ss, args["letters"]):
    core = s.lstrip(string.punctuation + string.whitespace + "\u201c\u2018")
    if not core or core[0].lower() != letter.lower():
      return False
  return True


@_register("emoji_sentence_end")
def _emoji_sentence_end(response, args, prompt):
  """Every sentence ends with an emoji, placed before or right after its final punctuation."""
  ss = tu.sentences(tu.strip_emoji_modifiers(response))
  if not ss:
    return False
  for i, s in enumerate(ss):
    core = s.rstrip(".!?\u2026" + tu.SENTENCE_CLOSERS + string.whitespace)
    if core and tu.is_emoji(core[-1]):
      continue
    # "Sentence. \U0001F600 Next": the splitter hands the emoji to the next sentence.
    if i + 1 < len(ss) and tu.is_emoji(ss[i + 1][0]):
      continue
    return False
  return True


def _indent(line: str) -> int:
  return len(line) - len(line.lstrip())


@_register("indent_stairs")
def _indent_stairs(response, args, prompt):
  """Two or more non-blank lines, each indented further than the previous (tabs = 4)."""
  lines = tu.nonblank_lines(response.expandtabs(4))
  return len(lines) >= 2 and all(_indent(a) < _indent(b) for a, b in zip(lines, lines[1:]))


@_register("marker_list", {"marker": (str, True), **_INT_BOUNDS}, bounds=True,
           extra=_nonempty("marker"))
def _marker_list(response, args, prompt):
  """The number of lines that start (after indent) with `marker` followed by text lies
  within min/max: a list whose bullets are a custom marker."""
  marker = args["marker"].strip()
  n = sum(1 for line in response.splitlines()
          if line.lstrip().startswith(marker) and line.lstrip()[len(marker):].strip())
  return _within(n, args)


@_register("one_word_per_line")
def _one_word_per_line(response, args, prompt):
  """Every line holds at most one word (tokens without letters or digits don't count), and
  there is at least one word."""
  counts = [sum(any(c.isalnum() for c in tok) for tok in line.split())
            for line in response.splitlines()]
  return sum(counts) > 0 and max(counts) <= 1


_STAR_BULLET_RE = re.compile(r"^\s*\*[ \t]+\S")
_DASH_BULLET_RE = re.compile(r"^\s*-[ \t]+\S")


@_register("prose_then_bullets", {"min_sentences": (int, True), "min_bullets": (int, True)},
           extra=_at_least(0, "min_sentences", "min_bullets"))
def _prose_then_bullets(response, args, prompt):
  """Prose with at least `min_sentences` sentences ending in a period, followed by at least
  `min_bullets` "* " bullet lines; after the first bullet only bullets (or their indented
  continuation lines) follow."""
  lines = response.splitlines()
  first = next((i for i, line in enumerate(lines) if _STAR_BULLET_RE.match(line)), None)
  if first is None:
    return False
  prose = tu.sentences("\n".join(lines[:first]))
  if sum(tu.terminal_mark(s) == "." for s in prose) < args["min_sentences"]:
    return False
  tail = [line for line in lines[first:] if line.strip()]
  if any(not _STAR_BULLET_RE.match(line) and not line[:1].isspace() for line in tail):
    return False
  return sum(bool(_STAR_BULLET_RE.match(line)) for line in tail) >= args["min_bullets"]


def _option_key(text: str) -> str:
  return " ".join(text.strip(string.punctuation + string.whitespace).lower().split())


@_register("one_of", {"options": (list[str], True)},
           extra=lambda a: [] if a["options"] and all(_option_key(o) for o in a["options"])
           else ["arg 'options' must be a non-empty list of options with letters or digits"])
def _one_of(response, args, prompt):
  """The whole response is one of `options` and nothing else (case, whitespace and
  surrounding punctuation ignored, so "C)", "c" and "(c)" all match "c)")."""
  return _option_key(response) in {_option_key(o) for o in args["options"]}


@_register("template_labels", {"labels": (list[str], True)}, extra=_nonempty("labels"))
def _template_labels(response, args, prompt):
  """The response fills a template: it starts with labels[0] (markdown emphasis or heading
  marks allowed before it), every label appears in order (case-sensitive), and each is
  followed by content before the next label that is neither blank nor a leftover
  [placeholder]."""
  pos, spans = 0, []
  for label in args["labels"]:
    at = response.find(label, pos)
    if at < 0:
      return False
    spans.append((at, at + len(label)))
    pos = at + len(label)
  if response[:spans[0][0]].strip(string.whitespace + "*_#>"):
    return False
  ends = [s for s, _ in spans[1:]] + [len(response)]
  for (_, end), nxt in zip(spans, ends):
    content = response[end:nxt].strip(string.whitespace + "*_#>")
    if not content or re.fullmatch(r"\[[^\]]*\]", content):
      return False
  return True


@_register("quotes_explained")
def _quotes_explained(response, args, prompt):
  """Every double-quoted phrase is followed by unquoted text with letters or digits before
  the next quote or the end (vacuously true without quotes)."""
  text = response.replace("\u201c", '"').replace("\u201d", '"')
  spans = list(re.finditer(r'"[^"]*"', text))
  for m, nxt in zip(spans, spans[1:] + [None]):
    after = text[m.end():nxt.start() if nxt else len(text)]
    if not any(c.isalnum() for c in after):
      return False
  return True


def _quote_marks(text: str):
  """Yields the double (") and single (') quote marks of `text`; apostrophes inside words
  (don't) are skipped and curly quotes are mapped to straight ones."""
  text = (text.replace("\u201c", '"').replace("\u201d", '"')
          .replace("\u2018", "'").replace("\u2019", "'"))
  for i, c in enumerate(text):
    if c == "'" and 0 < i < len(text) - 1 and text[i - 1].isalnum() and text[i + 1].isalnum():
      continue
    if c in "\"'":
      yield c


@_register("nested_quotes", {"min_depth": (int, True)}, extra=_at_least(1, "min_depth"))
def _nested_quotes(response, args, prompt):
  """Quotes nested at least `min_depth` levels deep, alternating double and single quotes
  ("a 'b "c" b' a"), all closed."""
  stack: list[list] = []  # [mark, deepest level reached inside]
  for mark in _quote_marks(response):
    if stack and stack[-1][0] == mark:
      _, deepest = stack.pop()
      if deepest - len(stack) >= args["min_depth"]:
        return True
      if stack:
        stack[-1][1] = max(stack[-1][1], deepest)
    else:
      stack.append([mark, len(stack) + 1])
  return False


@_register("sub_bullets")
def _sub_bullets(response, args, prompt):
  """At least one "* " bullet, and every "* " bullet is followed by at least one "- "
  sub-bullet before the next "* " bullet."""
  seen_bullet, needs_sub = False, False
  for line in response.splitlines():
    if _STAR_BULLET_RE.match(line):
      if needs_sub:
        return False
      seen_bullet, needs_sub = True, True
    elif _DASH_BULLET_RE.match(line):
      needs_sub = False
  return seen_bullet and not needs_sub


_SECTION_HEADING_RE = re.compile(r"^\s{0,3}(?:#+\s|<h[1-6][\s>])|^\s*\*\*[^*\n]+\*\*:?\s*$",
                                 re.I)
_THESIS_RE = re.compile(r"<(i|em)>(.*?)</\1>(.*)", re.S | re.I)


@_register("html_italic_thesis")
def _html_italic_thesis(response, args, prompt):
  """Every section (text between headings: markdown #, HTML <hN> or a bold-only line; the
  whole response when there are none) begins with a non-empty <i>/<em> thesis followed by
  more text."""
  sections, current = [], []
  for line in response.splitlines():
    if _SECTION_HEADING_RE.match(line):
      sections.append(current)
      current = []
    else:
      current.append(line)
  sections.append(current)
  bodies = ["\n".join(s).strip() for s in sections if "\n".join(s).strip()]
  if not bodies:
    return False
  for body in bodies:
    m = _THESIS_RE.match(body)
    if m is None or not m.group(2).strip() or not m.group(3).strip():
      return False
  return True


# Words title case leaves in lower case: articles, coordinating conjunctions and short
# prepositions.
_MINOR_WORDS = frozenset(
    "a an the and but or nor for so yet as at by in of off on per to up via vs from into "
    "onto with over".split())


@_register("title_case")
def _title_case(response, args, prompt):
  """Title case: every word starting with a letter starts with a capital, except minor words
  (articles, short conjunctions and prepositions) that are not the first word."""
  ws = [w for w in tu.words(response) if w[0].isalpha()]
  if not ws:
    return False
  return all(not w[0].islower() or (i > 0 and w.lower() in _MINOR_WORDS)
             for i, w in enumerate(ws))


def _trigrams(text: str) -> set[tuple[str, str, str]]:
  ws = [w.lower() for w in tu.words(text)]
  return set(zip(ws, ws[1:], ws[2:]))


@_register("trigram_overlap", {"reference": (str, True), **_FLOAT_BOUNDS}, bounds=True,
           extra=_nonempty("reference"))
def _trigram_overlap(response, args, prompt):
  """The percentage of the response's distinct word trigrams (case-folded) that also occur
  in `reference` lies within min/max (percent, 0-100)."""
  ours = _trigrams(response)
  return bool(ours) and _within(100.0 * len(ours & _trigrams(args["reference"])) / len(ours),
                                args)


_SENTENCE_TYPES = {"declarative": ".", "interrogative": "?", "exclamatory": "!"}


@_register("sentence_type_ratio", {"declarative": (int, True), "interrogative": (int, True),
                                   "exclamatory": (int, False)},
           extra=_all(_at_least(0, *_SENTENCE_TYPES), lambda a: [] if any(
               a.get(k, 0) > 0 for k in _SENTENCE_TYPES) else ["give a positive weight"]))
def _sentence_type_ratio(response, args, prompt):
  """The counts of the given sentence types (declarative ".", interrogative "?",
  exclamatory "!") are in the given integer ratio, with at least one such sentence; a type
  left out is unconstrained."""
  marks = collections.Counter(tu.terminal_mark(s) for s in tu.sentences(response))
  given = {k: args[k] for k in _SENTENCE_TYPES if k in args}
  counts = {k: marks[_SENTENCE_TYPES[k]] for k in given}
  if sum(counts.values()) == 0:
    return False
  return all(counts[a] * given[b] == counts[b] * given[a] for a in given for b in given)


@_register("same_length_sentences", {"count": (int, True)}, extra=_at_least(1, "count"))
def _same_length_sentences(response, args, prompt):
  """Exactly `count` sentences, all with the same number of characters, and no word used
  twice in the response (case-folded)."""
  ss = tu.sentences(response)
  ws = [w.lower() for w in tu.words(response)]
  return (len(ss) == args["count"] and len({len(s) for s in ss}) == 1
          and len(ws) == len(set(ws)))


@_register("stop_word_ratio", _FLOAT_BOUNDS, bounds=True)
def _stop_word_ratio(response, args, prompt):
  """The percentage of words that are English stop words lies within min/max (0-100)."""
  ws = [w.lower() for w in tu.words(response)]
  return bool(ws) and _within(100.0 * sum(w in tu.STOP_WORDS for w in ws) / len(ws), args)


@_register("exact_response", {"text": (str, True), **_CASE}, extra=_nonempty("text"))
def _exact_response(response, args, prompt):
  """The response is exactly `text` (runs of whitespace collapse; any case by default)."""
  cs = args.get("case_sensitive", False)
  return _fold(_squash(response), cs) == _fold(_squash(args["text"]), cs)


@_register("keyword_in_sentence", {"keyword": (str, True), "n": (int, True), **_CASE},
           extra=_all(_nonempty("keyword"), _at_least(1, "n")))
def _keyword_in_sentence(response, args, prompt):
  """The `n`-th sentence (1-based) contains `keyword` as a whole word."""
  ss = tu.sentences(response)
  pattern = tu.keyword_regex(args["keyword"], args.get("case_sensitive", False))
  return len(ss) >= args["n"] and pattern.search(ss[args["n"] - 1]) is not None


@_register("alphabet_chain")
def _alphabet_chain(response, args, prompt):
  """Each word starts with the letter after the previous word's first letter, Z wrapping to
  A; every word starts with an ASCII letter."""
  firsts = [w[0].lower() for w in tu.words(response)]
  if not firsts or any(not ("a" <= c <= "z") for c in firsts):
    return False
  return all((ord(b) - ord(a)) % 26 == 1 for a, b in zip(firsts, firsts[1:]))


@_register("no_consecutive_first_letter")
def _no_consecutive_first_letter(response, args, prompt):
  """No two consecutive words share their first letter (case-folded); at least one word."""
  firsts = [w[0].lower() for w in tu.words(response)]
  return bool(firsts) and all(a != b for a, b in zip(firsts, firsts[1:]))


@_register("alternating_syllable_parity")
def _alternating_syllable_parity(response, args, prompt):
  """Consecutive words alternate between odd and even syllable counts (heuristic syllable
  counter, see text_units.count_syllables); at least two words."""
  parities = [tu.count_syllables(w) % 2 for w in tu.words(response)
              if tu.count_syllables(w) > 0]
  return len(parities) >= 2 and all(a != b for a, b in zip(parities, parities[1:]))


@_register("paragraph_same_first_last")
def _paragraph_same_first_last(response, args, prompt):
  """Every non-blank line (a paragraph, as the instruction separates them with a newline)
  ends with the word it starts with (case-folded); at least one such line."""
  lines = [[w.lower() for w in tu.words(line)] for line in tu.nonblank_lines(response)]
  lines = [ws for ws in lines if ws]
  return bool(lines) and all(ws[0] == ws[-1] for ws in lines)


def _is_prime(n: int) -> bool:
  return n >= 2 and all(n % d for d in range(2, int(n ** 0.5) + 1))


@_register("prime_word_lengths")
def _prime_word_lengths(response, args, prompt):
  """Every whitespace-separated word, counting only its letters and digits, has a prime
  length; at least one word."""
  lengths = [sum(c.isalnum() for c in tok) for tok in response.split()]
  lengths = [n for n in lengths if n]
  return bool(lengths) and all(_is_prime(n) for n in lengths)


@_register("max_word_repeats", {"max": (int, True)}, extra=_at_least(1, "max"))
def _max_word_repeats(response, args, prompt):
  """No word (case-folded) occurs more than `max` times."""
  counts = collections.Counter(w.lower() for w in tu.words(response))
  return max(counts.values(), default=0) <= args["max"]


@_register("vowel_types", {"max": (int, True)}, extra=_at_least(0, "max"))
def _vowel_types(response, args, prompt):
  """A single paragraph (one non-blank line) whose letters use at most `max` of the vowels
  a, e, i, o, u."""
  if len(tu.nonblank_lines(response)) != 1:
    return False
  return len(set(response.lower()) & set("aeiou")) <= args["max"]


@_register("word_positions", {"word": (str, True), "positions": (list[int], True), **_CASE},
           extra=_all(_nonempty("word", "positions"), lambda a: [] if 0 not in a["positions"]
                      else ["arg 'positions' are 1-based (negative counts from the end); "
                            "0 is not a position"]))
def _word_positions(response, args, prompt):
  """The word at each of `positions` (1-based; -1 is the last word, -2 the second to last)
  is `word`."""
  ws = tu.words(response)
  cs = args.get("case_sensitive", False)
  target = _fold(args["word"].strip(), cs)
  for p in args["positions"]:
    i = p - 1 if p > 0 else len(ws) + p
    if not 0 <= i < len(ws) or _fold(ws[i], cs) != target:
      return False
  return True



@_register("distinct_keywords", {"keywords": (list[str], True), **_INT_BOUNDS, **_CASE},
           bounds=True, extra=_nonempty("keywords"))
def _distinct_keywords(response, args, prompt):
  """The number of different `keywords` that occur as whole words lies within min/max."""
  cs = args.get("case_sensitive", False)
  return _within(sum(tu.keyword_regex(k, cs).search(response) is not None
                     for k in set(args["keywords"])), args)


_CONSONANT_PAIR_RE = re.compile(r"[bcdfghjklmnpqrstvwxz]{2}")


@_register("consonant_cluster_words")
def _consonant_cluster_words(response, args, prompt):
  """Every word has two or more consonant letters in a row (y counts as a vowel); at least
  one word."""
  ws = [w.lower() for w in tu.words(response) if any(c.isalpha() for c in w)]
  return bool(ws) and all(_CONSONANT_PAIR_RE.search(w) for w in ws)


def _longest_alliteration(sentence: str) -> int:
  """Length of the longest run of consecutive words sharing a first letter; 0 below 2."""
  firsts = [w[0].lower() for w in tu.words(sentence) if w[0].isalpha()]
  best = run = 1 if firsts else 0
  for a, b in zip(firsts, firsts[1:]):
    run = run + 1 if a == b else 1
    best = max(best, run)
  return best if best >= 2 else 0


@_register("alliteration_increment")
def _alliteration_increment(response, args, prompt):
  """Two or more sentences, each with a longer run of consecutive alliterative words (same
  first letter) than the previous sentence."""
  runs = [_longest_alliteration(s) for s in tu.sentences(response)]
  return len(runs) >= 2 and all(a < b for a, b in zip(runs, runs[1:]))


@_register("palindrome_words", {"min": (int, True), "min_length": (int, True)},
           extra=_at_least(1, "min", "min_length"))
def _palindrome_words(response, args, prompt):
  """At least `min` different single-word palindromes of `min_length`+ letters (case and
  punctuation ignored)."""
  found = set()
  for w in tu.words(response):
    core = "".join(c for c in w.lower() if c.isalnum())
    if len(core) >= args["min_length"] and core == core[::-1]:
      found.add(core)
  return len(found) >= args["min"]


_CLOSING = {")": "(", "]": "[", "}": "{"}


@_register("nested_brackets", {"min_depth": (int, True)}, extra=_at_least(1, "min_depth"))
def _nested_brackets(response, args, prompt):
  """Brackets ( [ { nested at least `min_depth` levels deep, each closed by its matching
  bracket; a mismatched closer breaks the nesting."""
  stack: list[list] = []  # [opener, deepest level reached inside]
  for c in response:
    if c in "([{":
      stack.append([c, len(stack) + 1])
    elif c in _CLOSING:
      if not stack or stack[-1][0] != _CLOSING[c]:
        stack = []
        continue
      _, deepest = stack.pop()
      if deepest - len(stack) >= args["min_depth"]:
        return True
      if stack:
        stack[-1][1] = max(stack[-1][1], deepest)
  return False


_JAPANESE_RE = re.compile("[\u3040-\u30ff\u4e00-\u9fff]")


@_register("japanese_every_nth_word", {"n": (int, True)}, extra=_at_least(1, "n"))
def _japanese_every_nth_word(response, args, prompt):
  """Every `n`-th whitespace-separated word (n, 2n, ...; bare numbers skipped) contains
  Japanese script (hiragana, katakana or kanji); at least n words."""
  toks = response.split()
  if len(toks) < args["n"]:
    return False
  for tok in toks[args["n"] - 1::args["n"]]:
    core = tok.strip(string.punctuation)
    if core and not core.isdigit() and not _JAPANESE_RE.search(core):
      return False
  return True


@_register("sentence_chain")
def _sentence_chain(response, args, prompt):
  """Two or more sentences; each sentence's last word is the next sentence's first word
  (case-folded)."""
  ws = [[w.lower() for w in tu.words(s)] for s in tu.sentences(response)]
  return len(ws) >= 2 and all(a and b and a[-1] == b[0] for a, b in zip(ws, ws[1:]))


@_register("sentence_word_increment", {"step": (int, True)}, extra=_at_least(1, "step"))
def _sentence_word_increment(response, args, prompt):
  """Two or more sentences; each has exactly `step` more words than the previous one."""
  counts = [len(tu.words(s)) for s in tu.sentences(response)]
  return len(counts) >= 2 and all(b - a == args["step"] for a, b in zip(counts, counts[1:]))


_QUESTION_LABEL_RE = re.compile(r"^[ \t*#_]*Question\b[ \t]*\d*[ \t]*[.):;]?", re.M)
_OPTION_RE = re.compile(r"^[ \t]*\(?[A-Za-z][.)][ \t]*\S")


@_register("multiple_choice_questions", {"questions": (int, True), "options": (int, True)},
           extra=_at_least(1, "questions", "options"))
def _multiple_choice_questions(response, args, prompt):
  """Nothing before the first "Question" label; exactly `questions` blocks, each starting
  with a "Question" label and holding exactly `options` lettered option lines ("A." or
  "b)"); the question texts (before the options) get strictly longer."""
  text = response.strip()
  starts = [m.start() for m in _QUESTION_LABEL_RE.finditer(text)]
  if len(starts) != args["questions"] or starts[0] != 0:
    return False
  lengths = []
  for start, end in zip(starts, starts[1:] + [len(text)]):
    lines = text[start:end].splitlines()
    first_label = _QUESTION_LABEL_RE.match(lines[0])
    stem = [lines[0][first_label.end():]]
    n_options = 0
    for line in lines[1:]:
      if _OPTION_RE.match(line):
        n_options += 1
      elif n_options == 0:
        stem.append(line)
    if n_options != args["options"]:
      return False
    lengths.append(len(" ".join(s.strip() for s in stem).strip()))
  return all(a < b for a, b in zip(lengths, lengths[1:]))


@_register("keyword_at", {"keyword": (str, True), "sentence": (int, True),
                          "word": (int, True), **_CASE},
           extra=_all(_nonempty("keyword"), _at_least(1, "sentence", "word")))
def _keyword_at(response, args, prompt):
  """The `word`-th word of the `sentence`-th sentence (both 1-based) is `keyword`."""
  ss = tu.sentences(response)
  if len(ss) < args["sentence"]:
    return False
  ws = tu.words(ss[args["sentence"] - 1])
  cs = args.get("case_sensitive", False)
  return len(ws) >= args["word"] and _fold(ws[args["word"] - 1], cs) == _fold(
      args["keyword"].strip(), cs)


@_register("repeat_changed_first_word", {"text": (str, True)}, extra=_nonempty("text"))
def _repeat_changed_first_word(response, args, prompt):
  """The response repeats `text` word for word (split on whitespace) except that its first
  word is different, and adds nothing."""
  ours, theirs = response.split(), args["text"].split()
  return (len(ours) == len(theirs) and ours[1:] == theirs[1:]
          and ours[0].lower().strip(string.punctuation)
          != theirs[0].lower().strip(string.punctuation))


# ---------------------------------------------------------------------------------------
# Exploit-closing kinds: the same measures as the length and keyword kinds above, made
# robust to the surface features a policy can learn instead of the behaviour (repeated
# sentences, a keyword said over and over, a stock phrase on its own). The testbed's oracle
# criteria and the evolver's rubric candidates use them. Two sentences are the same when
# their case-folded words are.


def _sentence_key(sentence: str) -> tuple[str, ...]:
  return tuple(w.lower() for w in tu.words(sentence))


def _distinct_sentences(response: str) -> list[str]:
  """The sentences of `response` with repeats dropped (first occurrence kept)."""
  seen: set[tuple[str, ...]] = set()
  out = []
  for s in tu.sentences(response):
    key = _sentence_key(s)
    if key and key not in seen:
      seen.add(key)
      out.append(s)
  return out


@_register("distinct_sentence_word_count", _INT_BOUNDS, bounds=True)
def _distinct_sentence_word_count(response, args, prompt):
  """The number of words, counting each repeated sentence once, lies within min/max."""
  return _within(sum(len(tu.words(s)) for s in _distinct_sentences(response)), args)


@_register("fluent_word_count", _INT_BOUNDS, bounds=True)
def _fluent_word_count(response, args, prompt):
  """The number of words in sentences that read as English (3+ words, a fifth of them
  common function words), each repeated sentence counted once, lies within min/max: the
  length of a response without its filler."""
  return _within(sum(len(tu.words(s)) for s in _distinct_sentences(response)
                     if tu.reads_as_text(s)), args)


@_register("keyword_sentence_count", {"keywords": (list[str], True), **_INT_BOUNDS, **_CASE},
           bounds=True, extra=_nonempty("keywords"))
def _keyword_sentence_count(response, args, prompt):
  """The number of distinct sentences that contain any of `keywords` lies within min/max
  (a keyword said twice in one sentence, or a sentence said twice, counts once)."""
  cs = args.get("case_sensitive", False)
  patterns = [tu.keyword_regex(k, cs) for k in args["keywords"]]
  n = sum(any(p.search(s) for p in patterns) for s in _distinct_sentences(response))
  return _within(n, args)


@_register("max_sentence_repeats", {"max": (int, True)}, extra=_at_least(1, "max"))
def _max_sentence_repeats(response, args, prompt):
  """No sentence occurs more than `max` times."""
  counts = collections.Counter(k for k in map(_sentence_key, tu.sentences(response)) if k)
  return max(counts.values(), default=0) <= args["max"]


@_register("distinct_word_ratio", _FLOAT_BOUNDS, bounds=True,
           extra=lambda a: [f"arg {n!r} must lie in [0, 1], got {a[n]}" for n in ("min", "max")
                            if a.get(n) is not None and not 0 <= a[n] <= 1])
def _distinct_word_ratio(response, args, prompt):
  """Distinct words (case-folded) over all words lies within min/max; no words fails."""
  ws = [w.lower() for w in tu.words(response)]
  return bool(ws) and _within(len(set(ws)) / len(ws), args)


@_register("keywords_in_same_sentence", {"keywords": (list[str], True),
                                         "with": (list[str], True), **_CASE},
           extra=_nonempty("keywords", "with"))
def _keywords_in_same_sentence(response, args, prompt):
  """Some sentence contains one of `keywords` and one of `with` (e.g. an apology that
  names the user's situation, not a stock "I'm sorry." on its own)."""
  cs = args.get("case_sensitive", False)
  first = [tu.keyword_regex(k, cs) for k in args["keywords"]]
  second = [tu.keyword_regex(k, cs) for k in args["with"]]
  return any(any(p.search(s) for p in first) and any(p.search(s) for p in second)
             for s in tu.sentences(response))


@_register("ends_complete")
def _ends_complete(response, args, prompt):
  """The response ends with a finished sentence: its last character, after closing quotes,
  brackets and markdown emphasis, is ".", "!", "?" or an ellipsis (a reply cut off at the
  token limit mid-sentence fails)."""
  return tu.ends_complete(response)


def _all_of_problems(args):
  out = []
  for i, sub in enumerate(args["checks"]):
    kind = sub.get("type")
    if not isinstance(kind, str):
      out.append(f"checks[{i}]: needs a string 'type'")
    elif kind == "all_of":
      out.append(f"checks[{i}]: all_of does not nest")
    else:
      out.extend(f"checks[{i}] ({kind}): {p}" for p in
                 validate_check(kind, {k: v for k, v in sub.items() if k != "type"}))
  return out or ([] if args["checks"] else ["arg 'checks' must not be empty"])


@_register("all_of", {"checks": (list[Mapping], True)}, extra=_all_of_problems)
def _all_of(response, args, prompt):
  """Every check in `checks` ({type, ...args} each) passes: a criterion whose intent
  needs two verifiers (e.g. a word count and a finished last sentence)."""
  return all(CHECKS[sub["type"]].fn(response, {k: v for k, v in sub.items() if k != "type"},
                                    prompt) for sub in args["checks"])


# Penalty detectors: a penalty criterion (negative weight) is "met" when the bad behaviour
# happened, so these pass exactly when a response shows the hack the kinds above close.


@_register("cut_off")
def _cut_off(response, args, prompt):
  """The response ends mid-sentence (the opposite of ends_complete): a reply run on to the
  token limit."""
  return not tu.ends_complete(response)


@_register("repeated_sentences", _INT_BOUNDS, bounds=True)
def _repeated_sentences(response, args, prompt):
  """How often the most repeated sentence occurs lies within min/max (`min: 2`: some
  sentence is said at least twice); no sentence counts 0."""
  counts = collections.Counter(k for k in map(_sentence_key, tu.sentences(response)) if k)
  return _within(max(counts.values(), default=0), args)
