"""Official-mode checkers of IFBench's format:* and custom:* ids: each reproduces the verdict of
allenai/IFBench's check_following for that id (quirks included; each quirk named in a
comment and listed in docs/evaluation.md).

The custom:* checkers test the fixed task of the official class (Africa's countries, the 27
European capitals, multiples of 7 from 10 to 50, ...) whatever the prompt says, as the
official code does."""

from __future__ import annotations

import csv
import io
import re
import string
import unicodedata
from collections.abc import Callable, Mapping
from typing import Any

import emoji

from harnessrl_jax.eval.ifverify import text

_PUNCT = string.punctuation
_PUNCT_SPACE = string.punctuation + " "
_NO_PUNCT = str.maketrans("", "", string.punctuation)


# --- Shared helpers ---------------------------------------------------------------------

def _ascii_fold(s: str) -> str:
  """NFKD, then every non-ASCII character dropped ('São Tomé' -> 'Sao Tome')."""
  return unicodedata.normalize("NFKD", s).encode("ascii", "ignore").decode("ascii")


def _csv_rows(value: str, delimiter: str = ",") -> list[list[str]] | None:
  """csv.reader's rows (a blank line is an empty row); None where csv raises, which would
  crash the official checker."""
  try:
    return list(csv.reader(io.StringIO(value), delimiter=delimiter))
  except csv.Error:
    return None


# --- format:* -----------------------------------------------------------------------------

def _emoji(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  """An emoji at the end of every sentence (NLTK sentences, punctuation removed)."""
  sents = text.sentences(response)
  for i, sent in enumerate(sents):
    bare = sent.translate(_NO_PUNCT).strip()
    if not bare:  # a sentence of punctuation only fails
      return False
    # Quirk: the last or second-to-last character may be the emoji (variation selectors).
    if emoji.is_emoji(bare[-1]) or emoji.is_emoji(bare[-2] if len(bare) > 1 else bare[-1]):
      continue
    # Quirk: Punkt often puts a trailing emoji at the start of the next sentence, so an
    # emoji that starts the next sentence counts too; the last sentence has no such rescue.
    if i == len(sents) - 1:
      return False
    nxt = sents[i + 1].translate(_NO_PUNCT).strip()
    if not nxt or not emoji.is_emoji(nxt[0]):
      return False
  return True  # no sentence at all passes


def _line_indent(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  """Each line indented by more leading spaces than the line before."""
  lines = response.split("\n")
  # Quirk: the official code removes blank lines from the list while iterating over it, so
  # the blank line right after a removed one is skipped and stays; list.remove drops the
  # first equal line, which may be an earlier one. Simulated with an index.
  i = 0
  while i < len(lines):
    if not lines[i].strip():
      lines.remove(lines[i])
    i += 1
  # Quirk: only spaces count as indentation (a tab is not).
  indents = [len(line) - len(line.lstrip(" ")) for line in lines]
  return all(b > a for a, b in zip(indents, indents[1:]))


def _list(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  """Quirk: passes when the marker occurs at least twice anywhere (not only at line starts,
  e.g. '-' inside 'well-known')."""
  sep = kwargs.get("sep")
  if not isinstance(sep, str):  # the official code would draw a random marker
    return False
  return response.count(sep) >= 2  # non-overlapping, as re.findall


def _newline(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  """One word per line: after removing punctuation, the non-empty lines number as many as
  the whitespace-separated words."""
  value = response.translate(_NO_PUNCT).strip()
  # Quirk: only empty lines are dropped; a line of spaces counts as a line (with no word).
  lines = [line for line in value.split("\n") if line != ""]
  return len(lines) == len(value.split())


def _no_bullets_bullets(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  """At least two sentences (counted by NLTK over the lines before the first '*' line),
  then at least two lines starting with '*' and nothing else."""
  in_text: Any = True
  n_sentences = n_bullets = 0
  for line in response.split("\n"):
    if line.strip().startswith("*"):
      in_text = False
      if n_sentences < 2:
        return False
      n_bullets += 1
    elif in_text:
      # Quirk: the flag is overwritten with this line's sentence list, so after a blank line
      # (no sentences) any further non-bullet line fails; any line ending counts as a
      # sentence end, not only a period.
      in_text = text.sentences(line.strip())
      n_sentences += len(in_text)
    else:
      # Quirk: any line after the bullets that does not start with '*' fails, blank included.
      return False
  return n_bullets >= 2


def _no_whitespace(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  return not any(ch.isspace() for ch in response)


def _options(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  """The response is one of the options."""
  options = kwargs.get("options")
  if not isinstance(options, str):  # the official code would draw random options
    return False
  # Letter options ('a), b), c), d)') must match exactly; text options are compared lower
  # case with punctuation and spaces stripped from both ends.
  exact = re.match(r"\W*[aA]\W*[bB]\W*[cC]\W*", options) is not None
  # Quirk: the separator is "/" if present, else "or" if it occurs as a substring (even
  # inside a word such as "for"), else ",".
  sep = "/" if "/" in options else "or" if "or" in options else ","
  choices = [o.strip() for o in options.split(sep)]
  if exact:
    return response in choices
  value = response.strip(_PUNCT_SPACE).lower()
  return any(o.strip(_PUNCT_SPACE).lower() == value for o in choices)


def _output_template(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  """Quirk: only the three labels must occur, anywhere and in any order (case-sensitive)."""
  return all(label in response for label in ("My Answer:", "My Conclusion:", "Future Outlook:"))


def _parentheses(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  """Brackets ( [ { nested at least 5 deep."""
  closer = {")": "(", "]": "[", "}": "{"}
  stack: list[str] = []
  max_depth = 0
  for ch in response:
    if ch in "([{":
      stack.append(ch)
      max_depth = max(max_depth, len(stack))
    elif ch in closer:
      if stack and stack[-1] == closer[ch]:
        stack.pop()
        # Quirk: one matching closer after depth 5 was reached suffices; the rest of the
        # group need not be closed (and depth counts unclosed openers across groups).
        if max_depth >= 5:
          return True
      else:  # a mismatched or unopened closer resets the count
        stack, max_depth = [], 0
  return False


def _quote_unquote(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  """No two quoted phrases in a row and no quote at the end (straight quotes only)."""
  # Quirk: the pinned code's curly-to-straight replacement replaces '"' by '"' (a no-op), so
  # curly quotes are ignored.
  value = response.replace("'\"'", "")  # mentions of the character '"' are dropped
  value = "".join(value.split())
  # Quirk: '""' anywhere after removing all whitespace fails, e.g. '"a" "b"' but also an
  # empty quote.
  if '""' in value:
    return False
  tail = value.strip(string.digits + _PUNCT.replace('"', ""))
  return not (tail and tail[-1] == '"')


def _quotes(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  """Quotes nested 3 deep, alternating " and '."""
  stack: list[str] = []
  reached = depth = 0
  for ch in response:
    if stack and ch == stack[-1]:
      stack.pop()
      depth -= 1
      # Quirk: passes as soon as one closing quote lies 3 levels below the deepest level
      # reached; apostrophes (don't, it's) open and close single quotes like any other '.
      if reached - depth >= 3:
        return True
    elif ch in "\"'":
      stack.append(ch)
      depth += 1
      reached = max(reached, depth)
  return False


def _sub_bullets(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  """Quirk: the response is split on every '*' (bold markers included) and each piece after
  the first must contain a '-' somewhere; a response without '*' passes."""
  return all("-" in piece for piece in response.split("*")[1:])


def _thesis(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  """An italic (<i> or <em>) non-blank thesis followed by non-blank text."""
  start = response.find("<i>")
  if start == -1:
    start = response.find("<em>")
    if start == -1:
      return False
  value = response[start:]
  end = value.find("</i>")
  if end == -1:
    end = value.find("</em>")
    if end == -1:
      return False
  # Quirk: the offsets assume <i>/</i>: with <em> the thesis keeps a '>' and the text after
  # starts with '>', so '<em></em>' passes (a '>' on each side); a '</i>' anywhere after the
  # opener takes precedence over '</em>'.
  thesis = value[3:end]
  return thesis.strip() != "" and value[end + 4:].strip() != ""


def _title_case(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  """Every NLTK word token starting with a letter is capitalised."""
  for tok in text.word_tokens(response):
    if not tok or not tok[0].isalpha():
      continue
    if len(tok) == 1:
      if tok.islower():  # Quirk: minor words such as 'a' fail too
        return False
      continue
    # Quirk: a lower-case first letter fails only when the rest is all lower or all upper
    # case ('iPhone' passes); word_tokenize splits "don't" into 'do' and "n't", so any
    # contraction fails ("Don't" -> "n't").
    if tok[0].islower() and (tok[1:].islower() or tok[1:].isupper()):
      return False
  return True


# --- custom:* -----------------------------------------------------------------------------

def _character_reverse(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  """Quirk: only 'elgae dlab' (reversed 'bald eagle') must occur, case-insensitively."""
  return "elgae dlab" in response.lower()


def _csv_city(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  """Comma CSV: header ID,Country,City,Year,Count and 7 rows of 5 fields."""
  rows = _csv_rows(response)
  if rows is None or len(rows) != 8:  # Quirk: a blank line is a row (of 0 fields)
    return False
  return rows[0] == ["ID", "Country", "City", "Year", "Count"] and all(
      len(r) == 5 for r in rows[1:])


_SPECIAL_HEADER = re.compile(r'^(ProductID|"ProductID"),[ \t]*(Category|"Category"),[ \t]*'
                             r'(Brand|"Brand"),[ \t]*(Price|"Price"),[ \t]*(Stock|"Stock")$')
_QUOTES_HEADER = re.compile(r'^(StudentID|"StudentID")\t *(Subject|"Subject")\t *'
                            r'(Grade|"Grade")\t *(Semester|"Semester")\t *(Score|"Score")$')


def _csv_special_character(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  """Comma CSV with the product header, 14 rows of 5 fields, one quoted field holding a
  special character."""
  if not _SPECIAL_HEADER.match(response.split("\n")[0].strip()):
    return False
  # Quirk: every '"' is tripled before parsing, so quoted fields keep their quotes (and a
  # quoted field's comma still does not split it).
  rows = _csv_rows(response.replace('"', '"""'))
  if rows is None or len(rows) != 15:
    return False
  for row in rows[1:]:
    if len(row) != 5:
      return False
    # Quirk: the verdict is True at the first row with a quoted special field; rows after it
    # are not checked for 5 fields. '"' itself counts as special ('"a"b"').
    if any(re.match(r'".*[^\d\w\s].*"', f) for f in row):
      return True
  return False


def _csv_quotes(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  """Tab CSV with the student header and 3 rows, every field in double quotes."""
  if not _QUOTES_HEADER.match(response.split("\n")[0].strip()):
    return False
  rows = _csv_rows(response.replace('"', '"""'), delimiter="\t")
  if rows is None or len(rows) != 4:
    return False
  for row in rows:  # Quirk: the header's fields must be quoted too, though its regex allows bare
    if len(row) != 5:
      return False
    for f in row:
      f = f.strip()
      if not f:  # the official code crashes (IndexError) on an empty field
        return False
      if f[0] != '"' or f[-1] != '"':
        return False
  return True


def _date_format_list(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  """Comma-separated YYYY-MM-DD dates in 1769..1821 with a plausible month and day."""
  for date in response.strip().split(","):
    date = date.strip()
    if not re.match(r"^\d{4}-\d{2}-\d{2}$", date):
      return False
    year, month, day = (int(p) for p in date.split("-"))
    if not 1769 <= year <= 1821 or month > 12:
      return False
    # Quirk: month 00 passes with any day, day 00 passes, February allows 29 in every year.
    if day > {0: 99, 2: 29, 4: 30, 6: 30, 9: 30, 11: 30}.get(month, 31):
      return False
  return True


_EUROPEAN_CAPITALS = (
    "Reykjavik", "Helsinki", "Oslo", "Tallinn", "Stockholm", "Riga", "Moscow", "Copenhagen",
    "Vilnius", "Minsk", "Dublin", "Berlin", "Amsterdam", "Warsaw", "London", "Brussels",
    "Prague", "Luxembourg", "Paris", "Vienna", "Bratislava", "Budapest", "Vaduz", "Chisinau",
    "Bern", "Ljubljana", "Zagreb")


def _european_capitals_sort(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  """Quirk: the response must be exactly the official 27 capitals, comma-separated, in the
  official order (accents folded; no 'and', no trailing period)."""
  caps = [c.strip() for c in _ascii_fold(response).split(",") if c.strip()]
  return tuple(caps) == _EUROPEAN_CAPITALS


def _mcq_count_length(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  """4 questions labelled 'Question N', 5 options each, each question longer than the last."""
  # Quirk: the response must start with 'Question' (no preamble); without any 'Question',
  # the official slice value[-1:] equals the response only for a 1-character response.
  start = response.find("Question")
  if (response[start:] if start != -1 else response[-1:]) != response:
    return False
  parts = re.split(r"\n*(?:Question \d+[\.|\):;]?\s*)", response)
  if parts[0] == "":
    parts = parts[1:]
  questions = [q.strip() for q in parts if q.strip()]
  if len(questions) != 4:
    return False
  lengths = []
  for q in questions:
    stem, n_options, in_options = "", 0, False
    for line in q.split("\n"):
      if re.match(r"^[A-Ea-e][\.|\)]\s*\w+", line.strip()):
        n_options += 1
        in_options = True
      elif not in_options:
        stem += " " + line.strip()
    if n_options != 5:
      return False
    lengths.append(len(stem.strip()))
  # Quirk: 'longer' compares the characters of the question text before the first option.
  return all(a < b for a, b in zip(lengths, lengths[1:]))


def _multiples(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  """Quirk: the digit runs of the whole response must be exactly 14 21 28 35 42 49 (so any
  other number, e.g. '1.' list numbering, fails)."""
  return re.findall(r"\d+", response.replace(",", ", ")) == ["14", "21", "28", "35", "42", "49"]


def _reverse_newline(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  """From the first line containing 'Zimbabwe', at least 52 non-empty lines in reverse
  alphabetical order (accents folded)."""
  lines = [s for s in (line.strip(_PUNCT_SPACE) for line in response.split("\n")) if s]
  start = next((i for i, line in enumerate(lines) if "Zimbabwe" in line), None)
  if start is None:
    return False
  # Quirk: only order and count (>= 52) are checked, not that the lines are countries; lines
  # before Zimbabwe are ignored; comparison is by code point after folding (case-sensitive).
  target = [_ascii_fold(line) for line in lines[start:]]
  return len(target) >= 52 and target == sorted(target, reverse=True)


def _sentence_alphabet(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  """26 NLTK sentences whose first whitespace word starts with a, b, c, ... in order."""
  sents = text.sentences(response)
  if len(sents) != 26:
    return False
  for i, sent in enumerate(sents):
    words = sent.lstrip().split()
    # Quirk: the first character must be the letter itself, so a quote or '*' before it fails.
    if not words or words[0].lower()[0] != chr(ord("a") + i):
      return False
  return True


def _word_reverse(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  """Quirk: after lower-casing, removing punctuation and reversing the word order, 'bald
  eagle' must occur and the result be one NLTK sentence; nothing checks that the original
  was reversed ('eagle bald' passes, and 'the bald eagle' too)."""
  value = " ".join(response.lower().strip().translate(_NO_PUNCT).split()[::-1])
  if "bald eagle" not in value:
    return False
  return value in text.sentences(value)


# id -> checker(response, kwargs without nulls, prompt) -> followed
CHECKERS: dict[str, Callable[[str, Mapping[str, Any], str], bool]] = {
    "format:emoji": _emoji,
    "format:line_indent": _line_indent,
    "format:list": _list,
    "format:newline": _newline,
    "format:no_bullets_bullets": _no_bullets_bullets,
    "format:no_whitespace": _no_whitespace,
    "format:options": _options,
    "format:output_template": _output_template,
    "format:parentheses": _parentheses,
    "format:quote_unquote": _quote_unquote,
    "format:quotes": _quotes,
    "format:sub-bullets": _sub_bullets,
    "format:thesis": _thesis,
    "format:title_case": _title_case,
    "custom:character_reverse": _character_reverse,
    "custom:csv_city": _csv_city,
    "custom:csv_quotes": _csv_quotes,
    "custom:csv_special_character": _csv_special_character,
    "custom:date_format_list": _date_format_list,
    "custom:european_capitals_sort": _european_capitals_sort,
    "custom:mcq_count_length": _mcq_count_length,
    "custom:multiples": _multiples,
    "custom:reverse_newline": _reverse_newline,
    "custom:sentence_alphabet": _sentence_alphabet,
    "custom:word_reverse": _word_reverse,
}
