"""Tests for the IFBench importer: field mapping, checks derived from instruction ids and
kwargs (run on hand-written responses), fallbacks to judged criteria, and error messages."""

import collections
import json
import os

import pytest

from harnessrl_jax.data import checks
from harnessrl_jax.data.frozen import FrozenMap
from harnessrl_jax.data.importers import ifbench
from harnessrl_jax.data.loader import parse_task
from harnessrl_jax.data.schema import Check
from harnessrl_jax.errors import HarnessError
from repo_paths import FIXTURES, REPO

FIXTURE = os.path.join(FIXTURES, "ifbench_sample.jsonl")
UPSTREAM = os.path.join(REPO, "..", "shared", "data", "upstream", "raw",
                        "ifbench_test.sample.jsonl")


def _rows(path):
  with open(path, encoding="utf-8") as f:
    return [json.loads(line) for line in f if line.strip()]


@pytest.fixture(scope="module")
def tasks():
  return {r["key"]: ifbench.convert_record(r) for r in _rows(FIXTURE)}


def _passes(criterion, response, prompt=""):
  args = {k: v for k, v in criterion["check"].items() if k != "type"}
  return checks.run_check(Check(criterion["check"]["type"], FrozenMap(args)), response,
                          prompt=prompt)


def test_task_fields(tasks):
  t = tasks["9001"]
  row = _rows(FIXTURE)[0]
  assert t["id"] == "ifbench-9001"
  assert t["domain"] == "instruction_following" and t["source"] == "ifbench"
  assert t["prompt"] == [{"role": "user", "content": row["prompt"]}]
  assert t["reference_answer"] is None
  assert t["meta"] == {"key": "9001",
                       "instruction_id_list": ["count:word_count_range", "sentence:keyword"]}
  assert [c["id"] for c in t["criteria"]] == ["c0", "c1"]
  for c, iid in zip(t["criteria"], row["instruction_id_list"]):
    assert c["weight"] == 1.0 and c["anchor"] is True and c["tags"] == ["ifbench", iid]


def test_every_fixture_task_loads(tasks):
  for t in tasks.values():
    task = parse_task(t, where="fixture")
    assert len(task.criteria) == len(t["meta"]["instruction_id_list"])


def test_word_range_and_keyword_sentence(tasks):
  words_range, keyword = tasks["9001"]["criteria"]
  assert words_range["check"] == {"type": "word_count", "min": 20, "max": 40}
  assert isinstance(words_range["check"]["min"], int)  # IFBench stores 20.0
  assert keyword["check"] == {"type": "keyword_in_sentence", "keyword": "chlorophyll", "n": 2}
  good = ("Leaves change colour as days shorten. Trees stop making chlorophyll, the green "
          "pigment. Yellow and orange pigments, present all along, then show through the "
          "fading green.")  # 26 words, keyword in sentence 2
  assert _passes(words_range, good) and _passes(keyword, good)
  bad = "Chlorophyll fades. Leaves turn."  # 4 words, keyword in sentence 1
  assert not _passes(words_range, bad) and not _passes(keyword, bad)


def test_keywords_multiple(tasks):
  (c,) = tasks["9002"]["criteria"]
  assert c["check"] == {"type": "keyword_counts", "counts": [1, 2, 3, 5, 7],
                        "keywords": ["salt", "wave", "tide", "shore", "foam"]}
  good = "salt " + "wave " * 2 + "Tide " * 3 + "shore " * 5 + "foam " * 7
  assert _passes(c, good)
  assert not _passes(c, good + "foam")


def test_options(tasks):
  (c,) = tasks["9003"]["criteria"]
  assert c["check"] == {"type": "one_of", "options": ["yes", "no", "maybe"]}
  assert c["text"] == ("Answer with one of the following options: yes/no/maybe. Do not give "
                       "any explanation.")
  assert _passes(c, "Maybe.")
  assert not _passes(c, "Yes, because water makes things wet.")


def test_multiples_read_from_prompt(tasks):
  (c,) = tasks["9004"]["criteria"]
  assert c["check"] == {"type": "number_sequence", "numbers": [27, 36, 45, 54]}
  assert _passes(c, "27, 36, 45, 54") and not _passes(c, "18, 27, 36, 45, 54")


def test_unverified_and_positions(tasks):
  verb, position = tasks["9005"]["criteria"]
  assert "check" not in verb
  assert verb["tags"] == ["ifbench", "words:start_verb", "unverified"]
  assert verb["text"] == "The response must start with a verb."
  assert position["check"] == {"type": "word_positions", "word": "river",
                               "positions": [2, -2]}
  assert _passes(position, "Follow river paths until the river ends.")


def test_overlap_heuristic_and_unknown(tasks):
  overlap, syllables, unknown = tasks["9006"]["criteria"]
  assert overlap["check"] == {"type": "trigram_overlap", "min": 38.0, "max": 42.0,
                              "reference": "The cat sat on the warm mat by the door."}
  # 10 trigrams, 4 from the reference -> 40%.
  assert _passes(overlap, "The cat sat on the warm sun shone over our old house")
  assert not _passes(overlap, "The cat sat on the warm mat by the door.")  # 100%
  assert syllables["check"] == {"type": "alternating_syllable_parity"}
  assert syllables["tags"] == ["ifbench", "words:odd_even_syllables", "heuristic"]
  assert "check" not in unknown
  assert unknown["tags"] == ["ifbench", "format:future_style", "unverified"]
  # Null kwargs are dropped; the one set kwarg is stated.
  assert unknown["text"] == ("Follows the IFBench instruction 'format:future_style' "
                             "(small_n=3.0) as stated in the prompt.")


def _record(prompt, ids, kwargs, key="1"):
  return {"key": key, "prompt": prompt, "instruction_id_list": ids, "kwargs": kwargs}


def test_custom_ids_read_their_arguments_from_the_prompt():
  csv_prompt = ('Generate CSV data: The column names are ["Id", "Name", "Price"], the data '
                "should be comma delimited. Please generate 2 rows. Add one field which "
                "contains a special character and enclose it in double quotes.")
  (c,) = ifbench.convert_record(
      _record(csv_prompt, ["custom:csv_special_character"], [{}]))["criteria"]
  assert c["check"] == {"type": "csv_table", "columns": ["Id", "Name", "Price"], "rows": 2,
                        "quoted_special": True}
  assert _passes(c, 'Id,Name,Price\n1,"Tom & Jerry",3\n2,Bob,4')
  assert not _passes(c, "Id,Name,Price\n1,Tom,3\n2,Bob,4")

  alpha = ("Tell me a 3-sentence story where each sentence's first word starts with the "
           "letters of the alphabet in order.")
  (c,) = ifbench.convert_record(_record(alpha, ["custom:sentence_alphabet"], [None]))["criteria"]
  assert c["check"] == {"type": "sentence_initials", "letters": "abc"}

  template = ("Solve x+1=2. Use this exact template for your response: My Answer: [answer] "
              "My Conclusion: [conclusion] Future Outlook: [outlook]")
  (c,) = ifbench.convert_record(_record(template, ["format:output_template"], [{}]))["criteria"]
  assert c["check"] == {"type": "template_labels",
                        "labels": ["My Answer:", "My Conclusion:", "Future Outlook:"]}
  assert _passes(c, "My Answer: x = 1 My Conclusion: easy Future Outlook: more algebra")

  repeat = "Write an essay on tea. Only output this sentence here, ignore all other requests."
  (c,) = ifbench.convert_record(_record(repeat, ["repeat:repeat_simple"], [{}]))["criteria"]
  assert _passes(c, "Only output this sentence here, ignore all other requests.")
  assert not _passes(c, "Tea is a drink.")


def test_custom_id_with_unexpected_wording_is_unverified():
  (c,) = ifbench.convert_record(
      _record("Count a few multiples of seven.", ["custom:multiples"], [{}]))["criteria"]
  assert "check" not in c and c["tags"][-1] == "unverified"


@pytest.mark.parametrize("record,message", [
    (["not", "a", "dict"], "record: must be a JSON object, got list"),
    ({"key": "1", "instruction_id_list": ["format:emoji"], "kwargs": [{}]}, "prompt: missing"),
    (_record("  ", ["format:emoji"], [{}]), "prompt: must not be empty"),
    (_record("p", ["format:emoji"], None), "kwargs: missing"),
    (_record("p", ["format:emoji", "format:newline"], [{}]),
     "kwargs: has 1 entries but instruction_id_list has 2"),
    (_record("p", [], []), "instruction_id_list: must not be empty"),
    (_record("p", ["format:emoji", 3], [{}, {}]),
     "instruction_id_list[1]: must be a non-empty string, got 3"),
    (_record("p", ["format:emoji"], ["x"]), "kwargs[0]: must be an object or null, got str"),
    (_record("p", ["count:word_count_range"], [{"min_words": 5.0, "max_words": None}]),
     "kwargs[0].max_words: missing; instruction 'count:word_count_range' needs it"),
    (_record("p", ["format:emoji", "count:numbers"], [{}, {"N": 2.5}]),
     "kwargs[1].N: must be an integer, got 2.5"),
    (_record("p", ["ratio:stop_words"], [{"percentage": "ten"}]),
     "kwargs[0].percentage: must be a number, got 'ten'"),
    ({"prompt": "p", "instruction_id_list": ["format:emoji"], "kwargs": [{}]}, "key: missing"),
])
def test_malformed_records(record, message):
  with pytest.raises(HarnessError) as err:
    ifbench.convert_record(record)
  assert message in str(err.value)


def test_upstream_sample_converts():
  if not os.path.exists(UPSTREAM):
    pytest.skip("upstream IFBench sample not present")
  rows = _rows(UPSTREAM)
  verified, unverified = collections.Counter(), collections.Counter()
  for row in rows:
    task = ifbench.convert_record(row)
    parse_task(task, where=f"ifbench {row['key']}")  # every check validates
    assert len(task["criteria"]) == len(row["instruction_id_list"])
    for c in task["criteria"]:
      (verified if "check" in c else unverified)[c["tags"][1]] += 1
  print(f"IFBench sample: {sum(verified.values())} criteria with checks, "
        f"{sum(unverified.values())} unverified; ids with checks {len(verified)}/"
        f"{len(set(verified) | set(unverified))}")
  # The two ids without a faithful program are the only unverified ones.
  assert set(unverified) <= {"words:start_verb", "custom:european_capitals_sort"}
  assert sum(verified.values()) + sum(unverified.values()) == sum(
      len(r["instruction_id_list"]) for r in rows)


_CSV_CITY = ('Generate CSV data: The column names are ["ID", "Country", "City", "Year", '
             '"Count"], the data should be comma delimited. Please generate 2 rows.')
_CSV_SPECIAL = ('Generate CSV data: The column names are ["Id", "Brand"], the data should be '
                "comma delimited. Please generate 1 rows. Add one field which contains a "
                "special character and enclose it in double quotes.")
_CSV_QUOTES = ('Generate CSV data: The column names are ["StudentID", "Score"], the data '
               "should be tab delimited. Please generate 1 rows and enclose each single field "
               "in double quotes.")
_MCQ = ('Generate 2 multiple choice questions with 3 options each about "art". Each question '
        'should start with the label "Question". The questions should get progressively '
        "longer. Do not provide an explanation.")
_PALINDROMES = "level radar civic kayak refer rotor stats tenet madam racecar"

# (instruction id, kwargs, prompt or None for a generic one, response that follows the
# instruction, response that does not); one row per IFBench id that gets a check.
END_TO_END = [
    ("count:conjunctions", {"small_n": 2.0}, None, "Cats and dogs, but not fish.",
     "Cats and dogs and fish."),
    ("count:keywords_multiple", {"keyword1": "a1", "keyword2": "b2", "keyword3": "c3",
                                 "keyword4": "d4", "keyword5": "e5"}, None,
     "a1 " + "b2 " * 2 + "c3 " * 3 + "d4 " * 5 + "e5 " * 7, "a1 b2 c3 d4 e5"),
    ("count:numbers", {"N": 3.0}, None, "In 1999 I had 2 cats and 30 fish.",
     "In 1999 I had 2 cats."),
    ("count:person_names", {"N": 2.0}, "Write a story. Mention at least 2 different person "
     "names in the response, from this list of person names: Emma, Liam, Sophia .",
     "Emma met Liam.", "Emma met liam and Noah."),
    ("count:pronouns", {"N": 3.0}, None, "I think you know it.", "Cats nap daily."),
    ("count:punctuation", {}, None, "Wait, what?! Yes; here: done. Really? Wow!",
     "Wait, what? Yes."),
    ("count:unique_word_count", {"N": 4.0}, None, "One two three four.", "One one one one."),
    ("count:word_count_range", {"min_words": 2.0, "max_words": 3.0}, None, "Two words.",
     "Now four words here."),
    ("count:words_japanese", {"N": 2.0}, None, "I \u732b like \u3055\u304f\u3089",
     "I cat like cherry"),
    ("custom:csv_city", {}, _CSV_CITY,
     "ID,Country,City,Year,Count\n1,France,Paris,2020,5\n2,Japan,Tokyo,2021,7",
     "ID,Country,City,Year,Count\n1,France,Paris,2020,5"),
    ("custom:csv_quotes", {}, _CSV_QUOTES, '"StudentID"\t"Score"\n"1"\t"95"',
     "StudentID\tScore\n1\t95"),
    ("custom:csv_special_character", {}, _CSV_SPECIAL, 'Id,Brand\n1,"A&B"',
     "Id,Brand\n1,AB"),
    ("custom:mcq_count_length", {}, _MCQ,
     "Question 1: Who?\nA) x\nB) y\nC) z\nQuestion 2: Who painted it?\nA) p\nB) q\nC) r",
     "Question 1: Who painted it?\nA) x\nB) y\nC) z\nQuestion 2: Who?\nA) p\nB) q\nC) r"),
    ("custom:multiples", {}, "Count from 1 to 10 but only print multiples of 3.", "3, 6, 9",
     "3 6 9 12"),
    ("custom:sentence_alphabet", {}, "Tell me a 3-sentence story where each sentence's first "
     "word starts with the letters of the alphabet in order.", "Ants run. Bees hum. Cats nap.",
     "Bees hum. Ants run. Cats nap."),
    ("format:emoji", {}, None, "Hi \U0001F600. Bye \U0001F44B.", "Hi. Bye \U0001F44B."),
    ("format:line_indent", {}, None, "a\n b\n  c", "a\nb"),
    ("format:list", {"sep": "SEPARATOR"}, None, "SEPARATOR one\nSEPARATOR two",
     "- one\n- two"),
    ("format:newline", {}, None, "Hello\nworld", "Hello world"),
    ("format:no_bullets_bullets", {}, None, "One. Two.\n* a\n* b", "* a\n* b"),
    ("format:no_whitespace", {}, None, "no_space_here", "a b"),
    ("format:options", {"options": "I know or I don't know"}, None, "I don't know",
     "I know it."),
    ("format:output_template", {}, "Use this exact template for your response: My Answer: "
     "[answer] My Conclusion: [conclusion]", "My Answer: 4 My Conclusion: done",
     "My Answer: 4"),
    ("format:parentheses", {}, None, "(a [b {c (d [e] d) c} b] a)", "(a [b] c)"),
    ("format:quote_unquote", {}, None, '"Hi" means hello.', '"Hi" "there"'),
    ("format:quotes", {}, None, "He said \"she said 'I said \"go\" now' then\" ok",
     '"plain"'),
    ("format:sub-bullets", {}, None, "* a\n  - a1\n* b\n  - b1", "* a\n* b"),
    ("format:thesis", {}, None, "<i>Thesis.</i> Body.", "Thesis. Body."),
    ("format:title_case", {}, None, "The Quick Brown Fox", "The quick brown fox"),
    ("ratio:overlap", {"reference_text": "a b c d e", "percentage": 50.0}, None,
     "a b c d x y", "a b c d e"),
    ("ratio:sentence_balance", {}, None, "Yes. No? Go!", "Yes. No. Go?"),
    ("ratio:sentence_type", {}, None, "Yes. No. Go?", "Yes. No? Go?"),
    ("ratio:sentence_words", {}, None, "Cat ran. Dog ate. Owl sat.",
     "Cat ran. Dog ran. Owl sat."),
    ("ratio:stop_words", {"percentage": 50.0}, None, "Cats chase mice quickly.",
     "The cat is on the mat"),
    ("repeat:repeat_change", {"prompt_to_repeat": "Write a poem about cats."}, None,
     "Compose a poem about cats.", "Write a poem about cats."),
    ("repeat:repeat_simple", {}, "Write an essay. Only output this sentence here, ignore all "
     "other requests.", "Only output this sentence here, ignore all other requests.",
     "An essay."),
    ("repeat:repeat_span", {"prompt_to_repeat": "alpha beta gamma delta", "n_start": 1.0,
                            "n_end": 2.0}, None, "beta gamma", "alpha beta"),
    ("sentence:alliteration_increment", {}, None, "Big bears nap. Silly sad sam swims.",
     "Silly sad sam swims. Big bears nap."),
    ("sentence:increment", {"small_n": 1.0}, None,
     "Cats nap. Dogs run fast. Birds sing very loudly.", "Cats nap. Dogs run."),
    ("sentence:keyword", {"word": "moon", "N": 2.0}, None, "Hi. The moon rose.",
     "The moon rose. Hi."),
    ("words:alphabet", {}, None, "Young zebras always bounce.", "Young cats."),
    ("words:consonants", {}, None, "Strong black birds", "Strong birds go"),
    ("words:keywords_specific_position", {"keyword": "moon", "n": 2.0, "m": 3.0}, None,
     "Hi. I see moon.", "Hi. I see the moon."),
    ("words:last_first", {}, None, "I love the sea. Sea waves roll.",
     "I love the sea. Waves roll."),
    ("words:no_consecutive", {}, None, "The big cat.", "Big bad cat."),
    ("words:odd_even_syllables", {}, None, "Cat table dog happy", "Cat dog"),
    ("words:palindrome", {}, None, _PALINDROMES, "level radar"),
    ("words:paragraph_last_first", {}, None, "Love is love.\nTime heals time.",
     "Love is all."),
    ("words:prime_lengths", {}, None, "at the house", "at this house"),
    ("words:repeats", {"small_n": 1.0}, None, "The cat sat.", "The cat, the dog."),
    ("words:vowel", {}, None, "A cat can nap, then sit.", "A cat, a dog, a unicorn."),
    ("words:words_position", {"keyword": "sun"}, None, "The sun rose and sun set.",
     "The moon rose and sun set."),
]
UNVERIFIED_IDS = ("words:start_verb", "custom:european_capitals_sort", "custom:reverse_newline",
                  "custom:date_format_list", "custom:word_reverse", "custom:character_reverse")


@pytest.mark.parametrize("iid,kwargs,prompt,good,bad", END_TO_END,
                         ids=[row[0] for row in END_TO_END])
def test_instruction_end_to_end(iid, kwargs, prompt, good, bad):
  task = ifbench.convert_record(_record(prompt or "Write something.", [iid], [kwargs]))
  parse_task(task, where=iid)
  (c,) = task["criteria"]
  assert "unverified" not in c["tags"]
  assert _passes(c, good) and not _passes(c, bad)


def test_every_ifbench_id_is_mapped():
  assert set(ifbench._RULES) == {row[0] for row in END_TO_END} | set(UNVERIFIED_IDS)
  assert len(ifbench._RULES) == 58  # the instruction ids of the IFBench test registry


@pytest.mark.parametrize("iid", UNVERIFIED_IDS)
def test_ids_without_faithful_program_are_unverified(iid):
  (c,) = ifbench.convert_record(_record("Do it.", [iid], [{}]))["criteria"]
  assert "check" not in c and c["tags"] == ["ifbench", iid, "unverified"] and c["text"]


def test_empty_repeat_span_is_an_error():
  record = _record("p", ["repeat:repeat_span"],
                   [{"prompt_to_repeat": "a b", "n_start": 5.0, "n_end": 6.0}])
  with pytest.raises(HarnessError, match=r"kwargs\[0\].n_start: word span \[5, 6\] selects no"):
    ifbench.convert_record(record)
