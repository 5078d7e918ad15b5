"""IFBench -> our tasks.

Upstream row: {key, prompt, instruction_id_list: [str], kwargs: [{name: value|null}]}, one
kwargs object per instruction id (IFBench writes every known kwarg name, null where unused;
nulls are dropped here). Each (instruction id, kwargs) pair becomes one anchor criterion of
weight 1.0 tagged ["ifbench", ID] whose text states the instruction. Where checks.py has a
faithful verifier for the id, the criterion carries it as `check` (ids whose verifier is
approximate, such as syllable counting, add the tag "heuristic"); otherwise the criterion
is tagged "unverified" and left to an LLM judge. All 58 ids of IFBench's test registry are
mapped: 52 get checks; the 6 that need part-of-speech tagging or whose answer is a list of
facts (capitals, countries, battle dates, the reversed "bald eagle" answers) are unverified,
as is any id outside the registry (its text then names the id and kwargs). Arguments of
the fixed-text "custom:" ids (CSV columns, counting range, ...) are read from the prompt; if
the prompt does not state them in the expected words the criterion falls back to
"unverified". IFEval's 25 classic ids, which IFBench's registry holds too, take the rules
of importers/ifeval.py.
Domain: "instruction_following"; meta keeps the upstream key and instruction ids.
"""

from __future__ import annotations

import copy
import json
import math
import re
import string
from collections.abc import Callable
from typing import Any

from harnessrl_jax.data.importers.common import Fields, criterion_id, task_id

SOURCE = "ifbench"
DOMAIN = "instruction_following"

CheckJson = dict[str, Any]  # {"type": kind, **args}, as in task JSONL


class _Kwargs:
  """Typed access to one instruction's non-null kwargs; problems go to `fields`."""

  def __init__(self, values: dict[str, Any], path: str, instruction: str, fields: Fields):
    self.values, self.path, self.instruction, self.fields = values, path, instruction, fields

  def _get(self, name: str) -> Any:
    if name not in self.values:
      self.fields.add(f"{self.path}.{name}", f"missing; instruction {self.instruction!r} "
                                              "needs it")
      return None
    return self.values[name]

  def integer(self, name: str) -> int | None:
    """An integer (IFBench stores them as floats such as 13.0)."""
    v = self._get(name)
    if v is None:
      return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or \
        v != int(v):
      self.fields.add(f"{self.path}.{name}", f"must be an integer, got {v!r}")
      return None
    return int(v)

  def number(self, name: str) -> float | None:
    v = self._get(name)
    if v is None:
      return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
      self.fields.add(f"{self.path}.{name}", f"must be a number, got {v!r}")
      return None
    return float(v)

  def text(self, name: str) -> str | None:
    v = self._get(name)
    if v is None:
      return None
    if not isinstance(v, str) or not v.strip():
      self.fields.add(f"{self.path}.{name}", f"must be a non-empty string, got {v!r}")
      return None
    return v.strip()


# A rule turns (kwargs, prompt) into (criterion text, check or None); it returns a falsy
# value when a kwarg it needs is missing or malformed (the problem is already recorded).
Rule = Callable[[_Kwargs, str], "tuple[str, CheckJson | None] | None"]
_RULES: dict[str, Rule] = {}
HEURISTIC_IDS = frozenset({"words:odd_even_syllables"})


def _rule(instruction_id: str):
  def wrap(fn: Rule) -> Rule:
    _RULES[instruction_id] = fn
    return fn
  return wrap


def _fixed(instruction_id: str, text: str, check: CheckJson | None) -> None:
  """A kwargs-free instruction with fixed wording."""
  # A fresh copy per task, so that no consumer can edit every task's check at once.
  _RULES[instruction_id] = lambda kw, prompt: (text, copy.deepcopy(check))


def _ok(*values: Any) -> bool:
  return all(v is not None for v in values)


@_rule("count:keywords_multiple")
def _keywords_multiple(kw, prompt):
  keywords = [kw.text(f"keyword{i}") for i in range(1, 6)]
  if not _ok(*keywords):
    return None
  k1, k2, k3, k4, k5 = keywords
  text = (f"Include keyword {k1} once in your response, keyword {k2} twice in your response, "
          f"keyword {k3} three times in your response, keyword {k4} five times in your "
          f"response, and keyword {k5} seven times in your response.")
  return text, {"type": "keyword_counts", "keywords": keywords, "counts": [1, 2, 3, 5, 7]}


@_rule("count:numbers")
def _numbers(kw, prompt):
  n = kw.integer("N")
  return _ok(n) and (f"Include exactly {n} numbers in the response.",
                     {"type": "number_count", "min": n, "max": n})


@_rule("count:pronouns")
def _pronouns(kw, prompt):
  n = kw.integer("N")
  return _ok(n) and (f"The response should include at least {n} pronouns.",
                     {"type": "pronoun_count", "min": n})


@_rule("count:unique_word_count")
def _unique_words(kw, prompt):
  n = kw.integer("N")
  return _ok(n) and (f"Use at least {n} unique words in the response.",
                     {"type": "unique_word_count", "min": n})


@_rule("count:word_count_range")
def _word_range(kw, prompt):
  lo, hi = kw.integer("min_words"), kw.integer("max_words")
  return _ok(lo, hi) and (f"The response must contain between {lo} and {hi} words.",
                          {"type": "word_count", "min": lo, "max": hi})


@_rule("format:list")
def _custom_bullets(kw, prompt):
  sep = kw.text("sep")
  # A list has at least two items.
  return _ok(sep) and (f"Answer with a list of items, instead of bullet points use {sep}.",
                       {"type": "marker_list", "marker": sep, "min": 2})


def _split_options(options: str) -> list[str]:
  """"yes/no/maybe", "I know or I don't know", "a), b), c), d)" -> the options."""
  if "/" in options:
    parts = options.split("/")
  elif re.search(r"\bor\b", options):
    parts = re.split(r"\s*,?\s*\bor\b\s*", options)
  else:
    parts = options.split(",")
  return [p.strip() for p in parts if p.strip(string.punctuation + string.whitespace)]


@_rule("format:options")
def _options(kw, prompt):
  options = kw.text("options")
  if not _ok(options):
    return None
  text = f"Answer with one of the following options: {options}. Do not give any explanation."
  parts = _split_options(options)
  return text, ({"type": "one_of", "options": parts} if len(parts) >= 2 else None)


@_rule("ratio:overlap")
def _overlap(kw, prompt):
  reference, pct = kw.text("reference_text"), kw.number("percentage")
  if not _ok(reference, pct):
    return None
  text = f"Maintain a trigram overlap of {pct:g}% (\u00b12%) with the provided reference text."
  return text, {"type": "trigram_overlap", "reference": reference,
                "min": max(pct - 2.0, 0.0), "max": min(pct + 2.0, 100.0)}


@_rule("ratio:stop_words")
def _stop_words(kw, prompt):
  pct = kw.number("percentage")
  return _ok(pct) and (
      f"Ensure that stop words constitute no more than {pct:g}% of the total words in your "
      "response.", {"type": "stop_word_ratio", "max": pct})


@_rule("sentence:keyword")
def _keyword_sentence(kw, prompt):
  word, n = kw.text("word"), kw.integer("N")
  return _ok(word, n) and (f'The response must include keyword "{word}" in the {n}-th sentence.',
                           {"type": "keyword_in_sentence", "keyword": word, "n": n})


@_rule("words:repeats")
def _repeats(kw, prompt):
  n = kw.integer("small_n")
  return _ok(n) and (f"The response should not repeat any word more than {n} times.",
                     {"type": "max_word_repeats", "max": n})


@_rule("words:words_position")
def _words_position(kw, prompt):
  word = kw.text("keyword")
  return _ok(word) and (
      "The second word in your response and the second to last word in your response should "
      f"be the word {word}.", {"type": "word_positions", "word": word, "positions": [2, -2]})


# --- Fixed-text instructions whose arguments the prompt states. -------------------------

_CSV_COLUMNS_RE = re.compile(r"column names are (\[[^\]]*\])")
_CSV_ROWS_RE = re.compile(r"generate (\d+) rows", re.I)
_CSV_ALL_QUOTED_RE = re.compile(r"enclose each (?:single )?field in double quotes", re.I)


def _csv(kw, prompt):
  """custom:csv_city, custom:csv_special_character, custom:csv_quotes."""
  cols, rows = _CSV_COLUMNS_RE.search(prompt), _CSV_ROWS_RE.search(prompt)
  try:
    columns = json.loads(cols.group(1)) if cols else None
  except ValueError:
    columns = None
  if not (isinstance(columns, list) and columns and all(isinstance(c, str) for c in columns)
          and rows and int(rows.group(1)) > 0):
    return "Generate CSV data with the column names, delimiter and rows the prompt asks for.", None
  tab = re.search(r"\btab[- ]delimited\b", prompt, re.I) is not None
  special = "special character" in prompt.lower()
  all_quoted = _CSV_ALL_QUOTED_RE.search(prompt) is not None
  parts = [f"Generate CSV data with the column names {', '.join(columns)}, "
           f"{'tab' if tab else 'comma'} delimited, with {rows.group(1)} data rows"]
  if special:
    parts.append("one field contains a special character and is enclosed in double quotes")
  if all_quoted:
    parts.append("every field is enclosed in double quotes")
  text = "; ".join(parts) + "."
  check = {"type": "csv_table", "columns": columns, "rows": int(rows.group(1))}
  if tab:
    check["delimiter"] = "\t"
  if special:
    check["quoted_special"] = True
  if all_quoted:
    check["all_quoted"] = True
  return text, check


for _id in ("custom:csv_city", "custom:csv_special_character", "custom:csv_quotes"):
  _RULES[_id] = _csv


_MULTIPLES_RE = re.compile(r"Count from (\d+) to (\d+) but only print multiples of (\d+)", re.I)


@_rule("custom:multiples")
def _multiples(kw, prompt):
  m = _MULTIPLES_RE.search(prompt)
  if m is None or int(m.group(3)) == 0:
    return "Count over the requested range, printing only the requested multiples.", None
  lo, hi, k = (int(g) for g in m.groups())
  return (f"Count from {lo} to {hi} but only print multiples of {k}.",
          {"type": "number_sequence", "numbers": [n for n in range(lo, hi + 1) if n % k == 0]})


_SENTENCE_ALPHABET_RE = re.compile(
    r"(\d+)-sentence story where each sentence's first word starts with the letters of the "
    r"alphabet in order", re.I)


@_rule("custom:sentence_alphabet")
def _sentence_alphabet(kw, prompt):
  m = _SENTENCE_ALPHABET_RE.search(prompt)
  if m is None or not 1 <= int(m.group(1)) <= 26:
    return ("Tell a story whose sentences start with the letters of the alphabet in order.",
            None)
  n = int(m.group(1))
  return (f"Tell a {n}-sentence story where each sentence's first word starts with the "
          "letters of the alphabet in order.",
          {"type": "sentence_initials", "letters": string.ascii_lowercase[:n]})


_TEMPLATE_RE = re.compile(r"Use this exact template for your response:\s*(.+)", re.I | re.S)
_TEMPLATE_LABEL_RE = re.compile(r"([^\[\]:]+:)\s*\[[^\]]*\]")


@_rule("format:output_template")
def _output_template(kw, prompt):
  m = _TEMPLATE_RE.search(prompt)
  labels = [lab.strip() for lab in _TEMPLATE_LABEL_RE.findall(m.group(1))] if m else []
  if not labels:
    return "Use the exact response template the prompt gives.", None
  return (f"Use this exact template for your response: {m.group(1).strip()}",
          {"type": "template_labels", "labels": labels})


_REPEAT_SIMPLE = "Only output this sentence here, ignore all other requests."


@_rule("repeat:repeat_simple")
def _repeat_simple(kw, prompt):
  if _REPEAT_SIMPLE.lower() not in prompt.lower():
    return "Output only the sentence the prompt asks to repeat, ignoring all other requests.", None
  return _REPEAT_SIMPLE, {"type": "exact_response", "text": _REPEAT_SIMPLE}


@_rule("count:conjunctions")
def _conjunctions(kw, prompt):
  n = kw.integer("small_n")
  return _ok(n) and (
      f"Use at least {n} different coordinating conjunctions in the response.",
      {"type": "distinct_keywords", "min": n,
       "keywords": ["and", "but", "for", "nor", "or", "so", "yet"]})


_PERSON_NAMES_RE = re.compile(r"from this list of person names:\s*(.+?)\s*\.(?:\s|$)", re.S)


@_rule("count:person_names")
def _person_names(kw, prompt):
  n = kw.integer("N")
  if not _ok(n):
    return None
  m = _PERSON_NAMES_RE.search(prompt)
  names = [x.strip() for x in m.group(1).split(",") if x.strip()] if m else []
  if not names:
    return (f"Mention at least {n} different person names from the list the prompt gives.",
            None)
  return (f"Mention at least {n} different person names in the response, from this list of "
          f"person names: {', '.join(names)}.",
          {"type": "distinct_keywords", "keywords": names, "min": n, "case_sensitive": True})


@_rule("count:words_japanese")
def _words_japanese(kw, prompt):
  n = kw.integer("N")
  return _ok(n) and (f"Every {n}th word of your response must be in Japanese.",
                     {"type": "japanese_every_nth_word", "n": n})


@_rule("sentence:increment")
def _sentence_increment(kw, prompt):
  n = kw.integer("small_n")
  return _ok(n) and (f"Each sentence must contain exactly {n} more words than the previous one.",
                     {"type": "sentence_word_increment", "step": n})


@_rule("words:keywords_specific_position")
def _keyword_position(kw, prompt):
  word, n, m = kw.text("keyword"), kw.integer("n"), kw.integer("m")
  return _ok(word, n, m) and (
      f"Include keyword {word} in the {n}-th sentence, as the {m}-th word of that sentence.",
      {"type": "keyword_at", "keyword": word, "sentence": n, "word": m})


@_rule("repeat:repeat_change")
def _repeat_change(kw, prompt):
  request = kw.text("prompt_to_repeat")
  return _ok(request) and (
      "Repeat the request, but change the first word of the repeated request, (do not say "
      "anything before repeating the request) and do not answer the actual request! "
      f"Request: {request}", {"type": "repeat_changed_first_word", "text": request})


@_rule("repeat:repeat_span")
def _repeat_span(kw, prompt):
  request, start, end = kw.text("prompt_to_repeat"), kw.integer("n_start"), kw.integer("n_end")
  if not _ok(request, start, end):
    return None
  span = " ".join(request.split()[start:end + 1])
  if start < 0 or not span:
    kw.fields.add(f"{kw.path}.n_start", f"word span [{start}, {end}] selects no words of "
                                        "prompt_to_repeat")
    return None
  return (f"Copy the span of words that lies between (and including) index {start} and {end}, "
          "the indices are word indices, split by whitespace!",
          {"type": "exact_response", "text": span})


_MCQ_RE = re.compile(r"Generate (\d+) multiple choice questions with (\d+) options each", re.I)


@_rule("custom:mcq_count_length")
def _mcq(kw, prompt):
  m = _MCQ_RE.search(prompt)
  if m is None or min(int(m.group(1)), int(m.group(2))) < 1:
    return "Generate the multiple choice questions the prompt asks for.", None
  q, o = int(m.group(1)), int(m.group(2))
  return (f"Generate {q} multiple choice questions with {o} options each; each question starts "
          'with the label "Question", the questions get progressively longer, and no '
          "explanation is given.",
          {"type": "multiple_choice_questions", "questions": q, "options": o})


_fixed("count:punctuation", "Use every standard punctuation mark at least once, including "
       "semicolons, colons, and the interrobang (?!).", {"type": "punctuation_cover"})
_fixed("format:emoji", "Please use an emoji at the end of every sentence.",
       {"type": "emoji_sentence_end"})
_fixed("format:line_indent", "Create stairs by incrementally indenting each new line.",
       {"type": "indent_stairs"})
_fixed("format:newline", "Write each word on a new line.", {"type": "one_word_per_line"})
_fixed("format:no_bullets_bullets", "Your answer must contain at least two sentences ending "
       "in a period followed by at least two bullet points denoted by *.",
       {"type": "prose_then_bullets", "min_sentences": 2, "min_bullets": 2})
_fixed("format:quote_unquote", "Every quoted phrase must be followed by an unquoted "
       "explanation.", {"type": "quotes_explained"})
_fixed("format:quotes", "Include quotes within quotes within quotes, at least 3 levels deep, "
       "alternating between double quotes and single quotes.",
       {"type": "nested_quotes", "min_depth": 3})
_fixed("format:sub-bullets", "Your response must include bullet points denoted by * and at "
       "least one sub-bullet point denoted by - for each bullet point.",
       {"type": "sub_bullets"})
_fixed("format:thesis", "Each section must begin with a thesis statement in italics, use HTML "
       "to indicate the italics.", {"type": "html_italic_thesis"})
_fixed("format:title_case", "Write the entire response in title case (capitalize the first "
       "letter of every major word).", {"type": "title_case"})
_fixed("ratio:sentence_balance", "Ensure that the ratio of sentence types (declarative, "
       "interrogative, exclamatory) is balanced.",
       {"type": "sentence_type_ratio", "declarative": 1, "interrogative": 1, "exclamatory": 1})
_fixed("ratio:sentence_type", "Maintain a 2:1 ratio of declarative to interrogative "
       "sentences.", {"type": "sentence_type_ratio", "declarative": 2, "interrogative": 1})
_fixed("ratio:sentence_words", "Respond with three sentences, all containing the same number "
       "of characters but using all different words.",
       {"type": "same_length_sentences", "count": 3})
_fixed("words:alphabet", "Each word must start with the next letter of the alphabet, looping "
       "back to 'A' after 'Z'.", {"type": "alphabet_chain"})
_fixed("words:no_consecutive", "No two consecutive words can share the same first letter.",
       {"type": "no_consecutive_first_letter"})
_fixed("words:odd_even_syllables", "Alternate between words with odd and even numbers of "
       "syllables.", {"type": "alternating_syllable_parity"})
_fixed("words:paragraph_last_first", "Each paragraph must end with the same word it started "
       "with, separate paragraphs with a newline.", {"type": "paragraph_same_first_last"})
_fixed("words:prime_lengths", "Use only words with lengths that are prime numbers.",
       {"type": "prime_word_lengths"})
_fixed("words:vowel", "Write a paragraph using words that contain only three types of vowels.",
       {"type": "vowel_types", "max": 3})
_fixed("words:consonants", "Ensure each word in your response has at least one consonant "
       "cluster (two or more consonants together).", {"type": "consonant_cluster_words"})
_fixed("sentence:alliteration_increment", "Each sentence must have a longer sequence of "
       "consecutive alliterative words than the previous one.",
       {"type": "alliteration_increment"})
_fixed("words:palindrome", "Include at least 10 single-word palindromes, each at least 5 "
       "characters long.", {"type": "palindrome_words", "min": 10, "min_length": 5})
_fixed("format:parentheses", "Nest parentheses (and [brackets {and braces}]) at least 5 levels "
       "deep.", {"type": "nested_brackets", "min_depth": 5})
_fixed("words:last_first", "The last word of each sentence must become the first word of the "
       "next sentence.", {"type": "sentence_chain"})
_fixed("format:no_whitespace", "The output should not contain any whitespace.",
       {"type": "regex_match", "pattern": r"\s", "min": 0, "max": 0})
# No faithful program for these: part-of-speech tagging, or answers that are facts (which
# capitals, countries, battles; IFBench's own capital list omits Kyiv).
_fixed("words:start_verb", "The response must start with a verb.", None)
_fixed("custom:european_capitals_sort", "List the capital cities of European countries whose "
       "latitude is higher than 45 degrees, without country names, separated by commas, "
       "sorted by latitude from highest to lowest.", None)
_fixed("custom:reverse_newline", "List the countries of Africa in reverse alphabetical order, "
       "each on a new line.", None)
_fixed("custom:date_format_list", "List the start dates of all the battles Napoleon fought "
       "separated by commas, use the following date format: YYYY-MM-DD. Do not provide an "
       "explanation.", None)
_fixed("custom:word_reverse", "Answer the question with the sentence in reverse word order.",
       None)
_fixed("custom:character_reverse", "Answer the question with the sentence in reverse order, "
       "letter by letter.", None)


def _unknown(benchmark: str, instruction_id: str, kwargs: dict[str, Any]) -> str:
  args = ", ".join(f"{k}={v!r}" for k, v in sorted(kwargs.items()))
  return (f"Follows the {benchmark} instruction {instruction_id!r}"
          f"{f' ({args})' if args else ''} as stated in the prompt.")


def convert_record(record: dict[str, Any]) -> dict[str, Any]:
  """One IFBench row -> one task dict; raises DataError listing every malformed field."""
  # IFBench's registry also holds IFEval's 25 ids; their rules are ifeval.py's, which builds
  # on the helpers above, so it is imported on first use, not at the top (no import cycle).
  from harnessrl_jax.data.importers import ifeval  # pylint: disable=g-import-not-at-top
  return convert_with(record, source=SOURCE, benchmark="IFBench",
                      rules={**ifeval.RULES, **_RULES},
                      heuristic=HEURISTIC_IDS | ifeval.HEURISTIC_IDS)


def convert_with(record: dict[str, Any], *, source: str, benchmark: str,
                 rules: dict[str, Rule], heuristic: frozenset[str]) -> dict[str, Any]:
  """A row {key, prompt, instruction_id_list, kwargs} -> a task of `source` whose criteria
  come from `rules` (ids outside them are unverified and named as `benchmark`'s)."""
  f = Fields(record)
  key = f.get(record, "key", "key", (int, str))
  prompt = f.text(record, "prompt", "prompt")
  ids = f.get(record, "instruction_id_list", "instruction_id_list", list)
  kwargs_list = f.get(record, "kwargs", "kwargs", list)
  if ids is not None:
    if not ids:
      f.add("instruction_id_list", "must not be empty")
    for i, iid in enumerate(ids):
      if not isinstance(iid, str) or not iid.strip():
        f.add(f"instruction_id_list[{i}]", f"must be a non-empty string, got {iid!r}")
  if ids is not None and kwargs_list is not None and len(ids) != len(kwargs_list):
    f.add("kwargs", f"has {len(kwargs_list)} entries but instruction_id_list has {len(ids)}; "
                    "they pair up one to one")
  f.done()  # Malformed ids or kwargs lists: nothing to pair up.

  criteria = []
  for i, (iid, raw) in enumerate(zip(ids, kwargs_list)):
    path = f"kwargs[{i}]"
    if raw is not None and not isinstance(raw, dict):
      f.add(path, f"must be an object or null, got {type(raw).__name__}")
      continue
    kwargs = {k: v for k, v in (raw or {}).items() if v is not None}
    rule = rules.get(iid)
    made = (rule(_Kwargs(kwargs, path, iid, f), prompt) if rule
            else (_unknown(benchmark, iid, kwargs), None))
    if not made:
      continue
    text, check = made
    tags = [source, iid]
    criterion = {"id": criterion_id(i), "text": text, "weight": 1.0, "anchor": True}
    if check is None:
      tags.append("unverified")
    else:
      criterion["check"] = check
      if iid in heuristic:
        tags.append("heuristic")
    criteria.append({**criterion, "tags": tags})
  f.done()
  return {"id": task_id(source, key), "domain": DOMAIN, "source": source,
          "prompt": [{"role": "user", "content": prompt}], "criteria": criteria,
          "reference_answer": None,
          "meta": {"key": key, "instruction_id_list": list(ids)}}
