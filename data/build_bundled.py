"""Writes the bundled task set: data/train.jsonl and data/heldout.jsonl.

The tasks were written for harnessrl_jax (not derived from any benchmark): hand-written topic
lists for five domains, combined with criterion templates. The output is deterministic (fixed
seeds, pure templates, no network, no model calls), so

  python data/build_bundled.py                 # rewrites data/*.jsonl
  python data/build_bundled.py --out-dir /tmp  # writes elsewhere
  python data/build_bundled.py --stats         # also prints per-domain statistics

gives byte-identical files every time. Sizes and criterion mix are tuned for a ~135M
instruct model: each task mixes criteria such a model already meets, ones it meets
sometimes, ones it cannot meet without help, and penalty criteria for known reward hacks.
Where a task carries a reference answer, every format constraint it asks for is applied to
that answer too, so the reference meets the task's own checks.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
from collections.abc import Callable, Sequence

import numpy as np

# The content lives in a sibling module so this file stays about the mechanics.
import bundled_content as content  # noqa: E402  pylint: disable=wrong-import-position

SOURCE = "harnessrl_jax-bundled-v1"
SEED = 20261129
DOMAIN_CODES = {"medical": "med", "science": "sci", "writing": "wri", "roleplay": "rpl",
                "instruction_following": "ifo"}
N_HELDOUT = 10
N_HELDOUT_WITH_REF = 4

_WORD_RE = re.compile(r"\b[\w'-]+\b")
_SENT_SPLIT_RE = re.compile(r"(?<=[.!?])\s+")


def words(text: str) -> int:
  return len(_WORD_RE.findall(text))


def sentences(text: str) -> list[str]:
  return [s for s in _SENT_SPLIT_RE.split(text.strip()) if s]


# ---------------------------------------------------------------------------------------
# Constraints: one instruction in the prompt, one criterion with a check, and (where it can
# be done mechanically) a transform that makes a reference answer meet it.
# ---------------------------------------------------------------------------------------

Apply = Callable[[str, "TaskCtx"], str]


@dataclasses.dataclass(frozen=True)
class TaskCtx:
  """What a reference transform may need to know about its task."""

  title: str
  prompt: str = ""
  closing_question: str = "Would you like more detail on any of these points?"
  postscript: str = "P.S. Feel free to ask a follow-up question."


@dataclasses.dataclass(frozen=True)
class Constraint:
  """A format constraint stated in the prompt and verified by a program check."""

  key: str
  group: str
  instruction: str
  text: str
  check: dict
  weight: int
  tags: tuple[str, ...] = ("format",)
  apply: Apply | None = None  # None: no mechanical transform, so not used on tasks with refs
  fits: Callable[[str], bool] = lambda ref: True
  conflicts: frozenset[str] = frozenset()  # groups or keys it never combines with
  order: int = 50  # transforms run in ascending order (wrappers last)


def _identity(ref: str, ctx: TaskCtx) -> str:
  del ctx
  return ref


def under_words(n: int) -> Constraint:
  return Constraint(
      f"under_{n}_words", "length", f"Keep it under {n} words.",
      f"Stays under {n} words", {"type": "word_count", "max": n - 1}, 4, ("format", "length"),
      _identity, lambda ref: words(ref) < n - 4, frozenset({"closing", "echo"}))


def at_least_words(n: int) -> Constraint:
  return Constraint(
      f"at_least_{n}_words", "length", f"Write at least {n} words.",
      f"Runs to at least {n} words", {"type": "word_count", "min": n}, 3, ("format", "length"),
      _identity, lambda ref: words(ref) >= n)


def max_sentences(n: int) -> Constraint:
  return Constraint(
      f"max_{n}_sentences", "length", f"Use no more than {n} sentences.",
      f"Uses at most {n} sentences", {"type": "sentence_count", "max": n}, 4,
      ("format", "length"), _identity, lambda ref: len(sentences(ref)) <= n,
      frozenset({"closing", "echo", "decoration"}))


def _bulletize(ref: str, ctx: TaskCtx) -> str:
  del ctx
  return "\n".join("- " + s for s in sentences(ref))


def bullets(n: int) -> Constraint:
  return Constraint(
      f"bullets_{n}", "structure",
      f"Format it as a bulleted list of at least {n} points, each line starting with '- '.",
      f"Is a bulleted list with at least {n} items", {"type": "bullet_list", "min": n}, 5,
      apply=_bulletize, fits=lambda ref: len(sentences(ref)) >= n, order=20)


def exact_bullets(n: int) -> Constraint:
  return Constraint(
      f"exact_bullets_{n}", "structure",
      f"Answer with exactly {n} bullet points, each line starting with '- '.",
      f"Has exactly {n} bullet points", {"type": "bullet_list", "min": n, "max": n}, 6,
      apply=_bulletize, fits=lambda ref: len(sentences(ref)) == n, order=20)


def _numberize(ref: str, ctx: TaskCtx) -> str:
  del ctx
  return "\n".join(f"{i}. {s}" for i, s in enumerate(sentences(ref), 1))


def numbered(n: int) -> Constraint:
  return Constraint(
      f"numbered_{n}", "structure", f"Give it as a numbered list of at least {n} steps.",
      f"Is a numbered list with at least {n} items", {"type": "numbered_list", "min": n}, 5,
      apply=_numberize, fits=lambda ref: len(sentences(ref)) >= n, order=20)


def _halves(ref: str, ctx: TaskCtx) -> str:
  del ctx
  s = sentences(ref)
  k = (len(s) + 1) // 2
  return " ".join(s[:k]) + "\n\n" + " ".join(s[k:])


TWO_PARAGRAPHS = Constraint(
    "two_paragraphs", "structure", "Write exactly two paragraphs separated by a blank line.",
    "Has exactly two paragraphs", {"type": "paragraph_count", "min": 2, "max": 2}, 5,
    apply=_halves, fits=lambda ref: len(sentences(ref)) >= 2,
    conflicts=frozenset({"decoration", "echo", "postscript", "whole"}), order=20)


def _sectionize(ref: str, ctx: TaskCtx) -> str:
  del ctx
  s = sentences(ref)
  k = (len(s) + 1) // 2
  return f"SECTION 1\n{' '.join(s[:k])}\n\nSECTION 2\n{' '.join(s[k:])}"


SECTIONS = Constraint(
    "sections_2", "structure",
    "Split it into two parts headed SECTION 1 and SECTION 2.",
    "Has two parts marked SECTION 1 and SECTION 2",
    {"type": "sections", "marker": "SECTION", "min": 2}, 6,
    apply=_sectionize, fits=lambda ref: len(sentences(ref)) >= 2, order=20)

HEADINGS = Constraint(
    "headings_2", "structure",
    "Use at least two markdown headings (lines starting with '## ').",
    "Uses at least two markdown headings", {"type": "markdown_headings", "min": 2}, 5)


def starts_with(phrase: str) -> Constraint:
  return Constraint(
      "starts_with", "opening", f"Begin with the exact words '{phrase}'.",
      f"Begins with the exact words '{phrase}'", {"type": "starts_with", "prefix": phrase}, 4,
      apply=lambda ref, ctx: f"{phrase} {ref}", conflicts=frozenset({"decoration", "no_commas"}),
      order=60)


def first_word(word: str) -> Constraint:
  return Constraint(
      "first_word", "opening", f"The very first word of your reply must be '{word}'.",
      f"Its first word is '{word}'", {"type": "first_word", "word": word}, 4)


ENDS_WITH_QUESTION = Constraint(
    "ends_with_question", "closing", "End with a question for me.",
    "Ends with a question to the user", {"type": "ends_with", "suffix": "?"}, 4,
    apply=lambda ref, ctx: f"{ref} {ctx.closing_question}", order=40)


def ends_with(phrase: str) -> Constraint:
  return Constraint(
      "ends_with", "closing", f"Finish with the exact phrase '{phrase}'",
      f"Ends with the exact phrase '{phrase}'", {"type": "ends_with", "suffix": phrase}, 5,
      apply=lambda ref, ctx: f"{ref} {phrase}", order=40)


POSTSCRIPT = Constraint(
    "postscript", "closing", "Add a postscript at the end, starting with P.S.",
    "Ends with a postscript starting with P.S.", {"type": "postscript", "marker": "P.S."}, 5,
    apply=lambda ref, ctx: f"{ref}\n\n{ctx.postscript}", conflicts=frozenset({"case"}),
    order=40)

TITLE = Constraint(
    "title", "decoration",
    "Give it a title wrapped in double angular brackets, like <<my title>>.",
    "Has a title in double angular brackets, like <<title>>", {"type": "title"}, 5,
    apply=lambda ref, ctx: f"<<{ctx.title}>>\n\n{ref}", order=55)

LOWERCASE = Constraint(
    "lowercase", "case", "Write everything in lowercase letters, with no capitals at all.",
    "Is written entirely in lowercase", {"type": "all_lowercase"}, 6,
    apply=lambda ref, ctx: ref.lower(), conflicts=frozenset({"closing", "opening"}), order=90)

UPPERCASE = Constraint(
    "uppercase", "case", "Write your entire response in CAPITAL LETTERS.",
    "Is written entirely in capital letters", {"type": "all_uppercase"}, 6,
    apply=lambda ref, ctx: ref.upper(), conflicts=frozenset({"opening"}), order=90)


def capital_words(n: int) -> Constraint:
  def apply(ref: str, ctx: TaskCtx) -> str:
    del ctx
    out, done = [], 0
    for tok in ref.split(" "):
      if done < n and len(tok) >= 5 and tok.isalpha():
        tok, done = tok.upper(), done + 1
      out.append(tok)
    return " ".join(out)

  return Constraint(
      f"capital_words_{n}", "case", f"Put at least {n} important words in ALL CAPS.",
      f"Has at least {n} words in ALL CAPS", {"type": "capital_words", "min": n}, 4,
      apply=apply, fits=lambda ref: sum(len(t) >= 5 and t.isalpha() for t in ref.split(" ")) >= n,
      order=30)


NO_COMMAS = Constraint(
    "no_commas", "lexical", "Do not use any commas.", "Contains no commas",
    {"type": "no_commas"}, 5, apply=_identity, fits=lambda ref: "," not in ref)

QUOTED = Constraint(
    "quoted", "wrap", "Wrap your entire response in double quotation marks.",
    "Is wrapped entirely in double quotation marks", {"type": "quotation_wrapped"}, 5,
    apply=lambda ref, ctx: f'"{ref}"',
    conflicts=frozenset({"closing", "whole", "echo", "structure"}),
    order=98)

JSON_ONLY = Constraint(
    "json", "whole", "Reply with only a JSON object with the keys \"topic\" and \"answer\".",
    "Is a single valid JSON object and nothing else", {"type": "json_format"}, 6,
    apply=lambda ref, ctx: json.dumps({"topic": ctx.title, "answer": ref}),
    conflicts=frozenset({"structure", "opening", "closing", "decoration", "wrap", "echo",
                         "highlight", "case", "length", "no_commas"}), order=99)


def highlighted(n: int) -> Constraint:
  def apply(ref: str, ctx: TaskCtx) -> str:
    del ctx
    # A highlight cannot span a line break, so verse is highlighted line by line.
    if "\n" in ref:
      lines = ref.split("\n")
      return "\n".join(f"*{x}*" if i < n else x for i, x in enumerate(lines))
    s = sentences(ref)
    return " ".join(f"*{x}*" if i < n else x for i, x in enumerate(s))

  return Constraint(
      f"highlight_{n}", "highlight",
      f"Highlight at least {n} key {'phrase' if n == 1 else 'phrases'} with asterisks, "
      "like *this*.",
      f"Highlights at least {n} {'span' if n == 1 else 'spans'} with *asterisks*",
      {"type": "highlighted_sections", "min": n}, 4,
      apply=apply, fits=lambda ref: len(sentences(ref)) >= n, conflicts=frozenset({"structure"}),
      order=10)


def placeholders(n: int) -> Constraint:
  return Constraint(
      f"placeholders_{n}", "lexical",
      f"Include at least {n} placeholders in square brackets, such as [name].",
      f"Contains at least {n} [placeholders] in square brackets",
      {"type": "placeholders", "min": n}, 5)


def keyword_times(word: str, k: int) -> Constraint:
  return Constraint(
      f"keyword_{word}_{k}", "lexical", f"Use the word '{word}' at least {k} times.",
      f"Uses the word '{word}' at least {k} times",
      {"type": "keyword_count", "keyword": word, "min": k}, 4, ("format", "content"),
      _identity,
      lambda ref: len(re.findall(rf"\b{re.escape(word)}\b", ref, re.IGNORECASE)) >= k)


def forbidden(ws: Sequence[str]) -> Constraint:
  quoted = " or ".join(f"'{w}'" for w in ws)
  return Constraint(
      "forbidden_" + "_".join(ws), "lexical", f"Do not use the words {quoted}.",
      f"Avoids the words {quoted}", {"type": "forbidden_words", "words": list(ws)}, 3,
      apply=_identity,
      fits=lambda ref: not any(re.search(rf"\b{re.escape(w)}\b", ref, re.IGNORECASE)
                               for w in ws))


def letter_at_least(letter: str, n: int) -> Constraint:
  return Constraint(
      f"letter_{letter}_{n}", "lexical",
      f"The letter '{letter}' must appear at least {n} times.",
      f"Uses the letter '{letter}' at least {n} times",
      {"type": "letter_frequency", "letter": letter, "min": n}, 3,
      apply=_identity, fits=lambda ref: ref.lower().count(letter) >= n)


TWO_RESPONSES = Constraint(
    "two_responses", "whole",
    "Give two different answers separated by six asterisks: ******",
    "Gives two different answers separated by ******",
    {"type": "two_responses", "separator": "******"}, 6,
    conflicts=frozenset({"structure", "closing", "decoration", "wrap", "echo"}))

REPEAT_PROMPT = Constraint(
    "repeat_prompt", "echo",
    "First repeat this whole request word for word, then answer it.",
    "Begins by repeating the request word for word", {"type": "repeat_prompt"}, 6,
    apply=lambda ref, ctx: f"{ctx.prompt}\n\n{ref}",
    conflicts=frozenset({"opening", "case", "whole", "wrap", "length", "lexical"}), order=97)


def compatible(chosen: Sequence[Constraint], cand: Constraint) -> bool:
  for c in chosen:
    if (c.group == cand.group or cand.group in c.conflicts or c.group in cand.conflicts
        or cand.key in c.conflicts or c.key in cand.conflicts):
      return False
  return True


def pick_constraints(rng: np.random.Generator, pool: Sequence[Constraint], k: int,
                     ref: str | None) -> list[Constraint]:
  """Draws up to k mutually compatible constraints (ones a reference answer can meet)."""
  order = rng.permutation(len(pool))
  chosen: list[Constraint] = []
  for i in order:
    c = pool[int(i)]
    if len(chosen) == k:
      break
    if ref is not None and (c.apply is None or not c.fits(ref)):
      continue
    if compatible(chosen, c):
      chosen.append(c)
  return chosen


def apply_all(ref: str, chosen: Sequence[Constraint], ctx: TaskCtx) -> str:
  for c in sorted(chosen, key=lambda c: c.order):
    ref = c.apply(ref, ctx)
  return ref


# ---------------------------------------------------------------------------------------
# Shared criteria.
# ---------------------------------------------------------------------------------------

PRAISE = ["great question", "good question", "excellent question", "fantastic question",
          "interesting question", "what a great", "what a wonderful"]
COMPLIANCE = ["all requirements", "all the requirements", "all of the requirements",
              "all the constraints", "all the instructions", "I have followed",
              "I've followed", "as per your instructions", "meets all"]
REFUSAL = ["I can't help", "I cannot help", "I'm sorry, but", "I am sorry, but",
           "I'm unable", "I am unable", "I cannot provide", "I can't provide",
           "I'm not able to", "as an AI"]
PREAMBLE = ["here is", "here's", "I hope you enjoy", "hope you like"]
AI_SELF = ["language model", "as an AI", "I am an AI", "I'm an AI", "AI assistant",
           "artificial intelligence"]
CLINICIAN = ["doctor", "doctors", "clinician", "physician", "GP", "healthcare provider",
             "health care provider", "healthcare professional", "medical professional",
             "pharmacist", "nurse", "dermatologist", "dentist", "optometrist", "urgent care",
             "medical attention", "medical care", "medical help", "emergency"]
DOSE_PATTERN = r"(?i)\b\d+(\.\d+)?\s?(mg|mcg|milligrams?|ml|millilit(er|re)s?|iu)\b"


def word_limits(chosen: Sequence[Constraint]) -> list[int]:
  """The 'under N words' limits among the chosen constraints."""
  return [int(c.check["max"]) + 1 for c in chosen
          if c.check["type"] == "word_count" and "max" in c.check]


def crit(text: str, weight: int, tags: Sequence[str], check: dict | None = None) -> dict:
  out = {"text": text, "weight": weight, "anchor": True, "tags": list(tags)}
  if check is not None:
    out["check"] = check
  return out


# Every criterion carries a "tpl:" tag naming the template it came from, so calibration
# and analysis can group criteria by what they test.
def praise_penalty(weight: int = -3) -> dict:
  return crit("Opens with flattery about the question (e.g. 'Great question!')", weight,
              ("penalty", "style", "tpl:praise"),
              {"type": "keyword_present", "keywords": PRAISE, "mode": "any"})


def compliance_penalty(weight: int = -5) -> dict:
  return crit("Claims to have met the instructions or requirements instead of simply "
              "meeting them", weight, ("penalty", "hack", "tpl:claims-compliance"),
              {"type": "keyword_present", "keywords": COMPLIANCE, "mode": "any"})


def refusal_penalty(weight: int = -8) -> dict:
  return crit("Refuses or deflects a harmless request (e.g. 'I'm sorry, but I can't help')",
              weight, ("penalty", "refusal", "tpl:refusal"),
              {"type": "keyword_present", "keywords": REFUSAL, "mode": "any"})


def length_penalty(limit: int, weight: int = -4) -> dict:
  return crit(f"Runs far past the requested length (more than {2 * limit} words)", weight,
              ("penalty", "length", "tpl:overlong"), {"type": "word_count", "min": 2 * limit + 1})


def constraint_crit(c: Constraint) -> dict:
  return crit(c.text, c.weight, c.tags + ("tpl:constraint",), c.check)


def mention_crit(label: str, keywords: Sequence[str], weight: int, tpl: str) -> dict:
  return crit(f"Mentions {label}", weight, ("content", f"tpl:{tpl}"),
              {"type": "keyword_present", "keywords": list(keywords), "mode": "any"})


# Met when the last line is prose ending in a letter, digit or comma: the rollout ran out of
# tokens mid-sentence. List items and verse lines are exempt (they often lack a full stop).
UNFINISHED_PATTERN = r"^(?![-*] |\d+[.)] )[^\n]*[A-Za-z0-9,;:]\s*\Z"


def unfinished_penalty(weight: int = -3) -> dict:
  return crit("Stops mid-sentence, leaving the answer unfinished", weight,
              ("penalty", "length", "tpl:unfinished"),
              {"type": "regex_match", "pattern": UNFINISHED_PATTERN, "min": 1})


def substantive(weight: int = 2) -> dict:
  return crit("Gives a substantive answer of 15 to 300 words", weight,
              ("length", "tpl:substantive"), {"type": "word_count", "min": 15, "max": 300})


# ---------------------------------------------------------------------------------------
# Domain builders: each returns (prompt messages, criteria, reference answer, meta keys).
# ---------------------------------------------------------------------------------------

MED_POOL = [under_words(60), under_words(80), max_sentences(4), bullets(3), TWO_PARAGRAPHS,
            starts_with("In short:"), ENDS_WITH_QUESTION, POSTSCRIPT, TITLE, LOWERCASE,
            highlighted(1), NO_COMMAS]
SCI_POOL = [under_words(50), under_words(70), max_sentences(3), bullets(3), numbered(3),
            TWO_PARAGRAPHS, starts_with("Simply put:"), ENDS_WITH_QUESTION, POSTSCRIPT,
            TITLE, LOWERCASE, highlighted(2), NO_COMMAS, JSON_ONLY]
WRI_POOL = [TITLE, LOWERCASE, UPPERCASE, NO_COMMAS, POSTSCRIPT, QUOTED, highlighted(1),
            ends_with("The end."), under_words(40), under_words(60),
            TWO_PARAGRAPHS, capital_words(2)]


def _user_msg(text: str) -> list[dict]:
  return [{"role": "user", "content": text}]


def build_medical(t: content.MedTopic, rng: np.random.Generator) -> tuple:
  k = 2 if rng.random() < 0.25 else 1
  chosen = pick_constraints(rng, MED_POOL, k, t.ref)
  prompt = " ".join([t.question] + [c.instruction for c in chosen])
  ctx = TaskCtx(title=t.name.title(), prompt=prompt,
                closing_question="Would you like tips on what to track before an appointment?",
                postscript="P.S. Get checked sooner if anything gets worse or worries you.")
  crits = [
      crit(t.nl, 8, ("content", "tpl:topic-nl")),
      mention_crit(t.qlabel, t.qkw, 3, "mentions-question"),
      crit(f"Advises seeing a doctor or other clinician, or seeking care, if {t.redflag}", 6,
           ("safety", "tpl:clinician"),
           {"type": "keyword_present", "keywords": CLINICIAN, "mode": "any"}),
  ]
  crits += [constraint_crit(c) for c in chosen]
  if len(crits) < 5 and rng.random() < 0.5:
    crits.append(mention_crit(t.term_label, t.term_kw, 4, "term"))
  crits.append(crit("Gives specific medicine doses (amounts in mg or ml) instead of deferring "
                    "to a pharmacist or doctor", -7, ("penalty", "safety", "tpl:dose"),
                    {"type": "regex_match", "pattern": DOSE_PATTERN, "min": 1}))
  if len(crits) < 6:
    limits = word_limits(chosen)
    r = rng.random()
    if limits:
      crits.append(length_penalty(limits[0]))
    elif r < 0.4:
      crits.append(unfinished_penalty())
    elif r < 0.6:
      crits.append(praise_penalty())
    elif r < 0.8:
      crits.append(crit("States a definite diagnosis as if it had examined the person", -5,
                        ("penalty", "safety", "tpl:diagnosis")))
    else:
      crits.append(substantive())
  ref = apply_all(t.ref, chosen, ctx) if t.ref else None
  return _user_msg(prompt), crits, ref, [c.key for c in chosen]


def build_science(t: content.SciTopic, rng: np.random.Generator) -> tuple:
  k = 2 if rng.random() < 0.3 else 1
  chosen = pick_constraints(rng, SCI_POOL, k, t.ref)
  prompt = " ".join([t.question] + [c.instruction for c in chosen])
  ctx = TaskCtx(title=t.name.title(), prompt=prompt,
                closing_question="Can you think of another place you have seen this happen?",
                postscript="P.S. Try spotting this in everyday life this week.")
  crits = [crit(t.nl, 8, ("content", "tpl:topic-nl")),
           mention_crit(t.qlabel, t.qkw, 3, "mentions-question")]
  crits += [constraint_crit(c) for c in chosen]
  crits.append(crit(f"Uses the term '{t.term}'", 4, ("content", "tpl:term"),
                    {"type": "keyword_present", "keywords": [t.term]}))
  if len(crits) < 5 and rng.random() < 0.5 and not any(c.key == "json" for c in chosen):
    crits.append(substantive())
  r = rng.random()
  if r < 0.3:
    crits.append(unfinished_penalty())
  elif r < 0.5:
    crits.append(praise_penalty())
  elif r < 0.7:
    crits.append(crit(f"States a common misconception as fact ({t.misconception})", -6,
                      ("penalty", "accuracy", "tpl:misconception")))
  elif r < 0.85:
    crits.append(compliance_penalty())
  else:
    crits.append(refusal_penalty())
  ref = apply_all(t.ref, chosen, ctx) if t.ref else None
  return _user_msg(prompt), crits, ref, [c.key for c in chosen]


def build_writing(t: content.WriTopic, rng: np.random.Generator) -> tuple:
  k = 1 if rng.random() < 0.5 else 2
  chosen = pick_constraints(rng, WRI_POOL, k, t.ref)
  prompt = " ".join([t.request] + [c.instruction for c in chosen])
  ctx = TaskCtx(title=t.title, prompt=prompt, postscript=t.postscript)
  crits = [crit(t.nl, 6, ("content", "tpl:topic-nl")),
           mention_crit(t.kw_label, t.kw, 3, "mentions-subject"),
           crit(t.form_nl, 4, ("form", "tpl:form-nl"))]
  crits += [constraint_crit(c) for c in chosen]
  limits = word_limits(chosen)
  if limits:
    crits.append(length_penalty(limits[0]))
  else:
    crits.append(crit("Adds a preamble or sign-off about the piece (e.g. 'Here is your "
                      "poem') instead of just writing it", -3,
                      ("penalty", "style", "tpl:preamble"),
                      {"type": "keyword_present", "keywords": PREAMBLE, "mode": "any"}))
  if len(crits) < 6 and rng.random() < 0.4:
    crits.append(compliance_penalty())
  ref = apply_all(t.ref, chosen, ctx) if t.ref else None
  return _user_msg(prompt), crits, ref, [c.key for c in chosen]


def build_roleplay(t: content.Character, rng: np.random.Generator) -> tuple:
  # One extra persona rule per task besides the greeting: a signature word, a closing
  # question, or (on some tasks) none, with a length criterion instead.
  extra = ("signature", "question", "short", "finished")[
      int(rng.choice(4, p=[0.35, 0.25, 0.2, 0.2]))]
  system = f"You are {t.name}, {t.desc} Stay in character. Always begin your reply with " \
           f"'{t.greeting}'"
  if extra == "signature":
    system += f" and use the word '{t.signature}' at least once."
  elif extra == "question":
    system += " and end every reply with a question for the visitor."
  else:
    system += "."
  msgs = [{"role": "system", "content": system}, {"role": "user", "content": t.question}]
  world_label, world_kw = content.WORLD[t.name]
  crits = [
      crit(f"Stays in character as {t.name}, {t.role}, throughout", 8,
           ("persona", "tpl:persona-nl")),
      crit(t.answer_nl, 5, ("content", "tpl:answer-nl")),
      mention_crit(world_label, world_kw, 3, "world"),
      crit(f"Begins with '{t.greeting}'", 4, ("persona", "format", "tpl:greeting"),
           {"type": "starts_with", "prefix": t.greeting}),
  ]
  if extra == "signature":
    crits.append(crit(f"Uses the word '{t.signature}'", 3, ("persona", "tpl:signature"),
                      {"type": "keyword_present", "keywords": [t.signature]}))
  elif extra == "question":
    crits.append(crit("Ends with a question for the visitor", 3,
                      ("persona", "format", "tpl:ends-question"),
                      {"type": "ends_with", "suffix": "?"}))
  elif extra == "short":
    crits.append(crit("Keeps the reply conversational, under 150 words", 2,
                      ("length", "tpl:conversational"), {"type": "word_count", "max": 149}))
  else:
    crits.append(unfinished_penalty())
  crits.append(crit("Breaks character by calling itself an AI or a language model", -8,
                    ("penalty", "persona", "tpl:breaks-character"),
                    {"type": "keyword_present", "keywords": AI_SELF, "mode": "any"}))
  ref = None
  if t.ref:
    ref = f"{t.greeting} {t.ref}"
    if extra == "question":
      ref += " " + t.followup
  return msgs, crits, ref, [extra]


IF_POOL_EXTRA = [
    REPEAT_PROMPT, TWO_RESPONSES, placeholders(2), HEADINGS, first_word("Honestly"),
    letter_at_least("z", 3), letter_at_least("q", 2), forbidden(["very", "really"]),
    forbidden(["good", "great"]), capital_words(3), SECTIONS, exact_bullets(3),
    numbered(3), QUOTED, JSON_ONLY, UPPERCASE, LOWERCASE, NO_COMMAS, TITLE, POSTSCRIPT,
    ends_with("Is there anything else I can help with?"), starts_with("Here is my answer:"),
    highlighted(2), under_words(40), under_words(60), at_least_words(80), max_sentences(3),
    TWO_PARAGRAPHS, ENDS_WITH_QUESTION]


def build_instruction(t: content.IfRequest, rng: np.random.Generator) -> tuple:
  pool = list(IF_POOL_EXTRA) + [keyword_times(t.kw[0], 2)]
  k = int(rng.choice([1, 2, 2, 3]))
  chosen = pick_constraints(rng, pool, k, t.ref)
  prompt = " ".join([t.request] + [c.instruction for c in chosen])
  ctx = TaskCtx(title=t.title, prompt=prompt,
                closing_question="Would you like more detail on any of these?",
                postscript="P.S. Small steps add up.")
  crits = [crit(f"Addresses the request: {t.goal}", 4, ("content", "tpl:request-nl")),
           mention_crit(t.kw_label, t.kw, 2, "mentions-subject")]
  crits += [constraint_crit(c) for c in chosen]
  if len(crits) < 5:
    crits.append(crit("Responds in English", 2, ("language", "tpl:english"),
                      {"type": "language_english"}))
  limits = word_limits(chosen)
  r = rng.random()
  if limits and r < 0.3:
    crits.append(length_penalty(limits[0]))
  elif r < 0.65:
    crits.append(compliance_penalty())
  elif r < 0.85:
    crits.append(refusal_penalty())
  else:
    crits.append(praise_penalty())
  ref = apply_all(t.ref, chosen, ctx) if t.ref else None
  return _user_msg(prompt), crits, ref, [c.key for c in chosen]


BUILDERS = {
    "medical": (lambda: content.MEDICAL, build_medical),
    "science": (lambda: content.SCIENCE, build_science),
    "writing": (lambda: content.WRITING, build_writing),
    "roleplay": (lambda: content.ROLEPLAY, build_roleplay),
    "instruction_following": (lambda: content.INSTRUCTIONS, build_instruction),
}


def split_topics(topics: Sequence, rng: np.random.Generator) -> tuple[list, list]:
  """Held-out gets distinct topics, with a reference-answer share close to training's."""
  with_ref = [i for i, t in enumerate(topics) if t.ref]
  without = [i for i, t in enumerate(topics) if not t.ref]
  with_ref = [with_ref[int(i)] for i in rng.permutation(len(with_ref))]
  without = [without[int(i)] for i in rng.permutation(len(without))]
  held = sorted(with_ref[:N_HELDOUT_WITH_REF] + without[:N_HELDOUT - N_HELDOUT_WITH_REF])
  train = sorted(with_ref[N_HELDOUT_WITH_REF:] + without[N_HELDOUT - N_HELDOUT_WITH_REF:])
  return [topics[i] for i in train], [topics[i] for i in held]


def make_task(domain: str, split: str, index: int, topic, rng: np.random.Generator) -> dict:
  msgs, crits, ref, keys = BUILDERS[domain][1](topic, rng)
  if not 3 <= len(crits) <= 6:
    raise AssertionError(f"{domain}/{topic.name}: {len(crits)} criteria")
  for i, c in enumerate(crits, 1):
    c["id"] = f"c{i}"
  crits = [{"id": c.pop("id"), **c} for c in crits]
  return {"id": f"{DOMAIN_CODES[domain]}-{split}-{index:03d}", "domain": domain,
          "source": SOURCE, "prompt": msgs, "criteria": crits, "reference_answer": ref,
          "meta": {"topic": topic.name, "constraints": keys}}


def build() -> tuple[list[dict], list[dict]]:
  train, held = [], []
  for d_index, domain in enumerate(BUILDERS):
    topics = BUILDERS[domain][0]()
    content.check_topics(domain, topics)
    rng = np.random.default_rng([SEED, d_index])
    tr, he = split_topics(topics, rng)
    train += [make_task(domain, "train", i, t, rng) for i, t in enumerate(tr)]
    held += [make_task(domain, "heldout", i, t, rng) for i, t in enumerate(he)]
  return train, held


def write_jsonl(rows: Sequence[dict], path: str) -> None:
  with open(path, "w", encoding="utf-8", newline="\n") as f:
    for row in rows:
      f.write(json.dumps(row, ensure_ascii=False) + "\n")


def stats_table(train: Sequence[dict], held: Sequence[dict]) -> str:
  """Per-domain counts and criterion mix as a markdown table (pasted into data/README.md)."""
  lines = ["| domain | train | held-out | criteria/task | program checks | penalties | "
           "with reference |", "|---|---|---|---|---|---|---|"]
  for domain in list(BUILDERS) + ["all"]:
    rows = [r for r in list(train) + list(held) if domain in ("all", r["domain"])]
    crits = [c for r in rows for c in r["criteria"]]
    n_tr = sum(r["id"].split("-")[1] == "train" for r in rows)
    lines.append(
        f"| {domain} | {n_tr} | {len(rows) - n_tr} | {len(crits) / len(rows):.1f} | "
        f"{sum('check' in c for c in crits) / len(crits):.0%} | "
        f"{sum(c['weight'] < 0 for c in crits) / len(crits):.0%} | "
        f"{sum(r['reference_answer'] is not None for r in rows) / len(rows):.0%} |")
  return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--out-dir", default=os.path.dirname(os.path.abspath(__file__)),
                      help="where train.jsonl and heldout.jsonl go (default: data/)")
  parser.add_argument("--stats", action="store_true",
                      help="also print per-domain statistics as a markdown table")
  args = parser.parse_args(argv)
  train, held = build()
  os.makedirs(args.out_dir, exist_ok=True)
  write_jsonl(train, os.path.join(args.out_dir, "train.jsonl"))
  write_jsonl(held, os.path.join(args.out_dir, "heldout.jsonl"))
  print(f"wrote {len(train)} training and {len(held)} held-out tasks to {args.out_dir}")
  if args.stats:
    print(stats_table(train, held))


if __name__ == "__main__":
  main()
