"""Official-mode checkers of IFBench's count:*, ratio:*, sentence:* and repeat:* ids
(harnessrl_jax/eval/ifverify/official_count.py): hand-written cases whose verdicts follow
from allenai/IFBench's check_following (ifbench/instructions.py, commit db69a6f), quirks
included, and the agreement with the published verdicts."""

from __future__ import annotations

import collections
import json
import os

import pytest

from repo_paths import REPO

NLTK_DATA = os.path.join(REPO, "..", "shared", "data", "nltk_data")
RAW = os.path.join(REPO, "..", "shared", "data", "upstream", "raw")
os.environ.setdefault("NLTK_DATA", os.path.abspath(NLTK_DATA))

from harnessrl_jax.eval.ifverify import official_count, registry  # noqa: E402

HAVE_NLTK = os.path.isdir(NLTK_DATA)
# Ids whose official checker uses NLTK (Punkt sentences, word_tokenize or stop words).
NEEDS_NLTK = {"count:pronouns", "ratio:stop_words", "ratio:sentence_type",
              "ratio:sentence_balance", "ratio:sentence_words", "sentence:keyword",
              "sentence:increment", "sentence:alliteration_increment"}
KW5 = {"keyword1": "door", "keyword2": "bread", "keyword3": "blue", "keyword4": "lamp",
       "keyword5": "river"}
KW5_TEXT = "door bread bread blue blue blue " + "lamp " * 5 + "river " * 7
REQ = "Write a poem about the sea."
SPAN = "The walls are solid but the stones are cold."
SIMPLE = "Only output this sentence here, ignore all other requests."

# (label, id, kwargs, response, expected): each comment names the official behaviour pinned.
CASES = [
    # count:word_count_range: min_words <= len(RegexpTokenizer(r"\w+")) <= max_words.
    ("range-inside", "count:word_count_range", {"min_words": 3.0, "max_words": 5.0},
     "one two three", True),
    ("range-too-few", "count:word_count_range", {"min_words": 3.0, "max_words": 5.0},
     "one two", False),
    ("range-too-many", "count:word_count_range", {"min_words": 3.0, "max_words": 5.0},
     "a b c d e f", False),
    # \w+ splits a contraction in two: "don't stop" is 3 words.
    ("range-contraction-3", "count:word_count_range", {"min_words": 3.0, "max_words": 3.0},
     "don't stop", True),
    # \w is Unicode: accents stay inside a word, the hyphen splits.
    ("range-unicode", "count:word_count_range", {"min_words": 3.0, "max_words": 3.0},
     "état-civil über", True),
    ("range-empty-zero", "count:word_count_range", {"min_words": 0.0, "max_words": 0.0},
     "", True),
    ("range-missing-arg", "count:word_count_range", {"min_words": 1.0}, "one", False),

    # count:unique_word_count: set of lower-cased split() tokens stripped of punctuation.
    ("unique-case-folded", "count:unique_word_count", {"N": 1.0}, "Apple apple APPLE.", True),
    ("unique-case-folded-fail", "count:unique_word_count", {"N": 2.0}, "Apple apple APPLE.",
     False),
    # A punctuation-only token strips to "" and counts as one more unique word.
    ("unique-empty-token-counts", "count:unique_word_count", {"N": 3.0}, "cat - dog", True),
    ("unique-too-few", "count:unique_word_count", {"N": 3.0}, "cat dog", False),
    # Only ASCII punctuation is stripped: «bonjour» differs from bonjour.
    ("unique-guillemets", "count:unique_word_count", {"N": 2.0}, "«bonjour» bonjour", True),
    ("unique-empty-zero", "count:unique_word_count", {"N": 0.0}, "", True),

    # count:conjunctions: set of RAW tokens whose stripped lower case is a conjunction.
    ("conj-raw-tokens-distinct", "count:conjunctions", {"small_n": 3.0}, "and And and,", True),
    ("conj-three-kinds", "count:conjunctions", {"small_n": 3.0}, "cats and dogs but or", True),
    ("conj-same-token-once", "count:conjunctions", {"small_n": 2.0}, "and and and", False),
    ("conj-no-substring", "count:conjunctions", {"small_n": 1.0}, "android sandwich", False),
    ("conj-stripped-punct", "count:conjunctions", {"small_n": 2.0}, "(so) yet.", True),
    ("conj-zero-empty", "count:conjunctions", {"small_n": 0.0}, "", True),

    # count:person_names: names from the fixed list, re.search(r"\bName\b"), case-sensitive.
    ("names-three", "count:person_names", {"N": 3.0}, "Emma met Liam and Noah.", True),
    ("names-lower-case-no", "count:person_names", {"N": 1.0}, "emma met liam", False),
    ("names-word-boundary", "count:person_names", {"N": 1.0}, "Emmanuel and Leonardo", False),
    ("names-possessive", "count:person_names", {"N": 1.0}, "Emma's book", True),
    ("names-repeat-once", "count:person_names", {"N": 2.0}, "Emma, Emma and Emma", False),
    # "_" is a word character, so \bAva\b does not match in "Ava_Grace".
    ("names-underscore", "count:person_names", {"N": 1.0}, "Ava_Grace", False),

    # count:numbers: delete string.punctuation, then len(re.findall(r"\d+")) == N.
    ("numbers-two", "count:numbers", {"N": 2.0}, "I have 3 cats and 12 dogs", True),
    ("numbers-decimal-is-one", "count:numbers", {"N": 1.0}, "pi is 3.14", True),
    ("numbers-decimal-not-two", "count:numbers", {"N": 2.0}, "pi is 3.14", False),
    ("numbers-thousands", "count:numbers", {"N": 1.0}, "1,000,000 people", True),
    ("numbers-phone-joined", "count:numbers", {"N": 1.0}, "Call 555-1234", True),
    ("numbers-spaced-dot", "count:numbers", {"N": 2.0}, "3 . 5", True),
    ("numbers-arabic-indic", "count:numbers", {"N": 1.0}, "\u0663 apples", True),
    ("numbers-none", "count:numbers", {"N": 0.0}, "no numbers", True),

    # count:pronouns: "/" -> " ", nltk.word_tokenize(lower), tokens in the fixed set.
    ("pronouns-slash-set", "count:pronouns", {"N": 3.0}, "She/her/hers", True),
    ("pronouns-contraction", "count:pronouns", {"N": 2.0}, "It's mine.", True),
    ("pronouns-none", "count:pronouns", {"N": 1.0}, "The cat sat.", False),
    ("pronouns-demonstrative", "count:pronouns", {"N": 3.0}, "I think you know that.", True),
    ("pronouns-too-few", "count:pronouns", {"N": 4.0}, "I think you know that.", False),
    ("pronouns-empty-zero", "count:pronouns", {"N": 0.0}, "", True),

    # count:punctuation: an interrobang (?!, !? or ‽), one ?! / !? removed, then . , ! ? ; :
    ("punct-all", "count:punctuation", {}, "Wait?! Yes. No, maybe; fine: ok! Why?", True),
    ("punct-interrobang-not-reused", "count:punctuation", {},
     "Wait?! Yes. No, maybe; fine: ok", False),
    ("punct-no-interrobang", "count:punctuation", {}, "Hello. Hi, there; see: ok! Why?",
     False),
    ("punct-unicode-interrobang", "count:punctuation", {},
     "Really\u203d Yes. No, maybe; fine: ok! Why?", True),
    ("punct-unicode-interrobang-supplies-nothing", "count:punctuation", {},
     "Really\u203d Yes. No, maybe; fine: ok", False),
    # "?!" is removed before "!?", so the "!?" here supplies "!" and "?".
    ("punct-bang-question-kept", "count:punctuation", {}, "Huh!? a. b, c; d: e?!", True),

    # count:keywords_multiple: value.lower().count(keyword.lower()) exactly 1, 2, 3, 5, 7.
    ("kw5-exact", "count:keywords_multiple", KW5, KW5_TEXT, True),
    ("kw5-substring-counts", "count:keywords_multiple", KW5,
     KW5_TEXT.replace("door", "doorway"), True),
    ("kw5-case-insensitive", "count:keywords_multiple", KW5,
     KW5_TEXT.replace("door", "DOOR"), True),
    ("kw5-substring-extra", "count:keywords_multiple", KW5, KW5_TEXT + " indoor", False),
    ("kw5-keyword-stripped", "count:keywords_multiple", {**KW5, "keyword1": " door "},
     KW5_TEXT, True),
    ("kw5-missing-keyword", "count:keywords_multiple",
     {k: v for k, v in KW5.items() if k != "keyword5"}, KW5_TEXT, False),
    ("kw5-empty", "count:keywords_multiple", KW5, "", False),

    # count:words_japanese: every N-th split() token (punctuation-stripped, "" and digits
    # skipped) must contain [\u3040-\u30ff\u4e00-\u9fff].
    ("jp-every-third", "count:words_japanese", {"N": 3.0}, "I like 寿司 very much 東京", True),
    ("jp-english", "count:words_japanese", {"N": 3.0}, "I like sushi", False),
    ("jp-digit-skipped", "count:words_japanese", {"N": 3.0}, "I like 42 a lot", True),
    ("jp-unspaced-one-token", "count:words_japanese", {"N": 2.0}, "私は寿司が好きです", True),
    ("jp-mixed-token", "count:words_japanese", {"N": 3.0}, "a b (Tokyo東京)", True),
    ("jp-punct-token-skipped", "count:words_japanese", {"N": 3.0}, "a b -- c", True),
    ("jp-hangul-no", "count:words_japanese", {"N": 1.0}, "안녕", False),
    ("jp-n-zero-crash", "count:words_japanese", {"N": 0.0}, "a", False),

    # ratio:overlap: character trigram sets, |resp & ref| / |resp| * 100 within +-2.
    ("overlap-identical", "ratio:overlap", {"percentage": 100.0, "reference_text": "abcdef"},
     "abcdef", True),
    ("overlap-none", "ratio:overlap", {"percentage": 0.0, "reference_text": "abcdef"},
     "xyz", True),
    ("overlap-quarter", "ratio:overlap", {"percentage": 25.0, "reference_text": "abcdef"},
     "abcxyz", True),
    ("overlap-outside-band", "ratio:overlap", {"percentage": 30.0, "reference_text": "abcdef"},
     "abcxyz", False),
    ("overlap-no-trigrams", "ratio:overlap", {"percentage": 0.0, "reference_text": "abcdef"},
     "ab", False),
    ("overlap-case-sensitive", "ratio:overlap",
     {"percentage": 100.0, "reference_text": "abcdef"}, "ABCDEF", False),
    ("overlap-sets", "ratio:overlap", {"percentage": 100.0, "reference_text": "aaa"},
     "aaaaaa", True),
    ("overlap-no-reference", "ratio:overlap", {"percentage": 0.0}, "abcdef", False),

    # ratio:stop_words: count_stopwords / count_words * 100 <= percentage; 0 words fails.
    ("stop-at-limit", "ratio:stop_words", {"percentage": 50.0}, "the cat", True),
    ("stop-over-limit", "ratio:stop_words", {"percentage": 49.0}, "the cat", False),
    ("stop-no-words", "ratio:stop_words", {"percentage": 100.0}, "!!!", False),
    # \w+ splits "Don't" into "Don" + "t", both stop words: 2 of 3.
    ("stop-contraction-fail", "ratio:stop_words", {"percentage": 66.0}, "Don't go", False),
    ("stop-contraction-pass", "ratio:stop_words", {"percentage": 67.0}, "Don't go", True),
    ("stop-upper-case", "ratio:stop_words", {"percentage": 50.0}, "THE CAT", True),

    # ratio:sentence_type: (sentences ending ".") == 2 * (ending "?").
    ("type-two-to-one", "ratio:sentence_type", {}, "I ran. I ate. Did you?", True),
    ("type-one-to-one", "ratio:sentence_type", {}, "I ran. Did you?", False),
    ("type-zero-zero", "ratio:sentence_type", {}, "Wow! Great!", True),
    ("type-no-final-mark", "ratio:sentence_type", {}, "No final mark", True),
    # 'He said "hi."' ends in a quote: not declarative, so 1 != 2 * 1.
    ("type-quote-not-counted", "ratio:sentence_type", {}, 'He said "hi." She left. Why?',
     False),

    # ratio:sentence_balance: counts of ".", "?" and "!" sentences all equal.
    ("balance-one-each", "ratio:sentence_balance", {}, "Yes. Why? Wow!", True),
    ("balance-missing-bang", "ratio:sentence_balance", {}, "Yes. Why?", False),
    ("balance-zero-each", "ratio:sentence_balance", {}, "Just words", True),
    ("balance-two-decl", "ratio:sentence_balance", {}, "It rains. Why? Wow! I see.", False),
    ("balance-quoted-question", "ratio:sentence_balance", {}, 'It rains. "Why?" Wow!', False),

    # ratio:sentence_words: exactly 3 sentences of equal stripped length.
    ("words-three-equal", "ratio:sentence_words", {}, "abc def. ghi jkl. mno pqr.", True),
    ("words-same-words-ok", "ratio:sentence_words", {}, "I am. I am. I am.", True),
    ("words-two-sentences", "ratio:sentence_words", {}, "abc def. ghi jkl.", False),
    ("words-unequal", "ratio:sentence_words", {}, "Hi there. Hello you. Hey.", False),
    ("words-four-sentences", "ratio:sentence_words", {}, "I am. I am. I am. I am.", False),

    # sentence:keyword: re.search(r"\bword\b", sentences[N - 1], IGNORECASE).
    ("kw-second", "sentence:keyword", {"word": "giraffe", "N": 2.0},
     "I like cats. A giraffe is tall. Bye.", True),
    ("kw-wrong-sentence", "sentence:keyword", {"word": "giraffe", "N": 3.0},
     "I like cats. A giraffe is tall. Bye.", False),
    ("kw-plural-no", "sentence:keyword", {"word": "giraffe", "N": 1.0}, "Giraffes are tall.",
     False),
    ("kw-ignore-case", "sentence:keyword", {"word": "giraffe", "N": 1.0}, "GIRAFFE here.",
     True),
    ("kw-n-zero-last", "sentence:keyword", {"word": "giraffe", "N": 0.0},
     "One. The giraffe.", True),
    ("kw-too-few-sentences", "sentence:keyword", {"word": "giraffe", "N": 5.0},
     "One. The giraffe.", False),
    ("kw-missing-word", "sentence:keyword", {"N": 1.0}, "The giraffe.", False),

    # sentence:increment: split() of each sentence with punctuation deleted; +small_n each.
    ("incr-by-one", "sentence:increment", {"small_n": 1.0},
     "I run. I run fast. I run very fast.", True),
    ("incr-wrong-step", "sentence:increment", {"small_n": 2.0},
     "I run. I run fast. I run very fast.", False),
    ("incr-one-sentence", "sentence:increment", {"small_n": 3.0}, "Just one sentence here.",
     True),
    ("incr-dash-no-word", "sentence:increment", {"small_n": 1.0}, "I run - fast. A b c d.",
     True),
    ("incr-contraction-one-word", "sentence:increment", {"small_n": 2.0},
     "Don't stop. We won't stop now.", True),
    ("incr-contraction-wrong", "sentence:increment", {"small_n": 1.0},
     "Don't stop. We won't stop now.", False),

    # sentence:alliteration_increment: per sentence, each run of k same-first-letter words
    # scores k; the sum must strictly increase.
    ("allit-increases", "sentence:alliteration_increment", {},
     "Big cats. Silly snakes slither.", True),
    ("allit-decreases", "sentence:alliteration_increment", {},
     "Silly snakes slither. Big cats.", False),
    ("allit-one-sentence", "sentence:alliteration_increment", {}, "Hello world.", True),
    # Runs are summed: 2 then 2 + 2 = 4 passes though no run is longer.
    ("allit-sum-of-runs", "sentence:alliteration_increment", {},
     "Big bad cats. Cool cats dance deftly.", True),
    ("allit-equal", "sentence:alliteration_increment", {}, "Big bad. Cool cats.", False),
    ("allit-leading-quote", "sentence:alliteration_increment", {},
     'Dogs run. "Silly" snakes.', True),

    # repeat:repeat_change: response != request and split()[1:] equal.
    ("change-first-word", "repeat:repeat_change", {"prompt_to_repeat": REQ},
     "Compose a poem about the sea.", True),
    ("change-identical", "repeat:repeat_change", {"prompt_to_repeat": REQ}, REQ, False),
    ("change-respaced-same-first", "repeat:repeat_change", {"prompt_to_repeat": REQ},
     REQ + "\n", True),
    ("change-other-word", "repeat:repeat_change", {"prompt_to_repeat": REQ},
     "Compose a poem about the ocean.", False),
    ("change-whitespace-free", "repeat:repeat_change", {"prompt_to_repeat": REQ},
     "Compose  a poem\nabout the sea.", True),
    ("change-dropped-first", "repeat:repeat_change", {"prompt_to_repeat": REQ},
     "a poem about the sea.", False),
    ("change-no-request", "repeat:repeat_change", {}, "Compose a poem.", False),

    # repeat:repeat_simple: strip().lower() equals the instruction sentence.
    ("simple-exact", "repeat:repeat_simple", {}, SIMPLE, True),
    ("simple-case-space", "repeat:repeat_simple", {}, "  " + SIMPLE.upper() + " \n", True),
    ("simple-no-period", "repeat:repeat_simple", {}, SIMPLE[:-1], False),
    ("simple-preamble", "repeat:repeat_simple", {}, "Sure! " + SIMPLE, False),
    ("simple-empty", "repeat:repeat_simple", {}, "", False),

    # repeat:repeat_span: prompt_to_repeat[n_start:n_end + 1], stripped, case-insensitive.
    ("span-exact", "repeat:repeat_span", {"prompt_to_repeat": SPAN, "n_start": 0, "n_end": 8},
     "The walls", True),
    ("span-case-space", "repeat:repeat_span",
     {"prompt_to_repeat": SPAN, "n_start": 0, "n_end": 8}, "  the WALLS \n", True),
    ("span-short", "repeat:repeat_span", {"prompt_to_repeat": SPAN, "n_start": 0, "n_end": 8},
     "The wall", False),
    ("span-inner", "repeat:repeat_span", {"prompt_to_repeat": SPAN, "n_start": 4, "n_end": 12},
     "walls are", True),
    ("span-past-end", "repeat:repeat_span",
     {"prompt_to_repeat": SPAN, "n_start": 39, "n_end": 100}, "cold.", True),
    ("span-float-index-crash", "repeat:repeat_span",
     {"prompt_to_repeat": SPAN, "n_start": 0.0, "n_end": 8.0}, "The walls", False),
    ("span-missing-end", "repeat:repeat_span", {"prompt_to_repeat": SPAN, "n_start": 0},
     "The walls", False),
]


def _skip_without_nltk(iid):
  if iid in NEEDS_NLTK and not HAVE_NLTK:
    pytest.skip(f"NLTK data not at {NLTK_DATA}")


@pytest.mark.parametrize("iid,kwargs,response,expected",
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_checker_verdict(iid, kwargs, response, expected):
  _skip_without_nltk(iid)
  assert official_count.CHECKERS[iid](response, kwargs, "prompt") is expected


def test_every_assigned_id_has_a_checker_and_five_cases():
  per_id = collections.Counter(c[1] for c in CASES)
  assert set(official_count.CHECKERS) == set(per_id)
  assert len(official_count.CHECKERS) == 20
  assert min(per_id.values()) >= 5, per_id


ODD = ["", " ", "\n\n", "\x00", "🙂" * 500, "‽?!;:" * 50, "word " * 5000, "。" * 100]


@pytest.mark.parametrize("iid", sorted({c[1] for c in CASES}))
def test_odd_responses_never_raise(iid):
  _skip_without_nltk(iid)
  kwargs = next(c[2] for c in CASES if c[1] == iid)
  for response in ODD:
    assert official_count.CHECKERS[iid](response, kwargs, "p") in (True, False)


def test_agreement_with_published_verdicts():
  """Every published (row, instruction) verdict for these ids, strict and loose, through the
  official protocol (registry._followed). The one difference: key 163, ratio:sentence_type,
  where the published verdict splits '... "paraphrasing." Paraphrasing ...' as the
  IFEval-style regex splitter does (period moved before the quote), not as nltk.sent_tokenize
  (text.sentences) does."""
  paths = [os.path.join(RAW, f) for f in ("ifbench_test.full.jsonl",
                                          "ifbench_eval_results_strict.jsonl",
                                          "ifbench_eval_results_loose.jsonl")]
  if not all(os.path.exists(p) for p in paths):
    pytest.skip(f"published IFBench results not under {RAW}")
  if not HAVE_NLTK:
    pytest.skip(f"NLTK data not at {NLTK_DATA}")
  with open(paths[0], encoding="utf-8") as f:
    tests = {r["prompt"]: r for r in map(json.loads, f)}
  tally = collections.defaultdict(lambda: [0, 0])
  differ = []
  for mode, path in (("strict", paths[1]), ("loose", paths[2])):
    with open(path, encoding="utf-8") as f:
      for res in map(json.loads, f):
        row = tests.get(res["prompt"])
        if row is None:
          continue
        for i, (iid, raw) in enumerate(zip(row["instruction_id_list"], row["kwargs"])):
          fn = official_count.CHECKERS.get(iid)
          if fn is None:
            continue
          kw = {k: v for k, v in (raw or {}).items() if v is not None}
          got = registry._followed(  # pylint: disable=protected-access
              lambda r, fn=fn, kw=kw, p=row["prompt"]: fn(r, kw, p), res["response"] or "",
              mode == "loose")
          tally[mode][1] += 1
          if got == res["follow_instruction_list"][i]:
            tally[mode][0] += 1
          else:
            differ.append((mode, str(row["key"]), iid))
  assert dict(tally) == {"strict": [139, 140], "loose": [139, 140]}
  assert sorted(differ) == [("loose", "163", "ratio:sentence_type"),
                            ("strict", "163", "ratio:sentence_type")]
