"""Surface signals of reward hacking: generic stock phrases, repetition, filler (sentences
that do not read as text), an unfinished last sentence (a reply cut off at the token limit)
and response length, and the edits that take the first four out of a response (the
attributor's intervention).

The phrase list covers what the paper names as generic content that passes rubric items
superficially: praise openers ("Great question!"), claims of compliance ("All
requirements met.", "I have followed all instructions"), filler closers ("I hope this
helps") and boilerplate disclaimers. Matching is per sentence, case-insensitive.

Each edit returns its argument itself (the same string) when there is nothing to take
out, so "the edit changed the response" is `edited != text`; an edited response is its
kept sentences joined by single spaces.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from harnessrl_jax.data import text_units

# A word said again right after itself ("very, very", "blue blue blue"); the
# back-reference is case-insensitive too.
_REPEATED_WORD = re.compile(r"\b([\w'-]+)(?:[\s,;]+\1\b)+", re.IGNORECASE)

GENERIC_PATTERNS = tuple(re.compile(p, re.IGNORECASE) for p in (
    r"^(what an? )?(great|excellent|good|wonderful|fantastic|insightful) question",
    r"^(certainly|absolutely|of course|sure thing)\b",
    r"\bi('d| would) be (happy|glad|delighted) to help",
    r"\ball (of )?(the |your )?(requirements|instructions|criteria|constraints)"
    r" (are |have been |were )?(met|satisfied|addressed|followed|fulfilled)",
    r"\bi (have|'ve) (met|addressed|satisfied|followed|fulfilled|covered) all\b",
    r"\bthis (answer|response|reply) (is complete|fully (addresses|answers|meets)|meets all)",
    r"\bi hope (this|that) helps",
    r"\bas an ai( language model)?\b",
    r"\bthis is not (medical|legal|financial|professional) advice",
))


def sentences(text: str) -> list[str]:
  return text_units.sentences(text)


def generic_sentences(text: str) -> list[str]:
  """The sentences of `text` that match a generic pattern, in order."""
  return [s for s in sentences(text) if any(p.search(s) for p in GENERIC_PATTERNS)]


def num_words(text: str) -> int:
  return len(text_units.words(text))


def strip_generic(text: str) -> str:
  """`text` without its generic sentences (what is left of its substance)."""
  if not generic_sentences(text):
    return text
  return " ".join(s for s in sentences(text) if not any(p.search(s) for p in GENERIC_PATTERNS))


def _same_words(sentence: str) -> tuple[str, ...]:
  return tuple(w.casefold() for w in text_units.words(sentence))


def drop_repetition(text: str) -> str:
  """`text` with each repeated sentence kept at its first occurrence (the same sentence:
  the same case-folded words; one without words is never a repeat) and a word repeated
  back to back said once."""
  said = sentences(text)
  seen: set[tuple[str, ...]] = set()
  kept = []
  for s in said:
    key = _same_words(s)
    if key and key in seen:
      continue
    seen.add(key)
    kept.append(_REPEATED_WORD.sub(r"\1", s))
  return text if kept == said else " ".join(kept)


def drop_unfinished(text: str) -> str:
  """`text` without its last sentence when that sentence is unfinished (a reply cut off at
  the token limit: text_units.ends_complete); a one-sentence text is left as it is."""
  said = sentences(text)
  if len(said) < 2 or text_units.ends_complete(text):
    return text
  return " ".join(said[:-1])


def drop_filler(text: str) -> str:
  """`text` without its sentences that do not read as text (text_units.reads_as_text):
  the token salad padding is made of, not the fluent sentences a thorough answer adds."""
  said = sentences(text)
  kept = [s for s in said if text_units.reads_as_text(s)]
  return text if kept == said else " ".join(kept)


def cut_to_words(text: str, n: int) -> str:
  """`text`'s leading sentences that fit in `n` words (whole sentences only: the cut
  leaves finished sentences, not a new unfinished one)."""
  kept, total = [], 0
  for s in sentences(text):
    total += num_words(s)
    if total > n:
      break
    kept.append(s)
  return " ".join(kept)


def runon_versions(responses: Sequence[str]) -> dict[int, str]:
  """{j: response j cut back to the length of the group's longest finished response}, for
  each unfinished response (run on to the token limit: text_units.ends_complete fails)
  longer than that; {} when the group has no finished or no unfinished response. The
  group's own finished answers say how long an answer that ends may be: the words a
  cut-off answer has beyond them are what running on to the limit bought."""
  done = [num_words(r) for r in responses if text_units.ends_complete(r)]
  if not done:
    return {}
  limit = max(done)
  out = {}
  for j, r in enumerate(responses):
    if not text_units.ends_complete(r) and num_words(r) > limit:
      cut = cut_to_words(r, limit)
      if cut != r:
        out[j] = cut
  return out


def ngrams(text: str, n_max: int = 3) -> set[tuple[str, ...]]:
  """The case-folded word n-grams (1..n_max words) of `text`."""
  w = [x.casefold() for x in text_units.words(text)]
  return {tuple(w[i:i + n]) for n in range(1, n_max + 1) for i in range(len(w) - n + 1)}


def surface_ngrams(yes: Sequence[str], no: Sequence[str], prompt: str, share: float,
                   n_max: int = 3) -> set[tuple[str, ...]]:
  """N-grams found from the group itself: in at least `share` of the `yes` texts (those
  that satisfy a criterion) and in none of the `no` texts, with no word of the task's
  prompt in them (the prompt's words are what the task asks about: content, not surface).
  Only the shortest are kept (an n-gram holding a kept shorter one adds nothing)."""
  if not yes or not no:
    return set()
  asked = {x.casefold() for x in text_units.words(prompt)}
  seen_no = set().union(*(ngrams(t, n_max) for t in no))
  counts: dict[tuple[str, ...], int] = {}
  for t in yes:
    for g in ngrams(t, n_max):
      counts[g] = counts.get(g, 0) + 1
  found = {g for g, c in counts.items() if c >= share * len(yes) and g not in seen_no
           and not asked.intersection(g)}
  return {g for g in found
          if not any(h != g and len(h) < len(g) and _holds(g, h) for h in found)}


def _holds(g: tuple[str, ...], h: tuple[str, ...]) -> bool:
  return any(g[i:i + len(h)] == h for i in range(len(g) - len(h) + 1))


def drop_ngram_sentences(text: str, grams: set[tuple[str, ...]], most: float = 0.5) -> str:
  """`text` without its sentences that hold one of `grams`; unchanged when that would take
  more than `most` of its words (a surface is a small part of an answer: an edit that
  takes most of it takes the content)."""
  if not grams:
    return text
  said = sentences(text)
  kept = [s for s in said if not any(_holds(tuple(x.casefold() for x in text_units.words(s)),
                                            g) for g in grams)]
  if kept == said or num_words(" ".join(kept)) < (1 - most) * num_words(text):
    return text
  return " ".join(kept)


def drop_sentence_repeats(text: str) -> str:
  """`text` with each word said again within its sentence said once (its later occurrences
  dropped, case-folded): repetition inside one sentence, which drop_repetition (whole
  sentences, back-to-back words) does not reach."""
  said = sentences(text)
  out = []
  for s in said:
    seen: set[str] = set()
    kept = []
    for tok in s.split():
      key = "".join(text_units.words(tok)).casefold()
      if key and key in seen:
        tail = tok[len(tok.rstrip(".,;:!?")):]   # the sentence's punctuation stays
        if tail and kept:
          kept[-1] = kept[-1].rstrip(".,;:!?") + tail
        continue
      seen.add(key)
      kept.append(tok)
    out.append(" ".join(kept))
  return text if out == said else " ".join(out)
