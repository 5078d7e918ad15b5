"""Rubric candidates that carry program checks: the rule proposer's tighten and penalty
kinds, the LLM proposer's check field, and the critic measuring them under the program
judge (where a natural-language candidate stays unmeasurable)."""

import dataclasses
import json

import jax
import pytest

from harnessrl_jax.data.frozen import FrozenMap
from harnessrl_jax.data.schema import Check, Criterion, Message, Task
from harnessrl_jax.evolver import Critic, RuleAttributor, RuleProposer
from harnessrl_jax.evolver.llm_json import ParseError
from harnessrl_jax.evolver.proposer import (ProposalRequest, content_words, parse_proposal,
                                            proposer_messages)
from harnessrl_jax.evolver.types import Candidate, CriterionLabel, Feedback, Measurement
from harnessrl_jax.harness import RubricCreate, from_tasks
from harnessrl_jax.judges.config import judge_defaults
from harnessrl_jax.judges.factory import make_judge
from tests.evolver import test_evolver_fixtures as fx


def program_judge():
  cfg = judge_defaults()
  cfg.backend = "program"
  return make_judge(cfg)


def request(task, responses, judge, *, criterion="c2", label=None, feedback=()):
  """(harness, the proposal request for `criterion`) of `responses` judged under H_0."""
  h = from_tasks([task])
  (g,) = fx.record([task], h, [responses], judge)
  att = RuleAttributor(fx.settings()).labels(g)
  lab = label or att.label_of(criterion)
  return h, ProposalRequest(h, g, lab, att, None, step=0, round=len(feedback),
                            feedback=tuple(feedback))


def propose(req):
  cand, _ = RuleProposer(fx.settings()).propose(req)
  return cand


def measure(cand, h, req, judge):
  meas, _, _ = Critic(judge, fx.settings()).measure(cand, h, req.group, req.label, None, 0,
                                                    jax.random.key(0))
  return meas


# ---- the critic under the program judge (fx.PADDED: c2 is word_count >= 30, met only by
# the two responses padded with one sentence said six times)


def test_tighten_is_measured_and_accepted_under_the_program_judge():
  judge = program_judge()
  h, req = request(fx.PADDED, fx.PADDED_RESPONSES, judge)
  assert req.label.label == "spurious"
  cand = propose(req)
  assert cand.kind == "rubric:tighten"
  (op,) = cand.ops
  assert op.check.to_json() == {"type": "all_of", "checks": [
      {"type": "fluent_word_count", "min": 30}, {"type": "ends_complete"}]}
  meas = measure(cand, h, req, judge)
  # The padded responses lose c2 (40 points): r 0.5 -> 0.3, inside the band [3.1, 28].
  assert not meas.unmeasurable and meas.accepted, meas.reasons
  assert meas.delta == pytest.approx(20.0, abs=1e-4)


def test_the_penalty_with_a_check_is_measured_after_tighten():
  judge = program_judge()
  h, req = request(fx.PADDED, fx.PADDED_RESPONSES, judge)
  tighten = propose(req)
  sent_back = Feedback(tighten, measure(tighten, h, req, judge))
  _, req = request(fx.PADDED, fx.PADDED_RESPONSES, judge, feedback=[sent_back])
  cand = propose(req)
  assert cand.kind == "rubric:negative"
  (op,) = cand.ops
  assert op.weight == -10.0 and op.check.to_json() == {"type": "repeated_sentences", "min": 2}
  meas = measure(cand, h, req, judge)
  # The penalty is met by the two padded responses: 0.5 -> 0.45.
  assert not meas.unmeasurable and meas.accepted, meas.reasons
  assert meas.delta == pytest.approx(5.0, abs=1e-4)


def test_a_natural_language_candidate_stays_unmeasurable_under_the_program_judge():
  judge = program_judge()
  h, req = request(fx.PADDED, fx.PADDED_RESPONSES, judge)
  words = RubricCreate("t-pad", "c2-hack", "Pads the response with repetition or filler",
                       -10.0)
  meas = measure(Candidate("rubric", "t-pad", "c2", (words,), "rubric:negative"), h, req,
                 judge)
  assert meas.unmeasurable and meas.delta is None
  assert meas.reasons == ("unmeasurable: no verdict on changed criteria c2-hack",)
  # The same penalty with a check gets verdicts: a real Delta.
  checked = dataclasses.replace(words, check=Check("repeated_sentences",
                                                   FrozenMap({"min": 2})))
  meas = measure(Candidate("rubric", "t-pad", "c2", (checked,), "rubric:negative"), h, req,
                 judge)
  assert not meas.unmeasurable and meas.delta == pytest.approx(5.0, abs=1e-4)


# ---- the rule proposer's checks


def test_an_anchor_is_never_tightened():
  anchored = Task("t-pad", "science", fx.PADDED.prompt, (
      fx.PADDED.criteria[0], dataclasses.replace(fx.PADDED.criteria[1], anchor=True)))
  _, req = request(anchored, fx.PADDED_RESPONSES, program_judge())
  cand = propose(req)
  assert cand.kind == "rubric:negative" and cand.ops[0].check.type == "repeated_sentences"


def test_an_anchor_met_by_cut_off_replies_gets_a_cut_off_penalty_that_is_measured():
  anchored = Task("t-pad", "science", fx.PADDED.prompt, (
      fx.PADDED.criteria[0], dataclasses.replace(fx.PADDED.criteria[1], anchor=True)))
  long = ("Leaves change colour in autumn because the days get shorter and cooler. The tree "
          "stops making the green pigment that it uses to capture light. As the weeks go by "
          "the other colours in the leaf become easier to")
  responses = fx.PADDED_RESPONSES[:2] + (long, long.replace("Leaves", "Foliage"))
  judge = program_judge()
  h, req = request(anchored, responses, judge)
  assert req.label.label == "spurious"
  cand = propose(req)
  assert cand.kind == "rubric:negative"
  (op,) = cand.ops
  assert op.check.to_json() == {"type": "cut_off"} and op.weight == -10.0
  assert op.text.startswith("Runs on to the length limit and is cut off mid-sentence")
  meas = measure(cand, h, req, judge)
  assert not meas.unmeasurable and meas.delta is not None and meas.delta > 0


def test_no_check_candidates_when_no_satisfying_response_is_padded():
  # The long responses say distinct sentences: the tightened check would not move them,
  # and no penalty check detects a hack, so only the penalty in words is left.
  long = ("Leaves turn in autumn because trees prepare for winter and stop feeding the "
          "leaves. Cold nights slow the green pigment, and the red and yellow ones show. "
          "Each tree follows its own timing, so colours vary across a forest.")
  responses = fx.PADDED_RESPONSES[:2] + (long, long.replace("Leaves", "Foliage"))
  _, req = request(fx.PADDED, responses, program_judge())
  assert req.label.label == "spurious"
  cand = propose(req)
  assert cand.kind == "rubric:negative" and cand.ops[0].check is None
  assert cand.ops[0].text.startswith("Pads the response with repetition or filler")


KEYWORD = Task("t-kw", "medical", (Message("user", "How can I sleep better at night?"),), (
    Criterion("c1", "Suggests a fixed bedtime", 6.0, check=fx.kw("bedtime")),
    Criterion("c2", "Talks about sleep in depth", 4.0, anchor=False, check=Check(
        "keyword_count", FrozenMap({"keyword": "sleep", "min": 3}))),
))
KEYWORD_RESPONSES = (
    "Keep a fixed bedtime.",
    "Pick one bedtime, always.",
    "Sleep, sleep, sleep. Sleep well. Sleep well.",
    "Sleep matters. Sleep matters. Sleep matters a lot.",
)


def test_keyword_count_tightens_to_distinct_sentences():
  judge = program_judge()
  h, req = request(KEYWORD, KEYWORD_RESPONSES, judge)
  cand = propose(req)
  assert cand.kind == "rubric:tighten"
  (op,) = cand.ops
  assert op.check.to_json() == {"type": "keyword_sentence_count", "keywords": ["sleep"],
                                "min": 3}
  assert op.text == ('Talks about sleep in depth; each distinct sentence that says "sleep" '
                     'counts once, however often it repeats it.')
  meas = measure(cand, h, req, judge)
  assert meas.accepted and meas.delta == pytest.approx(20.0, abs=1e-4)


SORRY = Task("t-sorry", "medical", (
    Message("user", "My headache keeps me awake at night, what can I do?"),), (
        Criterion("c1", "Suggests hydration", 6.0, check=fx.kw("water")),
        Criterion("c2", "Acknowledges the user's discomfort", 4.0, anchor=False,
                  check=fx.kw("sorry")),
    ))
SORRY_RESPONSES = (
    "Drink a glass of water and rest in a dark room.",
    "Some water before bed and a cool room often help.",
    "I'm sorry. Try counting backwards from one hundred.",
    "I am so sorry. Lie still and breathe slowly.",
)


def test_a_stock_phrase_check_must_share_a_sentence_with_the_prompt_subject():
  assert content_words(SORRY.prompt[0].content) == ["headache", "keeps", "awake", "night"]
  assert content_words("Explain photosynthesis, please.") == ["photosynthesis"]
  judge = program_judge()
  h, req = request(SORRY, SORRY_RESPONSES, judge)
  cand = propose(req)
  assert cand.kind == "rubric:tighten"
  (op,) = cand.ops
  assert op.check.to_json() == {"type": "keywords_in_same_sentence", "keywords": ["sorry"],
                                "with": ["headache", "keeps", "awake", "night"]}
  assert "a stock phrase on its own does not count" in op.text
  meas = measure(cand, h, req, judge)
  assert meas.accepted and meas.delta == pytest.approx(20.0, abs=1e-4)


def test_stock_phrase_evidence_gives_a_phrase_penalty():
  # fx.SPURIOUS: c2 has no check (an LLM judges it), so the penalty comes after the
  # natural-language rewrite; its check lists the stock phrases the evidence quotes.
  h, req = request(fx.SPURIOUS, fx.SPURIOUS_RESPONSES, fx.judge())
  rewrite = propose(req)
  assert rewrite.kind == "rubric:rewrite" and rewrite.ops[0].check is None
  sent_back = Feedback(rewrite, measure(rewrite, h, req, fx.judge()))
  _, req = request(fx.SPURIOUS, fx.SPURIOUS_RESPONSES, fx.judge(), feedback=[sent_back])
  cand = propose(req)
  assert cand.kind == "rubric:negative"
  assert cand.ops[0].check.to_json() == {
      "type": "keyword_present", "mode": "any",
      "keywords": ["All requirements met", "All requirements have been met"]}
  assert cand.ops[0].text.startswith('Uses stock statements such as "All requirements met"')
  meas = measure(cand, h, req, fx.judge())
  assert meas.accepted and meas.delta == pytest.approx(5.0, abs=1e-4)


def test_a_penalty_that_would_hit_honest_responses_is_not_proposed():
  # Every response repeats a sentence: the repetition check does not separate the
  # satisfying responses from the others, so the penalty falls back to words.
  responses = tuple(r + " " + r for r in fx.PADDED_RESPONSES[:2]) + fx.PADDED_RESPONSES[2:]
  label = CriterionLabel("c2", "spurious", 0.7, evidence=("Trees do many things.",))
  tighten = Candidate("rubric", "t-pad", "c2", (), "rubric:tighten")
  sent_back = Feedback(tighten, Measurement(0.0, (3.1, 28.0), False, ("(i) sign",)))
  _, req = request(fx.PADDED, responses, program_judge(), label=label, feedback=[sent_back])
  cand = propose(req)
  assert cand.kind == "rubric:negative" and cand.ops[0].check is None


# ---- the LLM proposer's check field


def test_llm_proposer_is_told_about_checks_and_they_are_parsed():
  _, req = request(fx.PADDED, fx.PADDED_RESPONSES, program_judge())
  user = proposer_messages(req)[-1].content
  assert '"check"' in user and "- distinct_sentence_word_count(min?: int, max?: int): " in user
  assert "- repeated_sentences(min?: int, max?: int): " in user
  op = {"op": "rubric_rewrite", "task_id": "t-pad", "criterion_id": "c2",
        "text": "Is thorough; repeated sentences count once",
        "check": {"type": "distinct_sentence_word_count", "min": 30}}
  cand = parse_proposal(json.dumps({"kind": "tighten", "rationale": "r", "ops": [op]}), req)
  assert cand.ops[0].check == Check("distinct_sentence_word_count", FrozenMap({"min": 30}))
  bad = {**op, "check": {"type": "distinct_sentence_word_count"}}
  with pytest.raises(ParseError, match=r"ops\[0\]: rubric_rewrite: invalid check: .*min/max"):
    parse_proposal(json.dumps({"kind": "tighten", "rationale": "r", "ops": [bad]}), req)
  # Other routes are not told about checks.
  sat = ProposalRequest(req.harness, req.group, CriterionLabel("c1", "saturated", 1.0),
                        req.attribution, None, step=0, round=0)
  assert "distinct_sentence_word_count(" not in proposer_messages(sat)[-1].content


def test_llm_proposal_repeating_an_op_word_for_word_applies_it_once():
  _, req = request(fx.PADDED, fx.PADDED_RESPONSES, program_judge())
  op = {"op": "rubric_rewrite", "task_id": "t-pad", "criterion_id": "c2",
        "text": "Is thorough; repeated sentences count once"}
  cand = parse_proposal(json.dumps({"kind": "k", "rationale": "r", "ops": [op, op]}), req)
  assert len(cand.ops) == 1
  other = {**op, "text": "Is thorough in other words"}
  cand = parse_proposal(json.dumps({"kind": "k", "rationale": "r", "ops": [op, other]}), req)
  assert len(cand.ops) == 2   # two intents for one target: the critic's (iii) decides


def test_llm_proposer_is_told_that_guidance_for_a_penalty_says_to_avoid_it():
  _, req = request(fx.PADDED, fx.PADDED_RESPONSES, program_judge())
  blind = ProposalRequest(req.harness, req.group, CriterionLabel("c1", "blind", 1.0),
                          req.attribution, None, step=0, round=0)
  assert "must say to avoid what it names" in proposer_messages(blind)[-1].content
  assert "must say to avoid" not in proposer_messages(req)[-1].content


# ---- guidance for a penalty every answer incurs: the group's own answer, repaired


CUT = ("Leaves change colour in autumn because the days get shorter and cooler. The tree "
       "stops making the green pigment that it uses to capture light. As the weeks go by "
       "the other colours in the leaf become easier to")


def test_a_blind_cut_off_penalty_gets_its_own_answer_without_the_unfinished_tail():
  penalised = Task("t-pad", "science", fx.PADDED.prompt, fx.PADDED.criteria + (
      Criterion("c2-hack", "Runs on to the length limit and is cut off mid-sentence", -10.0,
                check=Check("cut_off")),))
  responses = (CUT, CUT.replace("Leaves", "Foliage"), CUT.replace("tree", "plant"),
               CUT.replace("cooler", "colder"))
  _, req = request(penalised, responses, program_judge(), criterion="c2-hack")
  assert req.label.label == "blind" and req.label.route == "guidance"
  cand = propose(req)  # the repaired answer is tried first
  assert cand.kind == "guidance:reference"
  (op,) = cand.ops
  best = responses[int(req.group.rewards.argmax())]
  finished = best[:best.index("light.") + len("light.")]
  assert op.content == (
      "This answer avoids the fault \"Runs on to the length limit and is cut off "
      f"mid-sentence\":\n{finished}\n\nThe same answer with the fault:\n{best}")


def test_no_repaired_answer_when_the_edit_cannot_clear_the_penalty():
  # A one-sentence reply cut off has nothing to drop; without memory there is no donor.
  penalised = Task("t-pad", "science", fx.PADDED.prompt, fx.PADDED.criteria + (
      Criterion("c2-hack", "Runs on to the length limit", -10.0, check=Check("cut_off")),))
  one = "Leaves change colour because the days get shorter and the tree stops making"
  _, req = request(penalised, (one,) * 4, program_judge(), criterion="c2-hack")
  assert propose(req).kind == "guidance:criterion"
  tried = Feedback(Candidate("guidance", "t-pad", "c2-hack", (), "guidance:criterion"),
                   Measurement(0.0, (10.2, 28.0), False, ("sign",)))
  cand = propose(dataclasses.replace(req, feedback=(tried,), round=1))
  assert cand.kind == "guidance:critique"


def upper_task(reference):
  return Task("t-up", "writing", (Message("user", "Write a haiku about coffee."),), (
      Criterion("c1", "Is about coffee", 5.0, check=Check(
          "keyword_present", FrozenMap({"keywords": ("coffee",), "mode": "any"}))),
      Criterion("c2", "Is written entirely in capital letters", 5.0,
                check=Check("all_uppercase"))), reference_answer=reference)


HAIKUS = ("Coffee in the cup, warm steam", "Morning coffee, dark and sweet",
          "Black coffee wakes me", "Slow coffee at dawn")


def test_a_blind_criterion_gets_the_task_reference_that_its_check_confirms():
  ref = "STEAM FROM BLACK COFFEE\nTHE KITCHEN SLOWLY WAKES UP"
  _, req = request(upper_task(ref), HAIKUS, program_judge())
  assert req.label.label == "blind"
  cand = propose(req)  # the task's own example is tried first
  assert cand.kind == "guidance:reference"
  assert cand.ops[0].content == (
      "An answer that meets the requirement \"Is written entirely in capital letters\":\n"
      f"{ref}\n\nAn answer that missed it:\n{HAIKUS[0]}")


def test_a_reference_its_check_does_not_confirm_is_not_shown():
  _, req = request(upper_task("Steam from black coffee"), HAIKUS, program_judge())
  assert propose(req).kind == "guidance:criterion"


def test_own_finished_answer_from_memory_as_the_penalty_reference():
  """evolver.guidance_own_memory (issue 46): a one-sentence cut-off reply has nothing the
  edits can repair; the task's own earlier finished answer in memory is shown instead, and
  an earlier answer that incurs the penalty, or another task's, is not."""
  from harnessrl_jax.memory.store import Example  # noqa: PLC0415
  penalised = Task("t-pad", "science", fx.PADDED.prompt, fx.PADDED.criteria + (
      Criterion("c2-hack", "Runs on to the length limit", -10.0, check=Check("cut_off")),))
  one = "Leaves change colour because the days get shorter and the tree stops making"
  _, req = request(penalised, (one,) * 4, program_judge(), criterion="c2-hack")
  memory = fx.new_memory(req.harness)
  finished = "Shorter days stop the chlorophyll, so the other pigments show."
  memory.donors[("t-pad", "c1")] = (Example(finished, 0.6, 0), None)
  memory.donors[("t-pad", "c2")] = (Example(one + " the", 0.9, 0), None)   # cut off
  memory.donors[("t-other", "c1")] = (Example("Another task's finished answer.", 1.0, 0), None)
  req = dataclasses.replace(req, memory=memory)
  assert propose(req).kind == "guidance:criterion"   # off by default: as before
  cand, _ = RuleProposer(fx.settings(guidance_own_memory=True)).propose(req)
  assert cand.kind == "guidance:reference"
  (op,) = cand.ops
  assert op.content == ("An earlier answer of yours to this task that avoids the fault "
                        f"\"Runs on to the length limit\":\n{finished}\n\nThis time's answer, "
                        f"with the fault:\n{one}")
