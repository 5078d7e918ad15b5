"""The official verifiers' text units (IFBench's instructions_util): sentences by NLTK's
English Punkt model, words as runs of \\w characters, NLTK's English stop words.

NLTK's data is not fetched here: set NLTK_DATA to a directory holding
tokenizers/punkt_tab/english and corpora/stopwords/english (`python -m nltk.downloader
punkt_tab stopwords` on a machine with internet access).
"""

from __future__ import annotations

import functools
import re

from harnessrl_jax.errors import ConfigError

_WORD = re.compile(r"\w+")


@functools.cache
def nltk():
  """The nltk module, once its English Punkt and stop-word data are known to load."""
  import nltk as _nltk  # pylint: disable=g-import-not-at-top
  for resource in ("tokenizers/punkt_tab/english/", "corpora/stopwords/english"):
    try:
      _nltk.data.find(resource)
    except LookupError as e:
      raise ConfigError(
          f"official instruction-following scoring needs NLTK's {resource!r}, which is not "
          f"under any NLTK data path ({', '.join(_nltk.data.path[:4])}, ...): set NLTK_DATA "
          "to a directory holding tokenizers/punkt_tab/english and corpora/stopwords/english "
          "(python -m nltk.downloader punkt_tab stopwords)") from e
  return _nltk


def sentences(text: str) -> list[str]:
  """nltk.sent_tokenize (English Punkt), as the official split_into_sentences."""
  return nltk().sent_tokenize(text)


def words(text: str) -> list[str]:
  """Runs of \\w characters (nltk's RegexpTokenizer(r"\\w+")), as the official count_words."""
  return _WORD.findall(text)


def count_words(text: str) -> int:
  return len(words(text))


@functools.cache
def stopwords() -> frozenset[str]:
  return frozenset(nltk().corpus.stopwords.words("english"))


def count_stopwords(text: str) -> int:
  """Words (as count_words) whose lower case is an English stop word."""
  sw = stopwords()
  return sum(1 for w in words(text) if w.lower() in sw)


def word_tokens(text: str) -> list[str]:
  """nltk.word_tokenize (Treebank words after Punkt sentences): contractions split in two."""
  return nltk().word_tokenize(text)


def word_tokens_without_punctuation(text: str) -> list[str]:
  """word_tokens without tokens that hold no letter or digit."""
  return [t for t in word_tokens(text) if any(ch.isalnum() for ch in t)]
