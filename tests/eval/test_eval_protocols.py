"""Evaluation protocols on small hand-written fixtures: answer extraction, ROUGE-L, IFBench
checks, WritingBench through a scripted judge, held-out seed-rubric scores."""

from __future__ import annotations

import os

import numpy as np
import pytest

from harnessrl_jax.data.schema import Check, Criterion, Message, Task
from harnessrl_jax.errors import DataError
from harnessrl_jax.eval import heldout, mcq, protocols, rouge
from harnessrl_jax.judges.client import TextClient, TransportError
from harnessrl_jax.judges.judge import Judge, JudgeError, JudgeSettings
from repo_paths import FIXTURES

FIX = FIXTURES
OPTS = (("A", "Aspirin"), ("B", "Ceftriaxone"), ("C", "Metformin"), ("D", "Insulin"),
        ("E", "Aspirin and heparin"))


def scripted(answers: dict[str, str]):
  """generate(): the response whose key occurs in the last message; records the calls."""
  calls = []

  def generate(chats):
    calls.append(list(chats))
    out = []
    for chat in chats:
      text = chat[-1].content
      hits = [v for k, v in answers.items() if k in text]
      assert len(hits) == 1, text
      out.append(hits[0])
    return out
  generate.calls = calls
  return generate


@pytest.mark.parametrize("response,expected", [
    ("Answer: C", "C"),
    ("After weighing it all, the answer is C.", "C"),
    ("I pick (C)", "C"),
    ("**C**", "C"),
    ("The final answer: **(B)** Ceftriaxone", "B"),
    ("ANSWER: d", None),                      # lower-case letters are never read
    ("Option A is wrong.\nThe correct option is B", "B"),
    ("answer is A. Wait, no. Final answer: B", "B"),   # the last explicit statement wins
    ("$\\boxed{D}$", "D"),
    ("B", "B"),
    (" (E). ", "E"),
    ("Answer: F", None),                      # F is not an option; nothing else matches
    ("Empirical therapy should be ceftriaxone given to the patient.", "B"),
    ("Aspirin and heparin together.", "E"),   # the longer option contains "Aspirin"
    ("(A) Aspirin (B) Ceftriaxone (C) Metformin: hard to say", None),
    ("A patient like this needs antibiotics, so I go with B", "B"),   # article "A" skipped
    ("I cannot tell.", None),
    ("The answer: Ceftriaxone", "B"),          # "C" of the word is no letter; text matches
    ("**Answer:** C\n\nBecause (A) is wrong", "C"),
])
def test_extract_choice(response, expected):
  assert mcq.extract_choice(response, OPTS) == expected


def test_rouge_l_hand_computed():
  # LCS(the cat sat on the mat, the cat is on the mat) = 5 of 6 tokens each side.
  assert rouge.rouge_l("The cat sat on the mat.", "the cat is on the mat") == pytest.approx(5 / 6)
  # c = red blue and yellow elementary (5), r = red yellow and blue (4), LCS = 2:
  # P = 2/5, R = 2/4, F = 2PR/(P+R) = 0.4/0.9.
  assert rouge.rouge_l("Red, blue and yellow, elementary.", "Red, yellow and blue.") == \
      pytest.approx(0.4 / 0.9)
  assert rouge.rouge_l("", "anything") == 0.0
  assert rouge.rouge_l_multi("the cat is on the mat", ["red", "The cat is on the mat"]) == 1.0
  assert rouge.lcs_length(list("ABCBDAB"), list("BDCABA")) == 4   # CLRS's example


def test_rouge_l_equals_the_rouge_score_package():
  # RoleBench's ROUGE-L numbers come from Google's rouge-score (rougeL, no stemmer): ours
  # must give the same F on any text, punctuation, digits, case and non-ASCII included.
  from rouge_score import rouge_scorer  # pylint: disable=g-import-not-at-top
  scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)
  vocab = ("the a cat Cat sat on mat. mat, is was red blue-green 3.5 42 caf\u00e9 "
           "na\u00efve don't ROLE play! ? \u2014 \u4e2d\u6587 x").split()
  rng = np.random.default_rng(0)
  worst = 0.0
  for _ in range(500):
    cand, ref = (" ".join(rng.choice(vocab, rng.integers(0, 25))) for _ in range(2))
    worst = max(worst, abs(rouge.rouge_l(cand, ref) - scorer.score(ref, cand)["rougeL"].fmeasure))
  assert worst < 1e-6


def test_medqa_accuracy_and_prompt():
  gen = scripted({"neck stiffness": "Ceftriaxone is first-line. Answer: B",
                  "scurvy": "It is vitamin C, so **C**",
                  "insulin?": "The liver (A)"})
  out = protocols.medqa(os.path.join(FIX, "eval_medqa.jsonl"), gen)
  assert out["num_items"] == 3 and out["score"] == pytest.approx(200 / 3)
  assert out["items"] == {"medqa/1": 100.0, "medqa/2": 100.0, "medqa/3": 0.0}
  prompt = gen.calls[0][0][0].content
  assert "E. Aspirin and heparin" in prompt and "Answer: X" in prompt


def test_gpqa_shuffle_is_deterministic_and_keeps_answer():
  path = os.path.join(FIX, "eval_gpqa.csv")
  a, b = mcq.load_gpqa(path, seed=0), mcq.load_gpqa(path, seed=0)
  assert a == b
  orders = {tuple(t for _, t in item.options) for s in range(8)
            for item in mcq.load_gpqa(path, seed=s)[:1]}
  assert len(orders) > 1   # the seed changes the order
  for item in a:
    assert dict(item.options)[item.answer] in ("1", "Nitrogen")
    assert [k for k, _ in item.options] == ["A", "B", "C", "D"]
  gen = scripted({"photon": f"Answer: {a[0].answer}", "atmosphere": "Nitrogen"})
  out = protocols.gpqa(path, gen)
  assert out["score"] == 100.0 and out["unparsed"] == 0
  assert sorted(out["items"]) == ["gpqa/rec1", "gpqa/rec2"]


def test_missing_file_names_benchmark_and_path(tmp_path):
  with pytest.raises(DataError, match=r"GPQA-Diamond: no file at .*nope\.csv.*--gpqa"):
    protocols.gpqa(str(tmp_path / "nope.csv"), scripted({}))
  with pytest.raises(DataError, match="RoleBench: no file at"):
    protocols.run_ood({"rolebench": str(tmp_path / "x.jsonl")}, scripted({}))
  bigbio = tmp_path / "bigbio.jsonl"
  bigbio.write_text('{"question": "q", "options": [{"key": "A", "value": "x"}, '
                    '{"key": "B", "value": "y"}], "answer_idx": "B"}\n')
  assert mcq.load_medqa(str(bigbio))[0].options == (("A", "x"), ("B", "y"))
  bad = tmp_path / "medqa.jsonl"
  bad.write_text('{"question": "q", "options": {"A": "x"}, "answer_idx": "B"}\n\n{oops\n')
  with pytest.raises(DataError, match=r"medqa.jsonl:1: answer_idx[\s\S]*medqa.jsonl:3: not JSON"):
    mcq.load_medqa(str(bad))
  with pytest.raises(DataError, match=r"ifbench.jsonl:2: not JSON"):
    bad_if = tmp_path / "ifbench.jsonl"
    bad_if.write_text(open(os.path.join(FIX, "eval_ifbench.jsonl"), encoding="utf-8")
                      .readline() + "[1,\n")
    protocols.import_tasks("IFBench", str(bad_if), "ifbench")


def test_rolebench_rouge():
  gen = scripted({"primary colors": "The cat sat on the mat.", "why the sea": "Nothing."})
  out = protocols.rolebench(os.path.join(FIX, "eval_rolebench.jsonl"), gen)
  vals = sorted(out["items"].values())
  assert vals == pytest.approx([0.0, 100 * 5 / 6])   # best of two references
  assert gen.calls[0][0][0].role == "system"          # cast as the role


def test_ifbench_checks():
  gen = scripted({"Describe rain": "Rain falls softly today.",             # 4 words: pass
                  "Describe snow": "Snow is white and cold."})              # 5 words, no chain
  out = protocols.ifbench(os.path.join(FIX, "eval_ifbench.jsonl"), gen)
  assert out["items"] == {"ifbench-e1": 100.0, "ifbench-e2": 0.0}
  assert out["instruction_accuracy"] == pytest.approx(100 * 2 / 3)
  if "NLTK_DATA" in os.environ:   # IFBench's own evaluation beside ours (eval/ifverify)
    assert out["official"] == {
        mode: {"prompt_level": 50.0, "instruction_level": pytest.approx(100 * 2 / 3),
               "prompts": 2, "instructions": 3} for mode in ("strict", "loose")}
  gen2 = scripted({"Describe rain": "Rain.", "Describe snow": "Always bright cold days."})
  out2 = protocols.ifbench(os.path.join(FIX, "eval_ifbench.jsonl"), gen2)
  assert out2["items"] == {"ifbench-e1": 0.0, "ifbench-e2": 100.0}


class CriterionClient(TextClient):
  """Says met iff the criterion's name is listed in `met` (a scripted LLM judge)."""

  identity = "scripted"

  def __init__(self, met):
    self.met = met

  def _complete(self, chats, max_tokens):
    out = []
    for chat in chats:
      text = "\n".join(m.content for m in chat)
      ok = any(name in text for name in self.met)
      out.append('{"explanation": "x", "criteria_met": %s}' % str(ok).lower())
    return out


def test_writingbench_pass_rate():
  judge = Judge(CriterionClient(["Learning objectives", "Form:", "Imagery"]), use_checks=False)
  gen = scripted({"lesson plan": "Plan...", "haiku": "Waves..."})
  out = protocols.writingbench(os.path.join(FIX, "eval_writingbench.jsonl"), gen, judge)
  assert out["items"] == {"writingbench-1": 50.0, "writingbench-2": 50.0}
  judge2 = Judge(CriterionClient(["Title"]), use_checks=False)
  out2 = protocols.writingbench(os.path.join(FIX, "eval_writingbench.jsonl"), gen, judge2)
  assert out2["items"] == {"writingbench-1": 0.0, "writingbench-2": 25.0}


def _task(tid, domain, prompt, crits):
  return Task(tid, domain, (Message("user", prompt),),
              tuple(Criterion(f"c{i}", f"crit {i}", w, check=Check(kind, args))
                    for i, (w, kind, args) in enumerate(crits)))


def test_heldout_seed_rubrics_per_domain():
  kw = ("keyword_present", {"keywords": ["alpha"]})
  tasks = [
      _task("m1", "medical", "say alpha",
            [(3.0, *kw), (1.0, "keyword_present", {"keywords": ["beta"]})]),
      _task("m2", "medical", "say beta", [(1.0, "keyword_present", {"keywords": ["beta"]}),
                                          (-1.0, "keyword_present", {"keywords": ["bad"]})]),
      _task("w1", "writing", "write gamma", [(2.0, "keyword_present", {"keywords": ["gamma"]})]),
  ]
  gen = scripted({"say alpha": "alpha", "say beta": "beta bad", "write gamma": "nothing"})
  out = heldout.evaluate(tasks, gen, Judge(None, use_checks=True))
  # m1: 3/(3+1); m2: (1 - 1)/1; w1: 0/2.
  assert out["items"] == pytest.approx({"m1": 75.0, "m2": 0.0, "w1": 0.0})
  assert out["by_domain"] == pytest.approx({"medical": 37.5, "writing": 0.0})
  assert out["score"] == pytest.approx(18.75)   # mean over domains, not over items
  assert [c[0].content for c in gen.calls[0]] == ["say alpha", "say beta", "write gamma"]
  assert out["invalid"] == 0 and out["num_items"] == 3


def test_heldout_invalid_task_left_out_and_counted():
  tasks = [_task("m1", "medical", "say alpha", [(1.0, "keyword_present", {"keywords": ["alpha"]})]),
           _task("w1", "writing", "penalty only",
                 [(-1.0, "keyword_present", {"keywords": ["bad"]})])]
  out = heldout.evaluate(tasks, scripted({"say alpha": "alpha", "penalty only": "ok"}),
                         Judge(None, use_checks=True))
  # w1 has no positive criterion: no reward, left out of the score and of its domain.
  assert out["items"] == {"m1": 100.0} and out["invalid"] == 1
  assert out["by_domain"] == {"medical": 100.0, "writing": None}
  assert out["score"] == 100.0


class _PartlyDown(CriterionClient):
  """CriterionClient whose requests about a response with "down" in it fail in transport."""

  def _complete(self, chats, max_tokens):
    answers = super()._complete(chats, max_tokens)
    return [TransportError("down") if "down" in chat[-1].content else a
            for chat, a in zip(chats, answers)]


def test_heldout_records_its_unscored_cells_and_names_itself_when_it_stops():
  crits = (Criterion("c1", "Is clear", 1.0), Criterion("c2", "Is kind", 1.0))
  tasks = [Task(f"m{i}", "medical", (Message("user", f"q{i}"),), crits) for i in range(4)]
  gen = scripted({"q0": "fine", "q1": "fine too", "q2": "down", "q3": "ok"})
  lenient = Judge(_PartlyDown(["Is clear"]), use_checks=False,
                  settings=JudgeSettings(max_unscored_share=0.25))
  out = heldout.evaluate(tasks, gen, lenient)
  # m2's two cells of 8 have no verdict; m2 has no reward and is left out.
  assert out["unscored"] == {"count": 2, "share": 0.25, "cells": 8,
                             "causes": {"transport": 2}}
  assert out["invalid"] == 1 and set(out["items"]) == {"m0", "m1", "m3"}
  strict = Judge(_PartlyDown(["Is clear"]), use_checks=False,
                 settings=JudgeSettings(max_unscored_share=0.2))
  with pytest.raises(JudgeError, match=r"^held-out evaluation: judge .*2 of 8 judged cells"):
    heldout.evaluate(tasks, gen, strict)
