"""Official-mode checkers of IFBench's words:* ids: each reproduces the verdict of
allenai/IFBench's check_following for that id (quirks included; each quirk named in a
comment and listed in docs/evaluation.md).

Most of these checkers see words as the official code does: ASCII punctuation
(string.punctuation) deleted or stripped, then str.split() on whitespace. Unicode
punctuation (curly quotes, dashes, ellipses) is left in place and is part of a word.
"""

from __future__ import annotations

import collections
import re
import string
from collections.abc import Callable, Mapping
from typing import Any

import syllapy

from harnessrl_jax.errors import ConfigError, DataError
from harnessrl_jax.eval.ifverify import text

Checker = Callable[[str, Mapping[str, Any], str], bool]

_PUNCT = string.punctuation
_PUNCT_SPACE = _PUNCT + " "  # what the official code strips from word/paragraph ends
_DELETE_PUNCT = str.maketrans("", "", _PUNCT)
_ALPHABET = string.ascii_lowercase
_CONSONANTS = frozenset("bcdfghjklmnpqrstvwxyz")  # "y" counts as a consonant
# The official list stops at 97: a longer word fails even when its length is prime.
_PRIMES = frozenset({2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67,
                     71, 73, 79, 83, 89, 97})
_TAGGER = "averaged_perceptron_tagger_eng"


def _no_punct(s: str) -> str:
  """Deletes ASCII punctuation everywhere (so "don't" -> "dont", "well-known" -> "wellknown")."""
  return s.translate(_DELETE_PUNCT)


def _missing(iid: str, name: str) -> DataError:
  # The official build_description draws a random value when an argument is absent; a
  # verdict against a random argument cannot be reproduced, so the row is malformed.
  return DataError([f"{iid}: kwargs lacks a usable {name!r} (the official code would draw a "
                    "random one)"])


def _int_arg(kwargs: Mapping[str, Any], name: str, iid: str, *, zero_ok: bool) -> int:
  """An integer argument; IFBench stores some as floats (4.0)."""
  value = kwargs.get(name)
  if isinstance(value, bool) or not (isinstance(value, int) or
                                     (isinstance(value, float) and value.is_integer())):
    raise _missing(iid, name)
  if value < 0 or (value == 0 and not zero_ok):  # official: None/<0 (or falsy) -> random
    raise _missing(iid, name)
  return int(value)


def _keyword_arg(kwargs: Mapping[str, Any], iid: str) -> str:
  value = kwargs.get("keyword")
  if not isinstance(value, str) or not value:
    raise _missing(iid, "keyword")
  return value.strip()  # official: keyword.strip()


def _pos_tags(tokens: list[str]) -> list[tuple[str, str]]:
  """nltk.pos_tag, with a ConfigError naming the tagger data when it is not installed."""
  nltk = text.nltk()
  try:
    return nltk.pos_tag(tokens)
  except LookupError as e:
    named = re.search(r"Resource '?([\w.]+)'? not found", str(e))
    resource = named.group(1) if named else _TAGGER
    raise ConfigError(
        f"official scoring of words:start_verb needs NLTK's POS tagger data {resource!r}, "
        f"which is not under any NLTK data path ({', '.join(nltk.data.path[:4])}, ...): on a "
        f"machine with internet access run `python -m nltk.downloader -d DIR {resource}` and "
        "set NLTK_DATA to DIR (the directory also holding punkt_tab and stopwords)") from e


# --- checkers, one per id ------------------------------------------------------------------


def _alphabet(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  # Quirks: ASCII punctuation is deleted first (so "x-ray" is one word starting with "x");
  # the chain may start at any letter; a first word starting with a non-letter fails, a later
  # word starting with a digit or unicode symbol breaks the chain.
  words = _no_punct(response).strip(_PUNCT_SPACE).split()
  if not words:
    return False
  letter = words[0][0].lower()
  if letter not in _ALPHABET:  # ("İ".lower() is 2 characters: not a letter here either)
    return False
  for word in words[1:]:
    word = word.strip(_PUNCT_SPACE).lower()
    if not word:
      continue
    letter = _ALPHABET[(_ALPHABET.index(letter) + 1) % 26]
    if word[0] != letter:
      return False
  return True


def _consonants(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  # Quirks: words are whitespace-split tokens with their punctuation attached, so a "-" bullet,
  # a number or "I" fails; punctuation between letters breaks a cluster; "y" is a consonant.
  for word in response.lower().strip().split():
    if not any(a in _CONSONANTS and b in _CONSONANTS for a, b in zip(word, word[1:])):
      return False
  return True


def _keywords_specific_position(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  iid = "words:keywords_specific_position"
  keyword = _keyword_arg(kwargs, iid)
  # official: `if not n` -> random. An integral float (22.0) is taken as an int here, where
  # the official indexing would crash; the published rows hold ints.
  n = _int_arg(kwargs, "n", iid, zero_ok=False)
  m = _int_arg(kwargs, "m", iid, zero_ok=False)
  sentences = text.sentences(response)
  if len(sentences) < n:
    return False
  # Quirk: words are nltk.word_tokenize tokens holding a letter or digit, so contractions
  # count twice ("don't" -> "do", "n't") while "--" or "..." are not words.
  words = text.word_tokens_without_punctuation(sentences[n - 1])
  return len(words) >= m and words[m - 1].lower() == keyword.lower()


def _last_first(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  # Quirks: sentences are NLTK Punkt sentences; only the punctuation at the end of a sentence
  # and at the start of the next is stripped, so "cat," opening the next sentence does not
  # match "cat"; a one-sentence response passes.
  sentences = text.sentences(response)
  for prev, nxt in zip(sentences, sentences[1:]):
    last = prev.rstrip(_PUNCT_SPACE).split()
    first = nxt.lstrip(_PUNCT_SPACE).split()
    if not last or not first or last[-1].lower() != first[0].lower():
      return False
  return True


def _no_consecutive(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  # Quirks: ASCII punctuation deleted first (a lone "-" vanishes, "x-ray" is one word); digits
  # and unicode symbols count as first letters ("1 10" fails).
  words = _no_punct(response.lower()).split()
  return all(a[0] != b[0] for a, b in zip(words, words[1:]))


def _odd_even_syllables(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  # Quirks: syllables by syllapy (dictionary, else heuristic) after deleting ASCII punctuation;
  # a word holding a digit counts 0 syllables, i.e. even; one word passes.
  parities = [syllapy.count(w) % 2 for w in _no_punct(response).lower().split()]
  return all(a != b for a, b in zip(parities, parities[1:]))


def _palindrome(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  # Quirks: the same palindrome repeated counts each time; digit strings count ("12321");
  # ASCII punctuation is deleted first ("level," and "a-b-b-a-x" -> "abbax" is not one).
  words = _no_punct(response).lower().split()
  return sum(1 for w in words if len(w) >= 5 and w == w[::-1]) >= 10


def _paragraph_last_first(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  # Quirks: paragraphs are single lines (split on "\n"); only the paragraph's ends lose their
  # punctuation, so "Hello, world hello" fails ("hello," != "hello"); a one-word paragraph
  # passes; blank lines are skipped.
  for paragraph in response.split("\n"):
    words = paragraph.strip().lower().strip(_PUNCT_SPACE).split()
    if words and words[0] != words[-1]:
      return False
  return True


def _prime_lengths(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  # Quirks: ASCII punctuation deleted first ("don't" has 4 letters and fails); "a" and "I"
  # (length 1) fail; lengths count code points, unicode punctuation included.
  return all(len(w) in _PRIMES for w in _no_punct(response).split())


def _repeats(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  # Quirks: every word counts, stop words included ("the" 5 times fails small_n=4); ASCII
  # punctuation deleted first, case folded.
  small_n = _int_arg(kwargs, "small_n", "words:repeats", zero_ok=True)
  counts = collections.Counter(_no_punct(response.lower()).split())
  return all(c <= small_n for c in counts.values())


def _start_verb(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  # The first token's Penn Treebank tag, tagged in context of the whole response, must
  # contain "VB" (VB, VBD, VBG, VBN, VBP, VBZ). Quirk: a leading "*" or "#" is a token.
  tokens = text.word_tokens(response)
  return bool(tokens) and "VB" in _pos_tags(tokens)[0][1]


def _vowel(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  # Quirks: at most 3 distinct vowels (a, e, i, o, u; not "y", not accented) over the whole
  # response, not per word; more than one line (a "\n" after stripping) fails.
  paragraphs = response.strip().split("\n")
  if len(paragraphs) != 1:
    return False
  return len(set(paragraphs[0].lower()) & set("aeiou")) <= 3


def _words_position(response: str, kwargs: Mapping[str, Any], prompt: str) -> bool:
  keyword = _keyword_arg(kwargs, "words:words_position").lower()
  words = text.word_tokens(response)
  if len(words) < 2:
    return False
  # Quirk: `token in string.punctuation` is a substring test, so a final "." or "?)" is
  # skipped (the second-to-last word is then words[-3]) but "..." or a closing quote
  # (tokenized as "''") is not, and then words[-2] is that quote's neighbour.
  if words[-1] in _PUNCT:
    return len(words) >= 3 and words[1].lower() == words[-3].lower() == keyword
  return words[1].lower() == words[-2].lower() == keyword


CHECKERS: dict[str, Checker] = {
    "words:alphabet": _alphabet,
    "words:consonants": _consonants,
    "words:keywords_specific_position": _keywords_specific_position,
    "words:last_first": _last_first,
    "words:no_consecutive": _no_consecutive,
    "words:odd_even_syllables": _odd_even_syllables,
    "words:palindrome": _palindrome,
    "words:paragraph_last_first": _paragraph_last_first,
    "words:prime_lengths": _prime_lengths,
    "words:repeats": _repeats,
    "words:start_verb": _start_verb,
    "words:vowel": _vowel,
    "words:words_position": _words_position,
}
