"""Tests for the IFEval importer: every one of IFEval's 25 ids end to end (row -> task -> our
check on a good and a bad response), malformed kwargs named by field, the convert command on
a fixture in IFEval's input_data.jsonl format, the same rules for IFBench rows, and strict
vs official verdicts through the ifverify registry."""

import json
import os

import pytest

from harnessrl_jax.data import checks, convert
from harnessrl_jax.data.importers import IMPORTERS, ifbench, ifeval
from harnessrl_jax.data.loader import load_tasks, parse_task
from harnessrl_jax.errors import ConfigError, DataError
from harnessrl_jax.eval.ifverify import official_ifeval, registry, text
from repo_paths import FIXTURES

FIXTURE = os.path.join(FIXTURES, "ifeval_sample.jsonl")
REQUEST = "Write a haiku about rain."

# (id, kwargs, response that follows it, response that does not)
CASES = [
    ("keywords:existence", {"keywords": ["beacon", "storm"]},
     "The beacon shone through the storm.", "The beacons shone through the storms."),
    ("keywords:frequency", {"keyword": "sea", "frequency": 2, "relation": "at least"},
     "The sea, the Sea!", "The sea and the seashore."),
    ("keywords:frequency", {"keyword": "sea", "frequency": 2, "relation": "less than"},
     "The sea and the seashore.", "The sea, the sea."),
    ("keywords:forbidden_words", {"forbidden_words": ["rock", "stone"]},
     "Rocks and pebbles.", "A Stone wall."),
    ("keywords:letter_frequency", {"letter": "z", "let_frequency": 2,
                                   "let_relation": "at least"}, "Zany zebra.", "Lazy dog."),
    ("language:response_language", {"language": "fr"},
     "Le chat dort sur la table de la cuisine pendant que nous mangeons.",
     "The cat sleeps on the kitchen table while we eat."),
    ("length_constraints:number_sentences", {"num_sentences": 3, "relation": "less than"},
     "One. Two.", "One. Two. Three."),
    ("length_constraints:number_paragraphs", {"num_paragraphs": 2},
     "First part.\n***\nSecond part.", "First part.\n\nSecond part."),
    ("length_constraints:number_words", {"num_words": 3, "relation": "at least"},
     "Don't stop now.", "Don't stop."),
    ("length_constraints:nth_paragraph_first_word",
     {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "rain"},
     "Clouds gather.\n\n**Rain** falls.", "Clouds gather.\n\nThe rain falls."),
    ("detectable_content:number_placeholders", {"num_placeholders": 2},
     "Dear [name], meet me at [address].", "Dear [name], see [the site](http://x.org)."),
    ("detectable_content:postscript", {"postscript_marker": "P.P.S"},
     "Hello.\n\nP.P.S. Bring snacks.", "Hello. Bring snacks."),
    ("detectable_format:number_bullet_lists", {"num_bullets": 2},
     "* tent\n* stove", "* tent\n* stove\n* map"),
    ("detectable_format:constrained_response", {}, "My answer is yes.",
     "I'd say: My answer is no. Because of the weather."),
    ("detectable_format:number_highlighted_sections", {"num_highlights": 2},
     "*First* and **second**.", "Only *one* here."),
    ("detectable_format:multiple_sections", {"section_spliter": "Section", "num_sections": 2},
     "Section 1\nIntro.\nSection 2\nEnd.", "Section 1\nIntro.\nSection 2\nMid.\nSection 3\nEnd."),
    ("detectable_format:json_format", {}, '```json\n{"a": 1}\n```', "Here: {\"a\": 1}"),
    ("detectable_format:title", {}, "<<Rain>>\nIt falls.", "Rain\nIt falls."),
    ("combination:two_responses", {}, "Yes.\n******\nNo.", "Yes.\n******\nYes."),
    ("combination:repeat_prompt", {"prompt_to_repeat": REQUEST},
     REQUEST + "\nSoft rain on the roof...", "Sure! " + REQUEST + " Soft rain."),
    ("startend:end_checker", {"end_phrase": "Any other questions?"},
     "Done. Any other questions?", "Done. any other questions?"),
    ("startend:quotation", {}, '"All wrapped."', '"Not all" wrapped.'),
    ("change_case:capital_word_frequency", {"capital_frequency": 2,
                                            "capital_relation": "at least"},
     "NASA and ESA agree.", "I saw A NASA probe."),
    ("change_case:english_capital", {},
     "THE RAIN FALLS ON THE ROOF AND THE CHILDREN WATCH IT FROM THE WINDOW.",
     "The rain falls on the roof and the children watch it from the window."),
    ("change_case:english_lowercase", {},
     "the rain falls on the roof and the children watch it from the window.",
     "le chat dort sur la table de la cuisine pendant que nous mangeons."),
    ("punctuation:no_comma", {}, "No commas here.", "One\uff0c two."),
]


def _row(iid, kwargs, key=1, prompt=None):
  return {"key": key, "prompt": prompt or f"Answer. {REQUEST}", "instruction_id_list": [iid],
          "kwargs": [kwargs]}


def _passes(task, response):
  (crit,) = task.criteria
  return checks.run_check(crit.check, response, prompt=task.user_text)


def test_the_25_ids_are_the_official_ones():
  assert set(ifeval.RULES) == set(official_ifeval.CHECKERS)
  assert len(ifeval.RULES) == 25
  assert {c[0] for c in CASES} == set(ifeval.RULES)


@pytest.mark.parametrize("iid,kwargs,good,bad", CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_every_id_end_to_end(iid, kwargs, good, bad):
  task = parse_task(ifeval.convert_record(_row(iid, kwargs)), where="test")
  (crit,) = task.criteria
  assert crit.check is not None and crit.tags[:2] == ("ifeval", iid)
  assert crit.text and "{" not in crit.text.replace("{\"", "")  # every kwarg filled in
  assert _passes(task, good), good
  assert not _passes(task, bad), bad


def test_task_fields_and_wording():
  t = ifeval.convert_record({"key": 5, "prompt": "Write.", "instruction_id_list": [
      "keywords:frequency", "language:response_language", "detectable_format:title"],
      "kwargs": [{"keyword": "sea", "frequency": 2.0, "relation": "at least"},
                 {"language": "de"}, {}]})
  assert t["id"] == "ifeval-5" and t["source"] == "ifeval"
  assert t["domain"] == "instruction_following" and t["reference_answer"] is None
  assert t["meta"] == {"key": 5, "instruction_id_list": [
      "keywords:frequency", "language:response_language", "detectable_format:title"]}
  freq, lang, title = t["criteria"]
  assert freq["text"] == "In your response, the word sea should appear at least 2 times."
  assert freq["check"] == {"type": "keyword_count", "keyword": "sea", "min": 2}
  assert isinstance(freq["check"]["min"], int)
  assert lang["text"] == ("Your ENTIRE response should be in German language, no other "
                          "language is allowed.")
  assert lang["tags"] == ["ifeval", "language:response_language", "heuristic"]
  assert title["tags"] == ["ifeval", "detectable_format:title"]


def test_unknown_id_is_unverified_and_nulls_are_dropped():
  t = ifeval.convert_record({"key": "k", "prompt": "p", "instruction_id_list": [
      "detectable_format:title", "format:future"], "kwargs": [{"num_words": None}, {"x": 1}]})
  assert "check" in t["criteria"][0]
  assert t["criteria"][1]["tags"] == ["ifeval", "format:future", "unverified"]
  assert t["criteria"][1]["text"] == ("Follows the IFEval instruction 'format:future' (x=1) "
                                      "as stated in the prompt.")


def test_fixed_checks_are_fresh_copies():
  a = ifeval.convert_record(_row("detectable_format:constrained_response", {}))
  a["criteria"][0]["check"]["options"].append("oops")
  b = ifeval.convert_record(_row("detectable_format:constrained_response", {}))
  assert len(b["criteria"][0]["check"]["options"]) == 3


@pytest.mark.parametrize("iid,kwargs,problems", [
    ("keywords:frequency", {"keyword": "sea", "relation": "more than", "frequency": 2},
     ["kwargs[0].relation: must be one of ['less than', 'at least'], got 'more than'"]),
    ("keywords:frequency", {"relation": "at least", "frequency": "two"},
     ["kwargs[0].keyword: missing; instruction 'keywords:frequency' needs it",
      "kwargs[0].frequency: must be an integer, got 'two'"]),
    ("length_constraints:number_words", {"relation": "less than", "num_words": 0},
     ["kwargs[0].num_words: 'less than 0' cannot be met; must be >= 1"]),
    ("keywords:letter_frequency", {"letter": "ab", "let_frequency": 2,
                                   "let_relation": "at least"},
     ["kwargs[0].letter: must be one character, got 'ab'"]),
    ("keywords:existence", {"keywords": "beacon"},
     ["kwargs[0].keywords: must be a non-empty list of non-empty strings, got 'beacon'"]),
    ("language:response_language", {"language": "xx"},
     ["kwargs[0].language: must be a language code langdetect knows"]),
    ("length_constraints:nth_paragraph_first_word",
     {"num_paragraphs": 2, "nth_paragraph": 3, "first_word": "x"},
     ["kwargs[0].nth_paragraph: (3) is greater than num_paragraphs (2)"]),
    ("detectable_format:number_bullet_lists", {"num_bullets": -1},
     ["kwargs[0].num_bullets: must be >= 0, got -1"]),
    ("detectable_content:postscript", {},
     ["kwargs[0].postscript_marker: missing; instruction 'detectable_content:postscript' "
      "needs it"]),
])
def test_malformed_kwargs_are_named_by_field(iid, kwargs, problems):
  with pytest.raises(DataError) as e:
    ifeval.convert_record(_row(iid, kwargs))
  got = list(e.value.problems)
  assert len(got) == len(problems), got
  for have, want in zip(got, problems):
    assert have.startswith(want), (have, want)


def test_ifbench_rows_with_ifeval_ids_get_the_same_checks():
  for iid, kwargs, good, bad in CASES:
    ours = ifeval.convert_record(_row(iid, kwargs))["criteria"][0]
    theirs = ifbench.convert_record(_row(iid, kwargs))["criteria"][0]
    assert theirs["check"] == ours["check"] and theirs["text"] == ours["text"]
    assert theirs["tags"] == ["ifbench", *ours["tags"][1:]]


def test_registered_importer():
  assert IMPORTERS["ifeval"] is ifeval.convert_record


def test_convert_command_on_the_fixture(tmp_path, capsys):
  out = tmp_path / "ifeval.jsonl"
  assert convert.main(["--format=ifeval", FIXTURE, str(out)]) == 0
  tasks = load_tasks(out)
  assert [t.id for t in tasks] == [f"ifeval-{k}" for k in range(1000, 1005)]
  assert all(c.check is not None for t in tasks for c in t.criteria)
  assert "5 tasks, 10 criteria, 10 checks (ifeval)" in capsys.readouterr().out
  with open(FIXTURE, encoding="utf-8") as f:
    rows = [json.loads(line) for line in f if line.strip()]
  assert load_tasks(out) == tuple(parse_task(ifeval.convert_record(r), where="x")
                                  for r in rows)


def _verdicts(iid, kwargs, response):
  row = {**_row(iid, kwargs), "response": response}
  strict = registry.verify_row(row, "strict", False)
  official = registry.verify_row(row, "official", False)
  assert strict["official_fallback"] == []  # every IFEval id has our check
  return strict["follow_all_instructions"], official["follow_all_instructions"]


def test_strict_agrees_with_official_on_plain_cases():
  assert _verdicts("punctuation:no_comma", {}, "No commas here.") == (True, True)
  assert _verdicts("detectable_format:title", {}, "No title here.") == (False, False)
  assert _verdicts("startend:quotation", {}, '"Wrapped."') == (True, True)


def _have_punkt() -> bool:
  """Whether NLTK finds its Punkt and stop-word data (another module may have pointed
  NLTK_DATA at a directory that is absent, so the variable alone does not say)."""
  try:
    text.nltk()
  except ConfigError:
    return False
  return True


@pytest.mark.parametrize("iid,kwargs,response,strict,official", [
    # Official: unescaped regex substrings; ours: whole words.
    ("keywords:existence", {"keywords": ["cat"]}, "Concatenate them.", False, True),
    # Official: \w+ runs ("don't" is 2 words); ours: "don't" is one word.
    ("length_constraints:number_words", {"num_words": 3, "relation": "at least"},
     "Don't stop.", False, True),
    # Official: the option anywhere; ours: the whole response is the option.
    ("detectable_format:constrained_response", {}, "I'd say: My answer is no. Because.",
     False, True),
    # Official: text langdetect cannot read counts as followed; ours fails it.
    ("language:response_language", {"language": "fr"}, "12345 !!!", False, True),
    # Official: a "---" rule is a bullet; ours: a bullet needs "- " and text.
    ("detectable_format:number_bullet_lists", {"num_bullets": 2}, "- one\n---\n- two",
     True, False),
    # Official: paragraphs split on "***" anywhere, "***bold***" splits; ours: "***" lines.
    ("length_constraints:number_paragraphs", {"num_paragraphs": 1}, "A ***bold*** claim.",
     True, False),
    # Official: "I" and "A" are capital words; ours: 2+ letters.
    # (official: nltk.word_tokenize, which needs NLTK's Punkt data)
    pytest.param("change_case:capital_word_frequency",
                 {"capital_frequency": 2, "capital_relation": "at least"}, "I saw A dog.",
                 False, True, marks=pytest.mark.skipif(
                     not _have_punkt(),
                     reason="NLTK's Punkt data (../shared/data/nltk_data) is absent")),
])
def test_strict_vs_official_documented_differences(iid, kwargs, response, strict, official):
  assert _verdicts(iid, kwargs, response) == (strict, official)


def test_ifeval_protocol_shares_the_ifbench_body():
  from harnessrl_jax.eval import protocols  # pylint: disable=g-import-not-at-top
  answers = {"1000": '"Lost cat. Grey and shy. Call me."',
             "1004": "My answer is maybe."}

  def generate(conversations):
    with open(FIXTURE, encoding="utf-8") as f:
      by_prompt = {r["prompt"]: str(r["key"]) for r in map(json.loads, f)}
    return [answers.get(by_prompt[c[-1].content], "") for c in conversations]

  out = protocols.run_ood({"ifeval": FIXTURE}, generate)
  res = out["IFEval"]
  assert res["benchmark"] == "IFEval" and res["num_items"] == 5
  assert res["items"]["ifeval-1000"] == 100.0 and res["items"]["ifeval-1004"] == 100.0
  assert res["score"] == 40.0 and res["unverified_instructions"] == 0
  assert res["instruction_accuracy"] == 30.0   # 3 of 10 instructions
  assert res["official"]["strict"]["prompts"] == 5
  assert out["ood_mean"] == 40.0
