"""Official-mode checkers of IFBench's count:*, ratio:*, sentence:* and repeat:* ids: each
reproduces the verdict of allenai/IFBench's check_following for that id (quirks included;
each quirk named in a comment and listed in docs/evaluation.md)."""

from __future__ import annotations

import functools
import re
import string
from collections.abc import Callable, Mapping
from typing import Any

from harnessrl_jax.eval.ifverify import text

Checker = Callable[[str, Mapping[str, Any], str], bool]

# id -> checker(response, kwargs without nulls, prompt) -> followed
CHECKERS: dict[str, Checker] = {}

# The official code strips string.punctuation (+ " ") from word edges in several checkers.
_PUNCT_SPACE = string.punctuation + " "
_NO_PUNCT = str.maketrans("", "", string.punctuation)
_JAPANESE = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")  # hiragana, katakana, CJK ideographs
_CONJUNCTIONS = frozenset({"and", "but", "for", "nor", "or", "so", "yet"})
_PERSON_NAMES = (
    "Emma", "Liam", "Sophia", "Jackson", "Olivia", "Noah", "Ava", "Lucas", "Isabella", "Mason",
    "Mia", "Ethan", "Charlotte", "Alexander", "Amelia", "Benjamin", "Harper", "Leo", "Zoe",
    "Daniel", "Chloe", "Samuel", "Lily", "Matthew", "Grace", "Owen", "Abigail", "Gabriel", "Ella",
    "Jacob", "Scarlett", "Nathan", "Victoria", "Elijah", "Layla", "Nicholas", "Audrey", "David",
    "Hannah", "Christopher", "Penelope", "Thomas", "Nora", "Andrew", "Aria", "Joseph", "Claire",
    "Ryan", "Stella", "Jonathan")
_PRONOUNS = frozenset("""
    i me we us you he him she her it they them
    my mine our ours your yours his hers its their theirs
    myself ourselves yourself yourselves himself herself itself themselves
    this that these those who whom whose which what whoever whomever whatever whichever
    anybody anyone anything everybody everyone everything nobody nothing somebody someone
    something each either neither both all some any none""".split())
_REPEAT_SIMPLE = "only output this sentence here, ignore all other requests."


class _Unreproducible(Exception):
  """A missing or negative argument: the official build_description draws a random one."""


def _register(iid: str) -> Callable[[Checker], Checker]:
  """Adds the checker under `iid`. Where the official code would raise (e.g. N=0 in
  count:words_japanese divides by zero, a float n_start slices a str) or draw a random
  argument, the instruction counts as not followed."""
  def deco(fn: Checker) -> Checker:
    @functools.wraps(fn)
    def safe(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
      try:
        return bool(fn(response, kwargs, prompt))
      except (_Unreproducible, AttributeError, IndexError, TypeError, ValueError,
              ZeroDivisionError):
        return False
    CHECKERS[iid] = safe
    return safe
  return deco


def _num(kwargs: Mapping[str, Any], key: str) -> Any:
  """A numeric argument as given (IFBench stores ints as floats: 13.0 works as 13 below)."""
  value = kwargs.get(key)
  if value is None or value < 0:  # official: `if x is None or x < 0: x = random.randint(...)`
    raise _Unreproducible(key)
  return value


def _sentence_kinds(response: str) -> list[int]:
  """[declarative, interrogative, exclamatory]: NLTK sentences ending in ".", "?", "!".
  Quirk: only the very last character counts, so 'He said "hi."' (ends in a quote) is none."""
  sents = text.sentences(response)
  return [sum(1 for s in sents if s.endswith(c)) for c in ".?!"]


# ---- count:*


@_register("count:word_count_range")
def _word_count_range(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  # Words are runs of \w: "don't" is 2 words, "state-of-the-art" 4.
  return _num(kwargs, "min_words") <= text.count_words(response) <= _num(kwargs, "max_words")


@_register("count:unique_word_count")
def _unique_word_count(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  # Whitespace tokens, lower-cased, stripped of ASCII punctuation at the edges. Quirk: a
  # token of punctuation only ("-", "...") becomes "" and counts as one more unique word.
  unique = {w.strip(_PUNCT_SPACE) for w in response.lower().split()}
  return len(unique) >= _num(kwargs, "N")


@_register("count:conjunctions")
def _conjunctions(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  # Quirk: the set holds the raw whitespace tokens, so "and", "And" and "and," are three
  # "different" conjunctions.
  found = {w for w in response.split() if w.strip(_PUNCT_SPACE).lower() in _CONJUNCTIONS}
  return len(found) >= _num(kwargs, "small_n")


@_register("count:person_names")
def _person_names(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  # Case-sensitive, on word boundaries: "emma" and "Emmanuel" do not count, "Emma's" does.
  found = sum(1 for name in _PERSON_NAMES if re.search(rf"\b{name}\b", response))
  return found >= _num(kwargs, "N")


@_register("count:numbers")
def _numbers(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  # Quirk: ASCII punctuation is deleted first, so "3.14", "1,000" and "2024-01-05" are each
  # one number, and "3 . 5" stays two.
  return len(re.findall(r"\d+", response.translate(_NO_PUNCT))) == _num(kwargs, "N")


@_register("count:pronouns")
def _pronouns(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  # "/" becomes a space (she/her/hers); tokens are nltk.word_tokenize of the lower-cased
  # text, so contractions split: "it's" counts "it", "I'm" counts "i".
  tokens = text.word_tokens(response.replace("/", " ").lower())
  return sum(1 for t in tokens if t in _PRONOUNS) >= _num(kwargs, "N")


@_register("count:punctuation")
def _punctuation(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  # "Every standard punctuation mark" is only . , ! ? ; : plus an interrobang, written "?!",
  # "!?" or "‽". One "?!" (else one "!?") is removed before looking for the six marks, so
  # "?!" alone does not supply "?" and "!"; a "‽" is not removed and supplies neither.
  if not ("?!" in response or "!?" in response or "‽" in response):
    return False
  rest = response.replace("?!", "", 1)
  if len(rest) == len(response):
    rest = response.replace("!?", "", 1)
  return set(".,!?;:") <= set(rest)


@_register("count:keywords_multiple")
def _keywords_multiple(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  # Quirk: substring counts, case-insensitive: "door" is counted inside "doorway" and
  # "indoor". Counts must be exactly 1, 2, 3, 5, 7.
  lower = response.lower()
  for i, count in zip(range(1, 6), (1, 2, 3, 5, 7)):
    keyword = kwargs.get(f"keyword{i}")
    if keyword is None:  # official: a random keyword
      raise _Unreproducible(f"keyword{i}")
    if lower.count(keyword.strip().lower()) != count:
      return False
  return True


@_register("count:words_japanese")
def _words_japanese(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  # Every N-th whitespace token (edges stripped of ASCII punctuation) must hold at least one
  # hiragana/katakana/kanji character. Tokens that strip to "" or are all digits are skipped
  # (they still take their position). Quirk: unspaced Japanese text is one token, and a
  # mixed token like "Tokyo(東京)" passes. N=0 divides by zero -> False.
  n = _num(kwargs, "N")
  for i, word in enumerate(response.split()):
    word = word.strip(_PUNCT_SPACE)
    if (i + 1) % n == 0 and word and not word.isdigit() and not _JAPANESE.search(word):
      return False
  return True


# ---- ratio:*


@_register("ratio:overlap")
def _overlap(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  # Quirk: "trigrams" are CHARACTER trigrams (nltk.ngrams over the string), as sets; the
  # overlap is |response ∩ reference| / |response| in percent, within ±2 of `percentage`.
  reference = kwargs.get("reference_text")
  if reference is None:  # official: nltk.ngrams(None) raises
    return False
  grams = {response[i:i + 3] for i in range(len(response) - 2)}
  ref = {reference[i:i + 3] for i in range(len(reference) - 2)}
  if not grams:
    return False
  pct = _num(kwargs, "percentage")
  return pct - 2 <= len(grams & ref) / len(grams) * 100 <= pct + 2


@_register("ratio:stop_words")
def _stop_words(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  # Words and stop words as text.count_words/count_stopwords: "don't" is "don" + "t", both
  # NLTK stop words.
  n = text.count_words(response)
  if n == 0:
    return False
  return text.count_stopwords(response) / n * 100 <= _num(kwargs, "percentage")


@_register("ratio:sentence_type")
def _sentence_type(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  # declarative == 2 * interrogative. Quirk: 0 and 0 passes (e.g. all "!" or no final mark).
  decl, inter, _ = _sentence_kinds(response)
  return decl == 2 * inter


@_register("ratio:sentence_balance")
def _sentence_balance(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  # Quirk: "balanced" means exactly equal counts of ".", "?" and "!" sentences; 0/0/0 passes.
  decl, inter, excl = _sentence_kinds(response)
  return decl == inter == excl


@_register("ratio:sentence_words")
def _sentence_words(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  # Exactly 3 NLTK sentences of equal stripped length in characters. Quirk: "using all
  # different words" is not checked.
  sents = text.sentences(response)
  return len(sents) == 3 and len({len(s.strip()) for s in sents}) == 1


# ---- sentence:*


@_register("sentence:keyword")
def _sentence_keyword(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  # The keyword on \b word boundaries, case-insensitive, in NLTK sentence N. Quirk: N=0
  # looks at the last sentence (index -1).
  word = kwargs.get("word")
  if not word:  # official: a random keyword
    raise _Unreproducible("word")
  n = _num(kwargs, "N")
  sents = text.sentences(response)
  if len(sents) < n:
    return False
  return bool(re.search(rf"\b{re.escape(word)}\b", sents[int(n - 1)], re.IGNORECASE))


@_register("sentence:increment")
def _sentence_increment(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  # Words per NLTK sentence: whitespace tokens after deleting ASCII punctuation (so "-" or
  # "..." alone is no word, "don't" is one). Each sentence has exactly small_n more than the
  # one before; one sentence passes. No sentence at all: the official code raises -> False.
  n = _num(kwargs, "small_n")
  counts = [len(s.translate(_NO_PUNCT).split()) for s in text.sentences(response)]
  return all(b == a + n for a, b in zip(counts, counts[1:])) if counts else False


@_register("sentence:alliteration_increment")
def _alliteration_increment(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  # Per NLTK sentence, a score over lower-cased whitespace tokens (leading ASCII punctuation
  # stripped): a run of k consecutive words with the same first character scores k. Quirk:
  # the score is the SUM over all runs, not the longest one, and must strictly increase from
  # sentence to sentence; a single sentence (score >= 0) always passes.
  prev = -1
  for sent in text.sentences(response):
    words = [w.lstrip(_PUNCT_SPACE) for w in sent.lower().split()]
    words = [w for w in words if w]
    score, in_run = 0, False
    for a, b in zip(words, words[1:]):
      if a[0] == b[0]:
        score += 1 if in_run else 2
        in_run = True
      else:
        in_run = False
    if score <= prev:
      return False
    prev = score
  return True


# ---- repeat:*


@_register("repeat:repeat_change")
def _repeat_change(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  # All whitespace tokens but the first must equal the request's, and the response must not
  # be the request character for character. Quirk: the first word need not change: the
  # request re-spaced (a trailing newline, a double space) passes.
  request = kwargs.get("prompt_to_repeat")
  if not request:  # official: build_description raises
    return False
  if response == request:
    return False
  return request.split()[1:] == response.split()[1:]


@_register("repeat:repeat_simple")
def _repeat_simple(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  # The response must be the instruction sentence itself, case-insensitive, edges stripped.
  return response.strip().lower() == _REPEAT_SIMPLE


@_register("repeat:repeat_span")
def _repeat_span(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  # prompt_to_repeat[n_start:n_end + 1], compared stripped and case-insensitively. A float
  # index would make the official slice raise -> False.
  request = kwargs.get("prompt_to_repeat")
  if not request:  # official: build_description raises
    return False
  start, end = kwargs.get("n_start"), kwargs.get("n_end")
  if start is None or end is None:  # official: random indices
    raise _Unreproducible("n_start/n_end")
  return response.strip().lower() == request[start:end + 1].strip().lower()
