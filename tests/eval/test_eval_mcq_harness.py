"""Our multiple-choice extraction (`mcq.extract_choice`) beside openai/simple-evals' rule
(`mcq.extract_choice_simple_evals`) on hand-written responses, and both scores from
`protocols.medqa` on a fixture in MedQA's official JSONL layout (docs/evaluation.md)."""

from __future__ import annotations

import os
import re

import pytest

from harnessrl_jax.eval import mcq, protocols
from repo_paths import FIXTURES

FIX = FIXTURES
OPTS = (("A", "Aspirin"), ("B", "Ceftriaxone"), ("C", "Metformin"), ("D", "Insulin"))

# (response, letter under extract_choice, letter under extract_choice_simple_evals)
RESPONSES = [
    # the requested "Answer: X" line, and its plain variants: both read it
    ("Metformin lowers glucose.\n\nAnswer: C", "C", "C"),
    ("ANSWER: C", "C", "C"),
    ("answer: C", "C", "C"),
    ("Answer : C", "C", "C"),
    ("Answer:C", "C", "C"),
    ("Answer:\tD", "D", "D"),
    ("Final Answer: B", "B", "B"),
    ("**Answer: C**", "C", "C"),
    ("Answer: $D", "D", "D"),
    ("Answer: $C$", "C", "C"),
    ("I think the answer is B. Answer: D", "D", "D"),   # only one "Answer:" with a colon
    ("Answer: D\n(B) would be tempting", "D", "D"),
    ("Answer: B or C", "B", "B"),
    ("Answer: A patient with diabetes needs metformin.", "A", "A"),   # both misread
    # forms only ours reads (simple-evals needs "Answer", optional blanks, ":", the letter)
    ("The answer is C.", "C", None),
    ("The Answer Is: C", "C", None),
    ("**Answer:** C", "C", None),
    ("Answer: **C**", "C", None),
    ("Answer: (C)", "C", None),
    ("The answer is (D).", "D", None),
    ("Answer:\nB", "B", None),                            # newline after the colon
    ("Answer: $\\boxed{C}$", "C", None),
    ("\\boxed{C}", "C", None),
    ("The final answer is $\\boxed{B}$.", "B", None),
    ("**C**", "C", None),
    ("C", "C", None),
    ("(C)", "C", None),
    ("I pick (C) metformin.", "C", None),
    ("Metformin is the drug of choice.", "C", None),
    ("The correct option is B", "B", None),
    ("Option A is wrong.\nThe correct option is B", "B", None),
    ("Answers: C", "C", None),
    # lower case: simple-evals matches it and returns it as written (then scores it wrong)
    ("Answer: c", None, "c"),
    ("answer: d", None, "d"),
    # several answers: ours takes the last explicit one, simple-evals the first
    ("Answer: B\n\nOn reflection, the final answer: D", "D", "B"),
    ("After review, answer: D. Earlier I said Answer: A.", "A", "D"),
    # an undelimited letter: simple-evals reads the word's initial
    ("Answer: Because metformin lowers glucose, C.", "C", "B"),
    ("The answer: Ceftriaxone", "B", "C"),
    # no answer, or not an option
    ("Answer: E", None, None),
    ("(A) Aspirin (B) Ceftriaxone (C) Metformin: hard to say", None, None),
    ("I cannot tell.", None, None),
]
AGREEING = 17   # responses where both rules give the same result; quoted in docs/evaluation.md


@pytest.mark.parametrize("response,ours,simple", RESPONSES)
def test_both_rules(response, ours, simple):
  assert mcq.extract_choice(response, OPTS) == ours
  assert mcq.extract_choice_simple_evals(response, OPTS) == simple


def test_fixture_set_and_agreement():
  assert len(RESPONSES) >= 30 and len({r for r, _, _ in RESPONSES}) == len(RESPONSES)
  assert sum(ours == simple for _, ours, simple in RESPONSES) == AGREEING


def test_simple_evals_rule_is_their_pattern_for_four_options():
  # ANSWER_PATTERN_MULTICHOICE of openai/simple-evals common.py, used by gpqa_eval.py with
  # re.search on the raw response.
  theirs = re.compile(r"(?i)Answer[ \t]*:[ \t]*\$?([A-D])\$?")
  for response, _, _ in RESPONSES:
    found = theirs.search(response)
    assert mcq.extract_choice_simple_evals(response, OPTS) == (found and found.group(1))


def test_simple_evals_rule_admits_a_fifth_option_only_where_there_is_one():
  five = OPTS + (("E", "Aspirin and heparin"),)
  assert mcq.extract_choice_simple_evals("Answer: E", five) == "E"
  assert mcq.extract_choice_simple_evals("Answer: E", OPTS) is None
  assert mcq.extract_choice_simple_evals("Answer: E, no: Answer: B", OPTS) == "B"


def scripted(answers: dict[str, str]):
  """generate(): the response whose key occurs in the prompt's last message."""
  def generate(chats):
    out = []
    for chat in chats:
      hits = [v for k, v in answers.items() if k in chat[-1].content]
      assert len(hits) == 1, chat[-1].content
      out.append(hits[0])
    return out
  return generate


def test_medqa_reports_both_scores():
  gen = scripted({
      "Kernig": "Ceftriaxone covers the likely organisms.\n\nAnswer: B",   # both right
      "sailor": "Bleeding gums suggest scurvy.\n**Answer:** C",            # simple-evals: none
      "secrete insulin": "Answer: A\nWait, the liver does not. Final answer: B",   # first: A
      "ST elevation": "Give antiplatelet and anticoagulant therapy.\nAnswer: E",   # both right
      "ketonuria": "answer: d",                             # ours: none; simple-evals: "d"
  })
  out = protocols.medqa(os.path.join(FIX, "eval_medqa_harness.jsonl"), gen)
  assert out["benchmark"] == "MedQA" and out["num_items"] == 5
  assert out["items"] == {"medqa/1": 100.0, "medqa/2": 100.0, "medqa/3": 100.0,
                          "medqa/4": 100.0, "medqa/5": 0.0}
  assert out["score"] == pytest.approx(80.0) and out["unparsed"] == 1
  assert out["score_simple_evals"] == pytest.approx(40.0)
  assert out["unparsed_simple_evals"] == 1
