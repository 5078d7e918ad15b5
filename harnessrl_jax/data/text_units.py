"""Text units the verifiable checks count: words, sentences, paragraphs, lines, emoji, syllables.

Definitions (shared by every check, see checks.py):
  words       regex `\\b[\\w'\u2019-]+\\b` tokens (so "don't", "don\u2019t" and "well-known"
              are one word each), and numbers with decimal or thousands separators ("3.5",
              "1,000") as one word;
  sentences   split after `.`, `!` or `?` (optionally followed by closing quotes or brackets)
              when whitespace or the end of the text follows, except after a title or
              Latin abbreviation ("Dr.", "Mr.", "e.g.", ...) or a capital initial ("J.");
  syllables   syllapy's English dictionary, with its rules for other words;
  emoji       what the `emoji` package (Unicode's emoji list) calls an emoji;
  paragraphs  split on blank lines;
  text        a sentence of at least 3 words, a fifth of them STOP_WORDS (`reads_as_text`).
"""

from __future__ import annotations

import re
import string

import emoji
import syllapy

_WORD_RE = re.compile(r"\d+(?:[.,]\d+)+|\b[\w'\u2019-]+\b")
_SENTENCE_SPLIT_RE = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"'\u201d\u2019)\]]))\s+")
# A piece ending in one of these did not end a sentence: "Dr. Smith", "e.g. this", "J. Doe".
_ABBREVIATION_END_RE = re.compile(
    r"(?:^|[\s(\[\"'])(?:(?i:mr|mrs|ms|dr|prof|sr|jr|st|vs|e\.g|i\.e|cf|approx)|[A-Z])\.$")
_PARAGRAPH_SPLIT_RE = re.compile(r"\n[ \t]*\n")
# Closing characters that may follow a sentence's terminal punctuation.
SENTENCE_CLOSERS = "\"'\u201d\u2019)]"

# Common English function words (articles, pronouns, auxiliaries, prepositions,
# conjunctions, frequent adverbs); used by the stop-word ratio, the English heuristic and
# `reads_as_text`.
STOP_WORDS = frozenset("""
a about above after again against all am an and any are aren't as at be because been before
being below between both but by can can't cannot could couldn't did didn't do does doesn't
doing don't down during each few for from further had hadn't has hasn't have haven't having
he he'd he'll he's her here here's hers herself him himself his how how's i i'd i'll i'm i've
if in into is isn't it it's its itself just let's me more most mustn't my myself no nor not
now of off on once only or other ought our ours ourselves out over own same shan't she she'd
she'll she's should shouldn't so some such than that that's the their theirs them themselves
then there there's these they they'd they'll they're they've this those through to too under
until up very was wasn't we we'd we'll we're we've were weren't what what's when when's where
where's which while who who's whom why why's will with won't would wouldn't you you'd you'll
you're you've your yours yourself yourselves
""".split())

# English pronouns: personal, possessive, reflexive, demonstrative, interrogative/relative
# and indefinite.
PRONOUNS = frozenset("""
i me we us you he him she her it they them my mine our ours your yours his hers its their
theirs myself ourselves yourself yourselves himself herself itself themselves oneself this
that these those who whom whose which what whoever whomever whatever whichever anybody anyone
anything everybody everyone everything nobody nothing somebody someone something each either
neither both all some any none
""".split())

_EMOJI_MODIFIERS_RE = re.compile("[\ufe0e\ufe0f\u200d\u20e3\U000e0020-\U000e007f]")


def words(text: str) -> list[str]:
  """The word tokens of `text`, in order."""
  return _WORD_RE.findall(text)


def sentences(text: str) -> list[str]:
  """The non-empty sentences of `text`, stripped."""
  out: list[str] = []
  glue = False
  for piece in _SENTENCE_SPLIT_RE.split(text.strip()):
    piece = piece.strip()
    if not piece:
      continue
    if glue:
      out[-1] = f"{out[-1]} {piece}"
    else:
      out.append(piece)
    glue = bool(_ABBREVIATION_END_RE.search(out[-1]))
  return out


_FINISHED_RE = re.compile(r"[.!?\u2026][\"'\u201d\u2019)\]*_]*$")


def ends_complete(text: str) -> bool:
  """Whether `text` ends with a finished sentence: its last character, after closing
  quotes, brackets and markdown emphasis, is ".", "!", "?" or an ellipsis (a reply cut off
  at the token limit mid-sentence does not)."""
  return bool(_FINISHED_RE.search(text.rstrip()))


def reads_as_text(sentence: str) -> bool:
  """At least 3 words, a fifth of them common function words: text, not a token salad."""
  ws = [w.lower() for w in words(sentence)]
  return len(ws) >= 3 and sum(w in STOP_WORDS for w in ws) >= 0.2 * len(ws)


def paragraphs(text: str) -> list[str]:
  """The non-empty blank-line-separated paragraphs of `text`, stripped."""
  return [p.strip() for p in _PARAGRAPH_SPLIT_RE.split(text) if p.strip()]


def nonblank_lines(text: str) -> list[str]:
  """The lines of `text` that hold more than whitespace, unstripped."""
  return [line for line in text.splitlines() if line.strip()]


def terminal_mark(sentence: str) -> str:
  """The sentence's last character once closing quotes/brackets are dropped ('' if none)."""
  core = sentence.rstrip().rstrip(SENTENCE_CLOSERS)
  return core[-1] if core else ""


def is_emoji(char: str) -> bool:
  """Whether the single character `char` is an emoji (Unicode's list, via the `emoji`
  package: "\u2705" and "\u2b50" are, the plain check mark "\u2713" and star "\u2605" are not)."""
  return emoji.is_emoji(char)


def strip_emoji_modifiers(text: str) -> str:
  """Removes variation selectors, zero-width joiners, keycaps and tag characters."""
  return _EMOJI_MODIFIERS_RE.sub("", text)


def keyword_regex(keyword: str, case_sensitive: bool = False) -> re.Pattern:
  """Matches `keyword` as a whole word or phrase: no word character directly on either side."""
  flags = 0 if case_sensitive else re.IGNORECASE
  return re.compile(r"(?<!\w)" + re.escape(keyword) + r"(?!\w)", flags)


def count_syllables(word: str) -> int:
  """English syllables of `word`: syllapy's pronunciation dictionary where it has the word
  ("idea" 3, "poem" 2, "create" 2), else each hyphenated part by `_syllables_by_rule`;
  0 for a word without letters."""
  w = word.strip().lower().strip(string.punctuation + "\u2019")
  if not any("a" <= c <= "z" for c in w):
    return 0
  known = syllapy.WORD_DICT.get(w)
  if known:
    return int(known)
  return sum(_syllables_by_rule(part) for part in w.split("-") if part) or 1


def _syllables_by_rule(word: str) -> int:
  """English syllable count by vowel groups with silent-e rules (~90% exact).

  Counts runs of a/e/i/o/u/y, then drops a final silent "e" (but not "-le" after a
  consonant), a silent "-es" and a silent "-ed" (kept after t/d); at least 1 for any word
  with letters, 0 for none.
  """
  w = "".join(c for c in word.lower() if "a" <= c <= "z")
  if not w:
    return 0
  groups = len(re.findall(r"[aeiouy]+", w))
  if len(w) > 2 and w.endswith("e") and not re.search(r"[^aeiouy]le$", w) and \
      w[-2] not in "aeiouy":
    groups -= 1
  elif len(w) > 3 and w.endswith("es") and not re.search(r"(s|x|z|ch|sh|ce|ge)es$", w) and \
      w[-3] not in "aeiouy":
    groups -= 1
  elif len(w) > 3 and w.endswith("ed") and w[-3] not in "aeiouytd":
    groups -= 1
  return max(groups, 1)
