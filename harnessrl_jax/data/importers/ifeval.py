"""IFEval -> our tasks, and the rules of IFEval's 25 classic instruction ids.

Upstream row (google-research instruction_following_eval, input_data.jsonl): {key, prompt,
instruction_id_list: [str], kwargs: [{name: value}]}, the same shape as IFBench's (HF copies
write null for unused kwargs and floats such as 3.0 for counts; both are read). Each
(instruction id, kwargs) pair becomes one anchor criterion of weight 1.0 tagged
["ifeval", ID] whose text is IFEval's instruction wording with the kwargs filled in, and
whose `check` (checks.py) verifies what that wording says: our strict semantics, not the
official verifiers' quirks (those are eval/ifverify/official_ifeval.py's, listed in
docs/evaluation.md). All 25 ids get checks; the three that detect a language (langdetect,
seeded) are tagged "heuristic". Any other id is unverified. Id `ifeval-<key>`, domain
"instruction_following"; meta keeps the key and the instruction ids.

id -> check kind (args from the kwargs; relation "less than" N is max N-1, "at least" N is
min N):
  keywords:existence                  keyword_present (whole words, any case)
  keywords:frequency                  keyword_count
  keywords:forbidden_words            forbidden_words
  keywords:letter_frequency           letter_frequency (any case)
  language:response_language          language (langdetect's guess is the code)
  length_constraints:number_sentences sentence_count
  length_constraints:number_paragraphs paragraph_count, separator "***", exactly N
  length_constraints:number_words     word_count
  length_constraints:nth_paragraph_first_word  nth_paragraph_first_word
  detectable_content:number_placeholders  placeholders
  detectable_content:postscript       postscript (a line starting with the marker)
  detectable_format:number_bullet_lists  bullet_list, exactly N
  detectable_format:constrained_response one_of the three "My answer is ..." options
  detectable_format:number_highlighted_sections  highlighted_sections
  detectable_format:multiple_sections sections, exactly N
  detectable_format:json_format       json_format
  detectable_format:title             title
  combination:two_responses           two_responses
  combination:repeat_prompt           repeat_prompt with text = prompt_to_repeat
  startend:end_checker                ends_with, case-sensitive ("this exact phrase")
  startend:quotation                  quotation_wrapped
  change_case:capital_word_frequency  capital_words (all-caps words of 2+ letters)
  change_case:english_capital         language en, case upper
  change_case:english_lowercase       language en, case lower
  punctuation:no_comma                no_commas
"""

from __future__ import annotations

import copy
from typing import Any

from harnessrl_jax.data.checks import LANGDETECT_CODES
from harnessrl_jax.data.importers.ifbench import CheckJson, Rule, _Kwargs, _ok, convert_with

SOURCE = "ifeval"
RULES: dict[str, Rule] = {}
HEURISTIC_IDS = frozenset({"language:response_language", "change_case:english_capital",
                           "change_case:english_lowercase"})

# IFEval's LANGUAGE_CODES (the names its instruction text uses).
LANGUAGES = {
    "en": "English", "es": "Spanish", "pt": "Portuguese", "ar": "Arabic", "hi": "Hindi",
    "fr": "French", "ru": "Russian", "de": "German", "ja": "Japanese", "it": "Italian",
    "bn": "Bengali", "uk": "Ukrainian", "th": "Thai", "ur": "Urdu", "ta": "Tamil",
    "te": "Telugu", "bg": "Bulgarian", "ko": "Korean", "pl": "Polish", "he": "Hebrew",
    "fa": "Persian", "vi": "Vietnamese", "ne": "Nepali", "sw": "Swahili", "kn": "Kannada",
    "mr": "Marathi", "gu": "Gujarati", "pa": "Punjabi", "ml": "Malayalam", "fi": "Finnish"}
_RELATIONS = ("less than", "at least")
_OPTIONS = ["My answer is yes.", "My answer is no.", "My answer is maybe."]


def _rule(instruction_id: str):
  def wrap(fn: Rule) -> Rule:
    RULES[instruction_id] = fn
    return fn
  return wrap


def _fixed(instruction_id: str, text: str, check: CheckJson) -> None:
  # A fresh copy per task, so that no consumer can edit every task's check at once.
  RULES[instruction_id] = lambda kw, prompt: (text, copy.deepcopy(check))


def _relation(kw: _Kwargs, name: str = "relation") -> str | None:
  value = kw.text(name)
  if value is not None and value not in _RELATIONS:
    kw.fields.add(f"{kw.path}.{name}", f"must be one of {list(_RELATIONS)}, got {value!r}")
    return None
  return value


def _count(kw: _Kwargs, name: str, lowest: int = 0) -> int | None:
  value = kw.integer(name)
  if value is not None and value < lowest:
    kw.fields.add(f"{kw.path}.{name}", f"must be >= {lowest}, got {value}")
    return None
  return value


def _bounds(kw: _Kwargs, relation: str, n: int, name: str) -> dict[str, int] | None:
  """"less than" n -> max n-1 (n must be >= 1), "at least" n -> min n."""
  if relation == "at least":
    return {"min": n}
  if n < 1:
    kw.fields.add(f"{kw.path}.{name}", f"'less than {n}' cannot be met; must be >= 1")
    return None
  return {"max": n - 1}


def _strings(kw: _Kwargs, name: str) -> list[str] | None:
  value = kw._get(name)  # pylint: disable=protected-access
  if value is None:
    return None
  if not (isinstance(value, list) and value and
          all(isinstance(v, str) and v.strip() for v in value)):
    kw.fields.add(f"{kw.path}.{name}", f"must be a non-empty list of non-empty strings, "
                                       f"got {value!r}")
    return None
  return [v.strip() for v in value]


def _relational(kw, count_name, relation_name, text, check):
  """A `relation` `count` instruction: text.format(relation=, n=), check + bounds."""
  relation, n = _relation(kw, relation_name), _count(kw, count_name)
  if not _ok(relation, n):
    return None
  bounds = _bounds(kw, relation, n, count_name)
  return bounds and (text.format(relation=relation, n=n), {**check, **bounds})


@_rule("keywords:existence")
def _existence(kw, prompt):
  keywords = _strings(kw, "keywords")
  return _ok(keywords) and (f"Include keywords {', '.join(keywords)} in the response.",
                            {"type": "keyword_present", "keywords": keywords})


@_rule("keywords:frequency")
def _frequency(kw, prompt):
  keyword = kw.text("keyword")
  if not _ok(keyword):
    _relation(kw), _count(kw, "frequency")  # report every problem at once
    return None
  return _relational(kw, "frequency", "relation",
                     f"In your response, the word {keyword} should appear {{relation}} {{n}} "
                     "times.", {"type": "keyword_count", "keyword": keyword})


@_rule("keywords:forbidden_words")
def _forbidden(kw, prompt):
  words = _strings(kw, "forbidden_words")
  return _ok(words) and (f"Do not include keywords {', '.join(words)} in the response.",
                         {"type": "forbidden_words", "words": words})


@_rule("keywords:letter_frequency")
def _letter_frequency(kw, prompt):
  letter = kw.text("letter")
  if letter is not None and len(letter) != 1:
    kw.fields.add(f"{kw.path}.letter", f"must be one character, got {letter!r}")
    letter = None
  if not _ok(letter):
    _relation(kw, "let_relation"), _count(kw, "let_frequency")
    return None
  return _relational(kw, "let_frequency", "let_relation",
                     f"In your response, the letter {letter} should appear {{relation}} {{n}} "
                     "times.", {"type": "letter_frequency", "letter": letter})


@_rule("language:response_language")
def _language(kw, prompt):
  code = kw.text("language")
  if code is not None and code not in LANGDETECT_CODES:
    kw.fields.add(f"{kw.path}.language", f"must be a language code langdetect knows "
                                         f"(IFEval's: {', '.join(LANGUAGES)}), got {code!r}")
    return None
  return _ok(code) and (
      f"Your ENTIRE response should be in {LANGUAGES.get(code, code)} language, no other "
      "language is allowed.", {"type": "language", "code": code})


@_rule("length_constraints:number_sentences")
def _sentences(kw, prompt):
  return _relational(kw, "num_sentences", "relation",
                     "Your response should contain {relation} {n} sentences.",
                     {"type": "sentence_count"})


@_rule("length_constraints:number_words")
def _words(kw, prompt):
  return _relational(kw, "num_words", "relation", "Answer with {relation} {n} words.",
                     {"type": "word_count"})


@_rule("length_constraints:number_paragraphs")
def _paragraphs(kw, prompt):
  n = _count(kw, "num_paragraphs", 1)
  return _ok(n) and (
      f"There should be {n} paragraphs. Paragraphs are separated with the markdown divider: "
      "***", {"type": "paragraph_count", "separator": "***", "min": n, "max": n})


@_rule("length_constraints:nth_paragraph_first_word")
def _nth_paragraph(kw, prompt):
  n, nth = _count(kw, "num_paragraphs", 1), _count(kw, "nth_paragraph", 1)
  word = kw.text("first_word")
  if not _ok(n, nth, word):
    return None
  if nth > n:
    kw.fields.add(f"{kw.path}.nth_paragraph", f"({nth}) is greater than num_paragraphs ({n})")
    return None
  return (f"There should be {n} paragraphs. Paragraphs and only paragraphs are separated with "
          "each other by two new lines as if it was '\\n\\n' in python. Paragraph "
          f"{nth} must start with word {word}.",
          {"type": "nth_paragraph_first_word", "paragraphs": n, "n": nth, "word": word})


@_rule("detectable_content:number_placeholders")
def _placeholders(kw, prompt):
  n = _count(kw, "num_placeholders")
  return _ok(n) and (f"The response must contain at least {n} placeholders represented by "
                     "square brackets, such as [address].", {"type": "placeholders", "min": n})


@_rule("detectable_content:postscript")
def _postscript(kw, prompt):
  marker = kw.text("postscript_marker")
  return _ok(marker) and (
      f"At the end of your response, please explicitly add a postscript starting with {marker}",
      {"type": "postscript", "marker": marker})


@_rule("detectable_format:number_bullet_lists")
def _bullets(kw, prompt):
  n = _count(kw, "num_bullets")
  return _ok(n) and (
      f"Your answer must contain exactly {n} bullet points. Use the markdown bullet points "
      "such as:\n* This is point 1. \n* This is point 2",
      {"type": "bullet_list", "min": n, "max": n})


@_rule("detectable_format:number_highlighted_sections")
def _highlights(kw, prompt):
  n = _count(kw, "num_highlights")
  return _ok(n) and (f"Highlight at least {n} sections in your answer with markdown, i.e. "
                     "*highlighted section*.", {"type": "highlighted_sections", "min": n})


@_rule("detectable_format:multiple_sections")
def _sections(kw, prompt):
  splitter, n = kw.text("section_spliter"), _count(kw, "num_sections", 1)
  return _ok(splitter, n) and (
      f"Your response must have {n} sections. Mark the beginning of each section with "
      f"{splitter} X, such as:\n{splitter} 1\n[content of section 1]\n{splitter} 2\n"
      "[content of section 2]", {"type": "sections", "marker": splitter, "min": n, "max": n})


@_rule("combination:repeat_prompt")
def _repeat(kw, prompt):
  request = kw.text("prompt_to_repeat")
  return _ok(request) and (
      "First repeat the request word for word without change, then give your answer (1. do "
      "not say any words or characters before repeating the request; 2. the request you need "
      f"to repeat does not include this sentence) Request: {request}",
      {"type": "repeat_prompt", "text": request})


@_rule("startend:end_checker")
def _end(kw, prompt):
  phrase = kw.text("end_phrase")
  return _ok(phrase) and (
      f"Finish your response with this exact phrase {phrase}. No other words should follow "
      "this phrase.", {"type": "ends_with", "suffix": phrase, "case_sensitive": True})


@_rule("change_case:capital_word_frequency")
def _capital_words(kw, prompt):
  return _relational(kw, "capital_frequency", "capital_relation",
                     "In your response, words with all capital letters should appear "
                     "{relation} {n} times.", {"type": "capital_words"})


_fixed("detectable_format:constrained_response",
       f"Answer with one of the following options: {', '.join(_OPTIONS)}",
       {"type": "one_of", "options": _OPTIONS})
_fixed("detectable_format:json_format", "Entire output should be wrapped in JSON format. You "
       "can use markdown ticks such as ```.", {"type": "json_format"})
_fixed("detectable_format:title", "Your answer must contain a title, wrapped in double angular "
       "brackets, such as <<poem of joy>>.", {"type": "title"})
_fixed("combination:two_responses", "Give two different responses. Responses and only "
       "responses should be separated by 6 asterisk symbols: ******.",
       {"type": "two_responses", "separator": "******"})
_fixed("startend:quotation", "Wrap your entire response with double quotation marks.",
       {"type": "quotation_wrapped"})
_fixed("change_case:english_capital", "Your entire response should be in English, and in all "
       "capital letters.", {"type": "language", "code": "en", "case": "upper"})
_fixed("change_case:english_lowercase", "Your entire response should be in English, and in "
       "all lowercase letters. No capital letters are allowed.",
       {"type": "language", "code": "en", "case": "lower"})
_fixed("punctuation:no_comma", "In your entire response, refrain from the use of any commas.",
       {"type": "no_commas"})


def convert_record(record: dict[str, Any]) -> dict[str, Any]:
  """One IFEval row -> one task dict; raises DataError listing every malformed field."""
  return convert_with(record, source=SOURCE, benchmark="IFEval", rules=RULES,
                      heuristic=HEURISTIC_IDS)
