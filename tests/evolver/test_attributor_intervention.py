"""The attributor's intervention (evolver.intervention): the surface feature is edited out of
the satisfying responses and the edited texts are regraded by the judge; "spurious" only
when the verdict flips. And the per-criterion attribution log of the evolver step."""

import json

import jax
import pytest

from harnessrl_jax.config import base_config
from harnessrl_jax.data.frozen import FrozenMap
from harnessrl_jax.data.schema import Check, Criterion, Message, Task
from harnessrl_jax.errors import ConfigError, HarnessError
from harnessrl_jax.evolver import (Critic, EvolverConfig, Evolver, RuleAttributor,
                                   RuleProposer, build_evolver, make_attributor)
from harnessrl_jax.evolver.attributor import Intervention, edited_versions, removed_sentences
from harnessrl_jax.evolver import phrases
from harnessrl_jax.harness import from_tasks
from harnessrl_jax.judges.client import TransportError
from harnessrl_jax.judges.judge import Judge
from tests.evolver import test_evolver_fixtures as fx

# (a) padding made of token salad: c2 of fx.PADDED (at least 30 words) met only by the
# responses padded with sentences that do not read as text (varied, so none is a repeat).
SALAD_RESPONSES = (
    "In autumn chlorophyll breaks down and yellow pigments show through.",
    "Less light means the chlorophyll fades, revealing other pigments.",
    "Leaves change colour in autumn for many reasons. Xqzt vlorp brunk kelo mrap zint. "
    "Vlorp kelo xqzt brunk zint mrap. Brunk zint vlorp mrap kelo xqzt. Kelo mrap zint xqzt "
    "vlorp brunk.",
    "Trees do many things in the autumn months. Zint brunk kelo vlorp xqzt mrap. Mrap xqzt "
    "kelo zint brunk vlorp. Kelo brunk mrap vlorp zint xqzt. Vlorp mrap brunk xqzt kelo zint.",
)

# (b) c2 of fx.PADDED met by the responses that are long because they explain more, in
# fluent, distinct sentences (and a terse reference, which the filler edit drops).
THOROUGH_RESPONSES = (
    "In autumn the chlorophyll in leaves breaks down. Yellow and orange carotenoids that "
    "were hidden all summer then show through. Some trees also make red anthocyanins when "
    "the nights turn cold. See Lee 2005.",
    "Shorter days tell the tree to stop making chlorophyll, so the green colour fades. The "
    "yellow carotenoids were in the leaf all along and now show. Sugars trapped in the leaf "
    "can turn it red on sunny days. See Lee 2005.",
    "The chlorophyll fades in autumn.",
    "Cold weather breaks the chlorophyll down and leaves go brown.",
)

# (b) the longer responses are longer because they explain more, and they name the required
# content word in their first sentence: length separates them, but does not carry the verdict.
CONTENT = Task("t-content", "science", (Message("user", "Why do leaves change colour?"),), (
    Criterion("c1", "Mentions chlorophyll", 6.0, check=fx.kw("chlorophyll")),
    Criterion("c2", "Mentions autumn", 4.0, check=fx.kw("autumn")),
))
CONTENT_RESPONSES = (
    "In autumn the chlorophyll in leaves breaks down. Yellow and orange carotenoids then "
    "show through. Some trees also make red anthocyanins when the nights get cold.",
    "Leaves change colour in autumn because it gets cold.",
    "Chlorophyll fades in autumn as the days get shorter. The green pigment hides the other "
    "colours all summer. Once it is gone the leaves look yellow or red.",
    "In autumn the weather turns and leaves go brown.",
)

# (c) a criterion met only through a stock closer ("I hope this helps"), by the responses
# that miss the content criterion.
CLOSER = Task("t-closer", "science", (Message("user", "Explain why the sky is blue."),), (
    Criterion("c1", "Explains Rayleigh scattering", 6.0, check=fx.kw("scattering")),
    Criterion("c2", "Closes by offering help", 4.0, anchor=False,
              check=fx.kw("I hope this helps")),
))
CLOSER_RESPONSES = (
    "The sky is blue because of Rayleigh scattering by air molecules. Short waves scatter more.",
    "Sunlight scattering by the air favours blue light. Red light passes straight through.",
    "The sky is blue because it reflects the ocean. I hope this helps!",
    "Blue is the colour of the air itself. I hope this helps.",
)

# (e) the same closer, but a non-satisfier opens with another stock phrase and every response
# explains the science: no correlational signal fires, the intervention still finds it.
HIDDEN_RESPONSES = (
    "Rayleigh scattering by air molecules favours blue light. I hope this helps.",
    "Sunlight scattering by the air makes the sky look blue. I hope this helps.",
    "Certainly! Blue light has the most scattering in the air.",
    "Short blue waves see the most scattering by the air.",
)


def program_judge() -> Judge:
  return Judge(None, use_checks=True)


def group_of(task, responses, j=None):
  (g,) = fx.record([task], from_tasks([task]), [responses], j or program_judge())
  return g


def intervening(j=None, **overrides) -> RuleAttributor:
  cfg = fx.settings(intervention=True, **overrides)
  return make_attributor(cfg, judge=j or program_judge())


def by_id(att):
  return {lab.criterion_id: lab for lab in att.labels}


def test_the_edits_change_only_what_they_target():
  padded = fx.PADDED_RESPONSES[2]
  assert phrases.drop_repetition(padded) == (
      "Leaves change colour in autumn for many reasons. This is an important point to "
      "consider.")
  assert phrases.drop_repetition("It is very, very VERY blue. Blue sky. blue SKY!") == \
      "It is very blue. Blue sky."
  assert phrases.strip_generic("Rain. I hope this helps!") == "Rain."
  plain = "Nothing  to   take out.\nIt is all fine."
  assert phrases.strip_generic(plain) is plain and phrases.drop_repetition(plain) is plain
  assert phrases.drop_filler(plain) is plain
  # token salad and sentences under 3 words go; terse text without function words too
  assert phrases.drop_filler("The sky is blue. Xqzt vlorp brunk kelo. Rain. Blue sky waves.") \
      == "The sky is blue."
  # One edit at a time, and all in turn when two or more change the response.
  assert set(edited_versions(padded)) == {"repetition"}
  out = edited_versions(padded + " I hope this helps. Xqzt vlorp brunk kelo mrap zint.")
  assert set(out) == {"phrase", "repetition", "filler", "all"}
  cut = edited_versions("The sky is blue. Light scatters in the air and the")
  assert cut == {"unfinished": "The sky is blue."}
  assert out["all"] == ("Leaves change colour in autumn for many reasons. This is an "
                        "important point to consider.")
  assert removed_sentences(padded, out["repetition"]) == \
      ["This is an important point to consider."] * 5


def test_token_salad_padding_is_spurious_and_the_filler_edit_confirms_it():
  """(a) word_count{min: 30} met only by the responses padded with token salad."""
  g = group_of(fx.PADDED, SALAD_RESPONSES)
  before = by_id(RuleAttributor(fx.settings()).labels(g))["c2"]
  assert before.label == "spurious" and dict(before.signals)["by_length"]
  att, cost = intervening().attribute(g)
  lab = by_id(att)["c2"]
  sig = dict(lab.signals)
  assert lab.label == "spurious" and lab.confidence == 1.0 and lab.route == "rubric"
  assert sig["intervention_edits"] == ("filler",) and sig["flipped_by"] == "filler"
  assert (sig["filler_edited"], sig["filler_flipped"]) == (2, 2)
  assert sig["filler_rest_change_points"] == 0.0    # c1 missed before and after
  assert lab.evidence == ("Xqzt vlorp brunk kelo mrap zint.", "Vlorp kelo xqzt brunk zint mrap.",
                          "Brunk zint vlorp mrap kelo xqzt.")
  assert (cost.judge_cells, cost.llm_requests) == (2 * 2, 0)


def test_a_padding_criterion_is_spurious_by_length_and_the_intervention_confirms_it():
  """(a) word_count{min: 30} met only by the responses padded with a repeated sentence."""
  g = group_of(fx.PADDED, fx.PADDED_RESPONSES)
  before = by_id(RuleAttributor(fx.settings()).labels(g))["c2"]
  assert before.label == "spurious" and dict(before.signals)["by_length"]
  att, cost = intervening().attribute(g)
  lab = by_id(att)["c2"]
  sig = dict(lab.signals)
  assert lab.label == "spurious" and lab.confidence == 1.0
  assert sig["correlational_label"] == "spurious" and sig["by_length"]
  assert sig["flipped_by"] == "repetition"     # the first edit (in order) that flips it
  assert sig["intervention_edits"] == ("repetition",)    # the filler reads as text
  assert (sig["repetition_edited"], sig["repetition_flipped"]) == (2, 2)
  assert sig["repetition_rest_change_points"] == 0.0    # c1 missed before and after
  assert lab.evidence == ("This is an important point to consider.",)
  # c1 (the content criterion) has no surface feature to edit: untouched.
  assert by_id(att)["c1"] == by_id(RuleAttributor(fx.settings()).labels(g))["c1"]
  # One regrade of the 2 deduplicated texts under both criteria; no LLM asked.
  assert (cost.judge_cells, cost.llm_requests, cost.rollouts) == (4, 0, 0)
  assert cost.unscored.count == 0


def test_length_from_thoroughness_is_not_spurious():
  """(b) the precision gain: word_count{min: 30} met by the responses that say more, in
  fluent, distinct sentences. The correlational rule calls it spurious by length; the
  length cut this intervention used to make (to the others' word count) flipped it by
  construction, a false positive. The filler edit drops only the terse reference, and the
  responses stay long enough: agree."""
  g = group_of(fx.PADDED, THOROUGH_RESPONSES)
  before = by_id(RuleAttributor(fx.settings()).labels(g))["c2"]
  assert before.label == "spurious" and dict(before.signals)["by_length"]
  att, cost = intervening().attribute(g)
  lab = by_id(att)["c2"]
  sig = dict(lab.signals)
  assert lab.label == "agree" and lab.route is None and lab.evidence == ()
  assert sig["correlational_label"] == "spurious"
  assert sig["correlational_confidence"] == pytest.approx(before.confidence)
  assert sig["intervention_edits"] == ("filler",)
  assert (sig["filler_edited"], sig["filler_flipped"]) == (2, 0)
  assert sig["filler_rest_change_points"] == 0.0 and sig["flipped_by"] == ""
  assert cost.judge_cells == 2 * 2


# (c) c2 of fx.PADDED met only by fluent replies run on to the token limit: without their
# cut-off last sentence they fall under 30 words.
CUT_OFF_RESPONSES = (
    "In autumn chlorophyll breaks down and yellow pigments show through.",
    "Less light means the chlorophyll fades, revealing other pigments.",
    "Leaves change colour in autumn because the days get shorter and cooler. The tree "
    "stops making the green pigment that it uses to capture light. As the weeks go by the "
    "other colours in the leaf become easier to",
    "Each autumn the leaves of many trees turn red, orange and yellow. It happens when the "
    "nights grow long and the air turns cold. Then the tree pulls what it can back into "
    "its branches and the",
)


def test_a_length_criterion_met_by_cut_off_replies_is_spurious():
  g = group_of(fx.PADDED, CUT_OFF_RESPONSES)
  assert phrases.drop_unfinished(CUT_OFF_RESPONSES[0]) is CUT_OFF_RESPONSES[0]
  assert phrases.drop_unfinished("Just one unfinished sentence and") == \
      "Just one unfinished sentence and"
  att, _ = intervening().attribute(g)
  lab = by_id(att)["c2"]
  sig = dict(lab.signals)
  assert lab.label == "spurious" and lab.route == "rubric"
  assert sig["intervention_edits"] == ("unfinished",) and sig["flipped_by"] == "unfinished"
  assert (sig["unfinished_edited"], sig["unfinished_flipped"]) == (2, 2)
  assert sig["unfinished_rest_change_points"] == 0.0
  assert lab.evidence == ("As the weeks go by the other colours in the leaf become easier to",
                          "Then the tree pulls what it can back into its branches and the")


_LONG = ("Leaves change colour in autumn because the days get shorter and cooler. The tree "
         "stops making the green pigment that it uses to capture light.")


def test_a_length_criterion_every_reply_meets_by_running_on_is_spurious_not_saturated():
  """All four replies meet c2 (30 words) only with their cut-off tails: the correlational
  rule sees no contrast and says saturated; the unfinished edit flips every one."""
  replies = tuple(f"{_LONG} {tail}" for tail in (
      "As the weeks go by the other colours in the leaf become easier to",
      "Then the tree pulls what it can back into its branches and the",
      "Soon the reds and the yellows that were hidden all summer start to",
      "By the end of the season most of the leaves have dropped to the"))
  g = group_of(fx.PADDED, replies)
  assert by_id(RuleAttributor(fx.settings()).labels(g))["c2"].label == "saturated"
  att, _ = intervening().attribute(g)
  lab = by_id(att)["c2"]
  sig = dict(lab.signals)
  assert lab.label == "spurious" and lab.route == "rubric"
  assert sig["correlational_label"] == "saturated" and sig["flipped_by"] == "unfinished"
  assert (sig["unfinished_edited"], sig["unfinished_flipped"]) == (4, 4)


def test_a_saturated_criterion_no_edit_flips_stays_saturated():
  # the tails are cut off, but the finished sentences alone hold 30 words
  replies = tuple(f"{_LONG} It happens every year in the same way. {tail}" for tail in (
      "As the weeks go", "Then the tree", "Soon the reds", "By the end"))
  g = group_of(fx.PADDED, replies)
  before = by_id(RuleAttributor(fx.settings()).labels(g))["c2"]
  assert before.label == "saturated"
  lab = by_id(intervening().attribute(g)[0])["c2"]
  sig = dict(lab.signals)
  assert lab.label == "saturated" and lab.confidence == before.confidence
  assert (sig["unfinished_edited"], sig["unfinished_flipped"]) == (4, 0)
  assert sig["flipped_by"] == "" and sig["correlational_label"] == "saturated"
  # finished replies: nothing to edit, the label as it was
  done = group_of(fx.PADDED, (f"{_LONG} It happens every year in the same way.",) * 4)
  assert by_id(intervening().attribute(done)[0])["c2"] == \
      by_id(RuleAttributor(fx.settings()).labels(done))["c2"]


def test_length_that_carries_real_content_is_not_spurious():
  """(b) the correlational rule calls the content criterion c1 spurious by length; no edit
  changes the long responses (no stock phrase, repetition or filler): agree, no regrade."""
  g = group_of(CONTENT, CONTENT_RESPONSES)
  before = by_id(RuleAttributor(fx.settings()).labels(g))["c1"]
  assert before.label == "spurious" and dict(before.signals)["by_length"]
  att, cost = intervening().attribute(g)
  lab = by_id(att)["c1"]
  sig = dict(lab.signals)
  assert lab.label == "agree" and lab.route is None and lab.evidence == ()
  assert sig["correlational_label"] == "spurious"
  assert sig["correlational_confidence"] == pytest.approx(before.confidence)
  assert sig["intervention_edits"] == () and sig["flipped_by"] == ""
  assert sig["intervention_note"] == "no edit changed a satisfying response"
  assert cost.judge_cells == 0


def test_a_stock_closer_criterion_flips_when_the_closer_is_dropped():
  """(c) keyword_present "I hope this helps", met only through the stock closer."""
  g = group_of(CLOSER, CLOSER_RESPONSES)
  att, _ = intervening().attribute(g)
  lab = by_id(att)["c2"]
  sig = dict(lab.signals)
  assert lab.label == "spurious" and lab.route == "rubric"
  assert sig["correlational_label"] == "spurious" and sig["phrase"]
  assert sig["flipped_by"] == "phrase" and sig["phrase_flipped"] == 2
  assert lab.evidence == ("I hope this helps!", "I hope this helps.")
  assert lab.wording == "Closes by offering help"


def test_a_stock_closer_the_correlational_rules_miss_is_found():
  """A non-satisfier also carries a stock phrase and the rest of the rubric agrees: the
  correlational label is agree; dropping the closer flips every satisfier."""
  g = group_of(CLOSER, HIDDEN_RESPONSES)
  assert by_id(RuleAttributor(fx.settings()).labels(g))["c2"].label == "agree"
  lab = by_id(intervening().attribute(g)[0])["c2"]
  assert lab.label == "spurious" and dict(lab.signals)["correlational_label"] == "agree"
  assert dict(lab.signals)["flipped_by"] == "phrase"


def test_flip_share_and_rest_tolerance_decide():
  # Deduplicating changes both satisfiers of c2 (at least 30 words) and flips one: 1 of 2 is
  # no majority.
  g = group_of(fx.PADDED, (
      "In autumn the chlorophyll in leaves breaks down and the yellow and orange pigments "
      "that were hidden all summer finally show through the fading green.",
      "Shorter days and colder nights make trees stop making chlorophyll, so the green fades "
      "and other pigments such as carotenoids become visible in the leaves.",
      "Leaves change colour in autumn for many reasons." + " This is an important point to "
      "consider." * 4,
      "Trees pull nutrients back from their leaves before winter. The chlorophyll breaks down "
      "first. Yellow carotenoids remain, and some species make red anthocyanins. Sugars "
      "trapped in the leaf can deepen the red in sunny weather. The chlorophyll breaks down "
      "first."))
  lab = by_id(intervening().attribute(g)[0])["c2"]
  sig = dict(lab.signals)
  assert sig["intervention_edits"] == ("repetition",)
  assert (sig["repetition_edited"], sig["repetition_flipped"]) == (2, 1)
  assert lab.label == "agree"
  lab = by_id(intervening(intervention_flip_share=0.4).attribute(g)[0])["c2"]
  assert lab.label == "spurious" and lab.confidence == 0.5
  # A filler edit that takes the content with it: the science is said tersely, with (almost)
  # no function words, so it does not read as text; it goes, and the rest of the rubric (c1)
  # falls by 100 points.
  task = Task("t-rest", "science", CLOSER.prompt, (
      CLOSER.criteria[0],
      Criterion("c2", "Is detailed", 4.0, anchor=False,
                check=Check("word_count", FrozenMap({"min": 14})))))
  g = group_of(task, (
      "The sky looks blue on a clear day at noon. Rayleigh scattering favours short blue "
      "waves.",
      "The sky is a deep blue on most clear days. Rayleigh scattering by air molecules "
      "favours short waves.",
      "The sky is blue.", "It is blue today."))
  lab = by_id(intervening().attribute(g)[0])["c2"]
  sig = dict(lab.signals)
  assert sig["intervention_edits"] == ("filler",)
  assert sig["filler_flipped"] == 2 and sig["filler_rest_change_points"] == -100.0
  assert lab.label == "agree" and sig["correlational_label"] == "spurious"
  lenient = by_id(intervening(intervention_rest_points=100.0).attribute(g)[0])["c2"]
  assert lenient.label == "spurious" and dict(lenient.signals)["flipped_by"] == "filler"


class _Down(fx.FakeJudgeClient):
  def _complete(self, chats, max_tokens):
    super()._complete(chats, max_tokens)
    return [TransportError("down") for _ in chats]


def test_llm_judged_criterion_is_regraded_and_lost_cells_keep_the_label():
  g = group_of(fx.SPURIOUS, fx.SPURIOUS_RESPONSES, fx.judge())
  lab, cost = intervening(fx.judge()).attribute(g)
  lab = by_id(lab)["c2"]
  assert lab.label == "spurious" and dict(lab.signals)["flipped_by"] == "phrase"
  # c2 has no check: the fake LLM judge answers for the two edited texts.
  assert (cost.judge_cells, cost.llm_requests) == (4, 2)
  before = by_id(RuleAttributor(fx.settings()).labels(g))["c2"]
  att, cost = intervening(Judge(_Down(), use_checks=True)).attribute(g)
  lab = by_id(att)["c2"]
  sig = dict(lab.signals)
  assert (lab.label, lab.confidence, lab.evidence) == (before.label, before.confidence,
                                                       before.evidence)
  assert sig["correlational_label"] == "spurious"
  assert sig["intervention_note"].startswith("the judge left 2 regraded cell(s)")
  assert cost.unscored.count == 2 and cost.unscored.to_json()["causes"] == {"transport": 2}


def test_the_llm_backend_labels_are_tested_too():
  g = group_of(fx.SPURIOUS, fx.SPURIOUS_RESPONSES, fx.judge())
  said = {"labels": [
      {"criterion_id": "c1", "label": "agree", "confidence": 0.8, "evidence": [],
       "wording": ""},
      {"criterion_id": "c2", "label": "spurious", "confidence": 0.9,
       "evidence": ["All requirements met."], "wording": "covers everything"}]}
  cfg = fx.settings(attributor="llm", intervention=True)
  att, cost = make_attributor(cfg, client=fx.ScriptedClient([json.dumps(said)]),
                              judge=fx.judge()).attribute(g)
  lab = att.label_of("c2")
  assert att.backend == "llm" and lab.label == "spurious" and lab.wording == "covers everything"
  assert dict(lab.signals)["correlational_label"] == "spurious"
  assert dict(lab.signals)["correlational_confidence"] == 0.9
  # the attributor's request, then the judge's two on the edited texts
  assert (cost.llm_requests, cost.judge_cells) == (1 + 2, 4)


def test_off_leaves_the_labels_as_they_were():
  """(d) evolver.intervention off (the default): the correlational labels, no judge call."""
  cfg = fx.settings()
  assert not cfg.intervention
  j = program_judge()
  for task, responses in ((fx.PADDED, fx.PADDED_RESPONSES), (CONTENT, CONTENT_RESPONSES),
                          (CLOSER, CLOSER_RESPONSES)):
    g = group_of(task, responses, j)
    att, cost = make_attributor(cfg, judge=j).attribute(g)
    assert att == RuleAttributor(cfg).labels(g) and cost.judge_cells == 0
    assert not any("correlational_label" in dict(lab.signals) for lab in att.labels)


def test_config_checks_and_the_judge_is_required():
  with pytest.raises(ConfigError, match="intervention_flip_share"):
    fx.settings(intervention_flip_share=1.0)
  with pytest.raises(ConfigError, match="intervention_rest_points"):
    fx.settings(intervention_rest_points=-1.0)
  with pytest.raises(HarnessError, match="needs the judge"):
    make_attributor(fx.settings(intervention=True))
  c = base_config()
  c.rollout.num_samples = 4
  c.evolver.intervention = True
  j = program_judge()
  ev = build_evolver(c, judge=j)
  assert isinstance(ev.attributor.intervention, Intervention)
  assert ev.attributor.intervention.judge is j
  assert EvolverConfig.from_config(c.evolver).intervention_rest_points == 10.0


def test_the_step_logs_every_label_and_counts_the_regrade(tmp_path):
  cfg = fx.settings(intervention=True)
  tasks = [fx.PADDED, CONTENT]
  h = from_tasks(tasks)
  j = program_judge()
  groups = fx.record(tasks, h, [fx.PADDED_RESPONSES, CONTENT_RESPONSES], j)
  log = tmp_path / "attributions.jsonl"
  ev = Evolver(cfg, attributor=make_attributor(cfg, judge=j), proposer=RuleProposer(cfg),
               critic=Critic(j, cfg, num_samples=4), attribution_log=str(log))
  res = ev.step(h, groups, step=3, key=jax.random.key(0), resample=fx.FakePolicy(fx.PROMPTS))
  rows = [json.loads(line) for line in log.read_text().splitlines()]
  assert [(r["step"], r["task_id"], r["criterion_id"]) for r in rows] == [
      (3, "t-pad", "c1"), (3, "t-pad", "c2"), (3, "t-content", "c1"), (3, "t-content", "c2")]
  assert all(set(r) == {"step", "task_id", "criterion_id", "label", "confidence", "backend",
                        "signals"} and r["backend"] == "rule" for r in rows)
  assert [r["label"] for r in rows] == ["agree", "spurious", "agree", "saturated"]
  assert rows[1]["signals"]["correlational_label"] == "spurious"
  assert rows[2]["signals"]["correlational_label"] == "spurious"
  assert "correlational_label" not in rows[0]["signals"]
  assert [r["confidence"] for r in rows] == [
      round(lab.confidence, 6) for att in res.attributions for lab in att.labels]
  assert res.accounting["attributor"]["judge_cells"] == 4 + 0
  # Appended per step.
  ev.step(h, groups, step=4, key=jax.random.key(0), resample=fx.FakePolicy(fx.PROMPTS))
  assert len(log.read_text().splitlines()) == 8



# Issue 46: the edits found from the group (evolver.intervention_edits).
# A word-count criterion (c2 of fx.PADDED: 30 words) met by two replies that ran on to the
# limit, where dropping the unfinished tail leaves them over 30 words (the fixed edits
# cannot expose it), beside two finished replies of 12-13 words.
_RUNON_BODY = ("Leaves change colour in autumn because the days get shorter and cooler. The "
               "tree stops making the green pigment that it uses to capture light. Other "
               "colours show through once it is gone.")
RUNON_RESPONSES = (
    f"{_RUNON_BODY} As the weeks go by the colours in the leaf become easier to",
    f"{_RUNON_BODY} Then the tree pulls what it can back into its branches and the",
    "In autumn the chlorophyll breaks down and the yellow pigments show through.",
    "Less light in autumn means the chlorophyll fades and other pigments show.",
)


def test_the_runon_edit_cuts_run_on_replies_to_the_finished_length():
  cut = phrases.runon_versions(RUNON_RESPONSES)
  assert sorted(cut) == [0, 1]
  limit = max(phrases.num_words(r) for r in RUNON_RESPONSES[2:])
  assert all(phrases.num_words(t) <= limit for t in cut.values())
  assert phrases.runon_versions(RUNON_RESPONSES[2:]) == {}   # none ran on
  assert phrases.runon_versions(RUNON_RESPONSES[:2]) == {}   # none finished


def test_a_run_on_length_criterion_is_spurious_only_with_the_runon_edit():
  g = group_of(fx.PADDED, RUNON_RESPONSES)
  assert phrases.num_words(phrases.drop_unfinished(RUNON_RESPONSES[0])) >= 30
  before = by_id(intervening().attribute(g)[0])["c2"]
  assert before.label != "spurious"
  lab = by_id(intervening(intervention_edits=("runon",)).attribute(g)[0])["c2"]
  sig = dict(lab.signals)
  assert lab.label == "spurious" and sig["flipped_by"] == "runon"
  assert (sig["runon_edited"], sig["runon_flipped"]) == (2, 2)
  # c1 (chlorophyll, met by the finished replies only: no run-on satisfier) keeps its label
  assert by_id(intervening(intervention_edits=("runon",)).attribute(g)[0])["c1"].label == \
      by_id(intervening().attribute(g)[0])["c1"].label


def test_surface_ngrams_come_from_the_group_not_a_list():
  yes = ("Certes amigo. The sky is blue because of scattering.",
         "Certes amigo. Air scatters blue light the most.")
  no = ("The sky is blue because air scatters blue light.", "Blue light scatters more.")
  grams = phrases.surface_ngrams(yes, no, "Why is the sky blue?", 0.75)
  assert ("certes",) in grams and ("amigo",) in grams
  assert not any("blue" in g or "sky" in g for g in grams)   # the prompt's words: content
  assert phrases.drop_ngram_sentences(yes[0], grams) == \
      "The sky is blue because of scattering."
  # an edit that would take most of the answer leaves it as it is
  assert phrases.drop_ngram_sentences("Certes amigo.", grams) == "Certes amigo."


def test_a_stock_opener_outside_the_phrase_list_is_found_by_the_ngram_edit():
  task = Task("t-open", "science", (Message("user", "Explain why the sky is blue."),), (
      Criterion("c1", "Explains scattering", 6.0, check=fx.kw("scattering")),
      Criterion("c2", "Opens warmly", 4.0, anchor=False, check=fx.kw("amigo")),
  ))
  responses = ("Certes amigo, gladly. Rayleigh scattering favours short blue waves.",
               "Certes amigo, gladly. Air molecules give blue light more scattering.",
               "Rayleigh scattering by the air favours blue light.",
               "Short waves get more scattering by the air, so blue wins.")
  g = group_of(task, responses)
  assert phrases.generic_sentences(responses[0]) == []   # not in the phrase list
  assert by_id(intervening().attribute(g)[0])["c2"].label != "spurious"
  lab = by_id(intervening(intervention_edits=("ngram",)).attribute(g)[0])["c2"]
  assert lab.label == "spurious" and dict(lab.signals)["flipped_by"] == "ngram"


def test_unknown_group_edit_is_refused():
  with pytest.raises(HarnessError, match="intervention_edits"):
    make_attributor(fx.settings(intervention=True, intervention_edits=("length",)),
                    judge=program_judge())


def test_a_keyword_said_twice_in_one_sentence_is_found_by_the_inrepeat_edit():
  task = Task("t-rep", "medical", (Message("user", "What helps a headache?"),), (
      Criterion("c1", "Covers headache in depth", 6.0,
                check=Check("keyword_count", FrozenMap({"keyword": "headache", "min": 2}))),
      Criterion("c2", "Suggests rest", 4.0, check=fx.kw("rest")),
  ))
  responses = ("For a headache, rest, and a headache often fades. Drink water.",
               "A headache eases with rest; a headache also eases with water.",
               "Rest in a dark room. Drink water.",
               "Drink water and rest.")
  assert phrases.drop_sentence_repeats(responses[0]) == \
      "For a headache, rest, and often fades. Drink water."
  g = group_of(task, responses)
  assert by_id(intervening().attribute(g)[0])["c1"].label != "spurious"
  lab = by_id(intervening(intervention_edits=("inrepeat",)).attribute(g)[0])["c1"]
  assert lab.label == "spurious" and dict(lab.signals)["flipped_by"] == "inrepeat"


def test_intervention_overturns_false_keeps_an_unconfirmed_suspicion():
  """A correlational spurious label no edit confirms becomes agree by default; with
  evolver.intervention_overturns False it stands (the edits only add labels)."""
  g = group_of(fx.PADDED, THOROUGH_RESPONSES)
  before = by_id(RuleAttributor(fx.settings()).labels(g))["c2"]
  assert before.label == "spurious"
  assert by_id(intervening().attribute(g)[0])["c2"].label == "agree"
  kept = by_id(intervening(intervention_overturns=False).attribute(g)[0])["c2"]
  assert kept.label == "spurious"
  assert dict(kept.signals)["correlational_label"] == "spurious"


def test_an_edit_that_empties_the_answer_is_no_surface_edit_with_min_words():
  """The filler edit drops every sentence of an answer that reads as no text: the edited
  answer is empty and flips even "gives an answer". That took the answer, not a surface
  feature of it (evolver.intervention_min_words 1); at 0, as before, it counts."""
  task = Task("t-empty", "science", (Message("user", "Why do leaves change colour?"),), (
      Criterion("c1", "Mentions chlorophyll", 6.0, check=fx.kw("chlorophyll")),
      Criterion("c2", "Gives an answer", 3.0, anchor=False,
                check=Check("char_count", FrozenMap({"min": 1}))),
  ))
  responses = SALAD_RESPONSES[:2] + ("Xqzt vlorp brunk kelo mrap zint.",
                                     "Vlorp kelo xqzt brunk zint mrap.")
  assert phrases.drop_filler(responses[2]) == ""
  g = group_of(task, responses)
  assert by_id(RuleAttributor(fx.settings()).labels(g))["c2"].label == "saturated"
  assert by_id(intervening().attribute(g)[0])["c2"].label == "spurious"
  kept = by_id(intervening(intervention_min_words=1).attribute(g)[0])["c2"]
  assert kept.label == "saturated" and dict(kept.signals).get("flipped_by", "") == ""


def test_an_untested_suspicion_stands_with_intervention_untested_stands():
  """A correlational spurious label that no edit could test (every satisfying answer is
  fluent, finished, unrepeated) becomes agree by default; with
  evolver.intervention_untested_stands it stands. One an edit did test, and whose verdict
  held, is overturned either way."""
  untestable = tuple(r.replace(" See Lee 2005.", "") for r in THOROUGH_RESPONSES)
  g = group_of(fx.PADDED, untestable)
  assert by_id(RuleAttributor(fx.settings()).labels(g))["c2"].label == "spurious"
  dropped = by_id(intervening().attribute(g)[0])["c2"]
  assert dropped.label == "agree"
  assert dict(dropped.signals)["intervention_note"] == "no edit changed a satisfying response"
  kept = by_id(intervening(intervention_untested_stands=True).attribute(g)[0])["c2"]
  assert kept.label == "spurious"
  assert dict(kept.signals)["correlational_label"] == "spurious"
  tested = group_of(fx.PADDED, THOROUGH_RESPONSES)   # the filler edit takes "See Lee 2005."
  held = by_id(intervening(intervention_untested_stands=True).attribute(tested)[0])["c2"]
  assert held.label == "agree" and dict(held.signals)["intervention_edits"] == ("filler",)
