"""Shared pieces of the evolver tests (no tests of its own): tasks with known failure
classes, a hand-checkable fake policy, a fake rubric-following LLM judge client, and
builders for groups."""

from __future__ import annotations

import re


from harnessrl_jax.data import text_units
from harnessrl_jax.data.frozen import FrozenMap
from harnessrl_jax.data.schema import Check, Criterion, Message, Task
from harnessrl_jax.evolver import EvolverConfig, evolver_defaults
from harnessrl_jax.evolver.measure import groups_from
from harnessrl_jax.judges.grading import grade
from harnessrl_jax.judges.client import TextClient
from tests.memory.test_memory_semantic import fake_embedder
from harnessrl_jax.judges.judge import Judge
from harnessrl_jax.memory import Memory, memory_defaults


def kw(*words):
  return Check("keyword_present", FrozenMap({"keywords": list(words), "mode": "any"}))


# Blind: nobody writes "condensation"; c1 splits the group 2/2 with equal lengths.
BLIND = Task("t-blind", "science", (Message("user", "Describe the water cycle."),), (
    Criterion("c1", "Mentions evaporation", 8.0, check=kw("evaporation")),
    Criterion("c2", "Mentions condensation", 2.0, check=kw("condensation")),
))
BLIND_RESPONSES = (
    "Water turns to vapour by evaporation and later falls as rain.",
    "Water rises as vapour and later falls back down as rain again.",
    "Evaporation lifts water from the sea and it returns as rain.",
    "Water rises from the sea as vapour and it returns as rain.",
)

# Saturated: everybody says "rain"; c2 is mixed.
SATURATED = Task("t-sat", "science", (Message("user", "What falls from clouds?"),), (
    Criterion("c1", "Mentions rain", 5.0, check=kw("rain")),
    Criterion("c2", "Mentions snow", 5.0, check=kw("snow")),
))
SATURATED_RESPONSES = (
    "Rain falls from clouds, and sometimes snow.",
    "Rain falls from clouds most of the time.",
    "Rain and snow both fall from clouds.",
    "Mostly rain falls from clouds in summer.",
)

# Spurious: c2 (judged by the fake LLM judge) is met only through a stock closer, by the
# responses that miss the real content criterion c1.
SPURIOUS = Task("t-spur", "science", (Message("user", "Explain why the sky is blue."),), (
    Criterion("c1", "Explains Rayleigh scattering", 6.0, check=kw("scattering")),
    Criterion("c2", "States that the answer covers everything the question asks", 4.0,
              anchor=False),
))
SPURIOUS_RESPONSES = (
    "The sky is blue because of Rayleigh scattering by air molecules. Short waves scatter more.",
    "Sunlight scattering by the air favours blue light. Red light passes straight through.",
    "The sky is blue because it reflects the ocean. All requirements met.",
    "Blue is the colour of the air itself. All requirements have been met.",
)

# Padding: c2 (a word-count check) is met only by the two responses padded with repeated
# filler, which miss the content criterion c1.
PADDED = Task("t-pad", "science", (Message("user", "Why do leaves change colour?"),), (
    Criterion("c1", "Explains that chlorophyll breaks down", 6.0, check=kw("chlorophyll")),
    Criterion("c2", "Is thorough and detailed", 4.0, anchor=False,
              check=Check("word_count", FrozenMap({"min": 30}))),
))
_FILLER = " This is an important point to consider." * 6
PADDED_RESPONSES = (
    "In autumn chlorophyll breaks down and yellow pigments show through.",
    "Less light means the chlorophyll fades, revealing other pigments.",
    "Leaves change colour in autumn for many reasons." + _FILLER,
    "Trees do many things in the autumn months." + _FILLER,
)

# What the fake judge looks for in a criterion it has no check for.
TRIGGERS = {"covers everything": r"requirements|covers everything"}


def fake_verdict(criterion_text: str, response: str) -> bool:
  """A rubric-following grader: quoted sentences the item says do not count are ignored;
  a penalty item about stock statements is met when one of its quotes occurs."""
  quoted = re.findall(r'"([^"]+)"', criterion_text)
  if criterion_text.startswith("Uses stock statements"):
    return any(q in response for q in quoted)
  if criterion_text.startswith("Pads the response"):
    said = text_units.sentences(response)
    return len(set(said)) < len(said)
  kept = " ".join(s for s in text_units.sentences(response) if s not in quoted)
  for key, pattern in TRIGGERS.items():
    if key in criterion_text:
      return re.search(pattern, kept, re.IGNORECASE) is not None
  return False


def _fenced(text: str, label: str) -> str:
  m = re.search(rf"<<<BEGIN {label} (\w+)>>>\n(.*)\n<<<END {label} \1>>>", text, re.DOTALL)
  assert m, f"no {label} fence in the judge prompt"
  return m.group(2)


class FakeJudgeClient(TextClient):
  """Answers judge prompts with `fake_verdict`; counts the requests it got."""

  identity = "fake-judge"

  def __init__(self):
    self.calls = 0

  def _complete(self, chats, max_tokens):
    out = []
    for chat in chats:
      self.calls += 1
      user = chat[-1].content
      item = _fenced(user, "RUBRIC ITEM").split("\n(")[0]
      verdict = fake_verdict(item, _fenced(user, "RESPONSE"))
      out.append('{"explanation": "fake", "criteria_met": %s}' % str(verdict).lower())
    return out


class ScriptedClient(TextClient):
  """Returns canned answers in order (LLM role tests); records the prompts."""

  identity = "scripted"

  def __init__(self, answers):
    self.answers = list(answers)
    self.prompts = []

  def _complete(self, chats, max_tokens):
    self.prompts.extend(chats)
    return [self.answers.pop(0) for _ in chats]


def guidance_blocks(prompt) -> dict[str, str]:
  text = prompt[-1].content
  return {f: m.group(1) for f in ("criterion", "reference", "critique")
          for m in [re.search(rf"<{f}>\n(.*?)\n</{f}>", text, re.DOTALL)] if m}


class FakePolicy:
  """A deterministic policy: the canned responses of the task whose prompt it sees; when a
  `<criterion>` field is mounted and `follows` is True, each response ends with the
  hint's text (a policy that takes the hint). The key is ignored."""

  def __init__(self, canned: dict[str, tuple[str, ...]], follows: bool = True):
    self.canned = canned
    self.follows = follows
    self.calls = []

  def __call__(self, prompts, key, num_samples):
    out = []
    for p in prompts:
      self.calls.append(p)
      base = next(v for k, v in self.canned.items() if p[-1].content.startswith(k))
      hint = guidance_blocks(p).get("criterion") if self.follows else None
      out.append([(r + " " + hint) if hint else r for r in base][:num_samples])
    return out


PROMPTS = {BLIND.prompt[0].content: BLIND_RESPONSES,
           SATURATED.prompt[0].content: SATURATED_RESPONSES,
           SPURIOUS.prompt[0].content: SPURIOUS_RESPONSES,
           PADDED.prompt[0].content: PADDED_RESPONSES}




def new_memory(h=None) -> Memory:
  mem = Memory(memory_defaults(), fake_embedder())
  if h is not None:
    mem.sync_rubrics(h)
  return mem


def judge(with_llm=True) -> Judge:
  return Judge(FakeJudgeClient() if with_llm else None, use_checks=True)


def record(tasks, h, responses, j) -> list:
  """Recorded groups of `responses[t]` judged under H's rubric."""
  crits = [h.criteria(t.id) for t in tasks]
  return groups_from(tasks, crits, responses, grade(j, tasks, responses, crits))


def config(**overrides):
  """The `config.evolver` section (a ConfigDict) with `overrides`."""
  c = evolver_defaults()
  for k, v in overrides.items():
    setattr(c, k, v)
  return c


def settings(**overrides) -> EvolverConfig:
  """The typed evolver config the roles take, with `overrides`."""
  return EvolverConfig.from_config(config(**overrides))
