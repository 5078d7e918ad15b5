"""Official-mode checkers of IFBench's format:* and custom:* ids
(harnessrl_jax/eval/ifverify/official_format.py): hand-written cases whose expected verdicts
follow allenai/IFBench's check_following (ifbench/instructions.py at db69a6f), quirks
included, and the agreement with the published verdicts."""

from __future__ import annotations

import json
import os
import string

import pytest

from harnessrl_jax.eval.ifverify import official_format, registry
from repo_paths import REPO

RAW = os.path.join(REPO, "..", "shared", "data", "upstream", "raw")
NLTK_DATA = os.path.join(REPO, "..", "shared", "data", "nltk_data")
os.environ.setdefault("NLTK_DATA", NLTK_DATA)

needs_nltk = pytest.mark.skipif(not os.path.isdir(NLTK_DATA),
                                reason=f"NLTK data (punkt_tab, stopwords) not at {NLTK_DATA}")
NLTK_IDS = {"format:emoji", "format:no_bullets_bullets", "format:title_case",
            "custom:sentence_alphabet", "custom:word_reverse"}

CAPITALS = ["Reykjavik", "Helsinki", "Oslo", "Tallinn", "Stockholm", "Riga", "Moscow",
            "Copenhagen", "Vilnius", "Minsk", "Dublin", "Berlin", "Amsterdam", "Warsaw", "London",
            "Brussels", "Prague", "Luxembourg", "Paris", "Vienna", "Bratislava", "Budapest",
            "Vaduz", "Chisinau", "Bern", "Ljubljana", "Zagreb"]


def check(iid: str, response: str, **kwargs) -> bool:
  return official_format.CHECKERS[iid](response, kwargs, "prompt")


def case(iid, response, expected, name, **kwargs):
  marks = [needs_nltk] if iid in NLTK_IDS else []
  return pytest.param(iid, response, kwargs, expected, id=f"{iid}-{name}", marks=marks)


def csv_table(header: str, rows: list[str]) -> str:
  return "\n".join([header, *rows])


def mcq(stems: list[str], n_options: int = 5, preamble: str = "") -> str:
  out = [preamble] if preamble else []
  for i, stem in enumerate(stems, 1):
    out.append(f"Question {i}: {stem}")
    out += [f"{'ABCDE'[j]}. Option {j}" for j in range(n_options)]
  return "\n".join(out)


def stories(letters: str) -> str:
  return " ".join(f"{c.upper()}x is here." for c in letters)


# 51 made-up lines after Zimbabwe, in reverse order: the official check never asks whether a
# line is a country.
AFRICA = ["Zimbabwe"] + sorted((f"Land {i:02d}" for i in range(51)), reverse=True)
SPECIAL_HEADER = "ProductID,Category,Brand,Price,Stock"
PRODUCT = "1,Toys,Acme,9.99,3"
QUOTES_HEADER = '"StudentID"\t"Subject"\t"Grade"\t"Semester"\t"Score"'
STUDENT = '"1"\t"Math"\t"A"\t"Fall"\t"95"'
CITY_HEADER = "ID,Country,City,Year,Count"
CITY = "1,France,Paris,2020,5"

CASES = [
    # format:emoji: every NLTK sentence, punctuation removed, ends in an emoji.
    case("format:emoji", "I love pizza 🍕. It is great 😀.", True, "each-sentence"),
    case("format:emoji", "I love pizza. It is great 😀.", False, "first-sentence-missing"),
    case("format:emoji", "Hello 😀 world.", False, "emoji-not-at-end"),
    # second-to-last character: '❤' + U+FE0F (variation selector, not an emoji itself)
    case("format:emoji", "Nice \u2764\ufe0f.", True, "second-to-last-char"),
    # Punkt moves the emoji after "pizza." to the next sentence; an emoji starting the next
    # sentence rescues the previous one
    case("format:emoji", "I love pizza. 🍕 It is great 😀.", True, "next-sentence-rescue"),
    case("format:emoji", "Wow 😀. ...", False, "punctuation-only-sentence"),
    case("format:emoji", "", True, "no-sentence-passes"),
    # format:line_indent: leading spaces strictly increase line by line.
    case("format:line_indent", "a\n b\n  c", True, "stairs"),
    case("format:line_indent", "a\n b\n c", False, "equal-indent"),
    case("format:line_indent", "  a\n b", False, "decreasing"),
    case("format:line_indent", "a\n\tb", False, "tab-is-not-indent"),
    case("format:line_indent", "a\n b\n\n  c", True, "one-blank-line-removed"),
    # removing while iterating skips the second of two blank lines, which stays (indent 0)
    case("format:line_indent", "a\n b\n\n\n  c", False, "second-blank-line-kept"),
    case("format:line_indent", "one line", True, "single-line"),
    # format:list: the marker occurs at least twice anywhere (re.findall, non-overlapping).
    case("format:list", "SEPARATOR a\nSEPARATOR b", True, "two-markers", sep="SEPARATOR"),
    case("format:list", "x !?!? y", False, "one-marker", sep="!?!?"),
    case("format:list", "A well-known, self-made list", True, "dash-inside-words", sep="-"),
    case("format:list", "!?!?!?", False, "non-overlapping", sep="!?!?"),
    case("format:list", "a\u2026 b\u2026", False, "unicode-ellipsis-is-not-dots", sep="..."),
    case("format:list", "a - b - c", False, "no-sep-kwarg"),
    # format:newline: non-empty lines (punctuation removed) == whitespace words.
    case("format:newline", "Hello\nworld", True, "one-per-line"),
    case("format:newline", "Hello world", False, "two-on-a-line"),
    case("format:newline", "Hello,\nworld!", True, "punctuation-ignored"),
    case("format:newline", "Hello\n\n\nworld", True, "empty-lines-dropped"),
    case("format:newline", "Hello\n \nworld", False, "space-line-counts"),
    case("format:newline", "-\nword", True, "punctuation-line-vanishes"),
    # format:no_bullets_bullets: >= 2 NLTK sentences, then >= 2 '*' lines, nothing after.
    case("format:no_bullets_bullets", "First one. Second one.\n* a\n* b", True, "basic"),
    case("format:no_bullets_bullets", "Only one sentence.\n* a\n* b", False, "one-sentence"),
    case("format:no_bullets_bullets", "One. Two.\n* a", False, "one-bullet"),
    case("format:no_bullets_bullets", "One. Two.\n\n* a\n* b", True, "blank-before-bullets"),
    # a blank line sets the flag to [] so the next text line fails
    case("format:no_bullets_bullets", "First one.\n\nSecond one.\n* a\n* b", False,
         "text-after-blank-line"),
    case("format:no_bullets_bullets", "One. Two.\n* a\n* b\nThanks.", False, "text-after"),
    case("format:no_bullets_bullets", "One. Two.\n* a\n* b\n", False, "trailing-newline"),
    case("format:no_bullets_bullets", "Line one\nLine two\n* a\n* b", True,
         "sentences-need-no-period"),
    # format:no_whitespace: no str.isspace character.
    case("format:no_whitespace", "abc", True, "none"),
    case("format:no_whitespace", "a b", False, "space"),
    case("format:no_whitespace", "abc\n", False, "newline"),
    case("format:no_whitespace", "a\u00a0b", False, "nbsp"),
    case("format:no_whitespace", "a\u200bb", True, "zero-width-space-is-not-space"),
    # format:options: letter options exact, text options loose; separator "/", "or", ",".
    case("format:options", "Yes.", True, "text-option-punct", options="yes/no/maybe"),
    case("format:options", "  MAYBE!", True, "text-option-case", options="yes/no/maybe"),
    case("format:options", "yes, definitely", False, "extra-words", options="yes/no/maybe"),
    case("format:options", "I don't know.", True, "or-separator",
         options="I know or I don't know"),
    case("format:options", "I", False, "or-partial", options="I know or I don't know"),
    case("format:options", "b)", True, "letter-exact", options="a), b), c), d)"),
    case("format:options", "b", False, "letter-without-paren", options="a), b), c), d)"),
    case("format:options", " b)", False, "letter-space", options="a), b), c), d)"),
    # "or" inside "for" makes "or" the separator: options 'f' and 'sure, no way'
    case("format:options", "sure, no way", True, "or-substring",
         options="for sure, no way"),
    case("format:options", "no way", False, "or-substring-comma-kept",
         options="for sure, no way"),
    case("format:options", "yes", False, "no-options-kwarg"),
    # format:output_template: the three labels anywhere, case-sensitive.
    case("format:output_template", "My Answer: x My Conclusion: y Future Outlook: z", True,
         "template"),
    case("format:output_template", "Future Outlook: z\nMy Conclusion: y\nMy Answer: x", True,
         "any-order"),
    case("format:output_template", "my answer: x My Conclusion: y Future Outlook: z", False,
         "case"),
    case("format:output_template", "My Answer: x My Conclusion: y", False, "missing"),
    case("format:output_template", "**My Answer:** x **My Conclusion:** y **Future Outlook:** "
         "z", True, "bold-colon-inside"),
    case("format:output_template", "**My Answer**: x **My Conclusion**: y **Future "
         "Outlook**: z", False, "bold-colon-outside"),
    # format:parentheses: a matched closer once depth 5 was reached.
    case("format:parentheses", "((((()))))", True, "five"),
    case("format:parentheses", "(((())))", False, "four"),
    case("format:parentheses", "([{([x])}])", True, "mixed-kinds"),
    case("format:parentheses", "((((( x )", True, "one-closer-suffices"),
    case("format:parentheses", "(((((x]", False, "mismatch-resets"),
    case("format:parentheses", "((((( ] )", False, "reset-then-unopened"),
    case("format:parentheses", "", False, "empty"),
    # format:quote_unquote: no '""' after removing whitespace, no '"' at the end.
    case("format:quote_unquote", '"Hi" means hello.', True, "explained"),
    case("format:quote_unquote", 'He said "hi"', False, "ends-with-quote"),
    case("format:quote_unquote", 'He said "hi".', False, "period-after-final-quote"),
    case("format:quote_unquote", 'He said "hi" 2', False, "digits-stripped"),
    case("format:quote_unquote", '"a" "b" is two', False, "adjacent-quotes"),
    case("format:quote_unquote", "\u201ca\u201d \u201cb\u201d", True, "curly-quotes-ignored"),
    case("format:quote_unquote", "The character '\"' is a quote.", True, "mention-of-quote"),
    # format:quotes: a closing quote 3 levels below the deepest level reached.
    case("format:quotes", "\"She said 'he told me \"run\" today' loudly\"", True, "three"),
    case("format:quotes", "\"a 'b' c\"", False, "two"),
    case("format:quotes", '"a "b" c"', False, "same-kind-closes"),
    case("format:quotes", "\"I don't \"know\" it's\"", True, "apostrophes-are-quotes"),
    case("format:quotes", "don't it's can't", False, "apostrophes-only"),
    case("format:quotes", "", False, "empty"),
    # format:sub-bullets: split on every '*', each piece after the first has a '-'.
    case("format:sub-bullets", "* a\n  - b\n* c\n  - d", True, "nested"),
    case("format:sub-bullets", "* a\n* b\n  - c", False, "bullet-without-sub"),
    case("format:sub-bullets", "No bullets at all", True, "no-star-passes"),
    case("format:sub-bullets", "**Bold** text\n* a\n  - b", False, "bold-stars-split"),
    case("format:sub-bullets", "* well-known item", True, "dash-inside-word"),
    # format:thesis: <i>/<em> thesis, non-blank, then non-blank text.
    case("format:thesis", "<i>Thesis.</i> Body text.", True, "i"),
    case("format:thesis", "<em>Thesis</em> Body", True, "em"),
    case("format:thesis", "<i>Thesis.</i>", False, "nothing-after"),
    case("format:thesis", "<i> </i> Body", False, "blank-thesis"),
    case("format:thesis", "<em></em>", True, "em-offsets-keep-angle-brackets"),
    case("format:thesis", "*Thesis* body", False, "markdown-italics"),
    case("format:thesis", "<i>Thesis body", False, "unclosed"),
    # format:title_case: NLTK tokens starting with a letter are capitalised.
    case("format:title_case", "The Quick Brown Fox", True, "title"),
    case("format:title_case", "The quick Brown Fox", False, "lower-word"),
    case("format:title_case", "A Tale of Two Cities", False, "minor-words-too"),
    case("format:title_case", "I Am a Cat", False, "single-lower-letter"),
    case("format:title_case", "Don't Stop", False, "contraction-nt-token"),
    case("format:title_case", "NASA And iPhone", True, "all-caps-and-mixed-pass"),
    case("format:title_case", "123 Go! \u00c9lan Vital", True, "digits-unicode"),
    case("format:title_case", "\u00e9lan", False, "unicode-lower"),
    # custom:character_reverse: 'elgae dlab' anywhere, any case.
    case("custom:character_reverse", ".elgae dlab eht si lobmys ehT", True, "reversed"),
    case("custom:character_reverse", "ELGAE DLAB", True, "case-insensitive"),
    case("custom:character_reverse", "The bald eagle", False, "not-reversed"),
    case("custom:character_reverse", "elgae  dlab", False, "double-space"),
    case("custom:character_reverse", "elgaedlab", False, "no-space"),
    # custom:csv_city: csv.reader rows: exact header + 7 rows of 5 fields.
    case("custom:csv_city", csv_table(CITY_HEADER, [CITY] * 7), True, "seven-rows"),
    case("custom:csv_city", csv_table(CITY_HEADER, [CITY] * 7) + "\n", True, "trailing-nl"),
    case("custom:csv_city", csv_table(CITY_HEADER, [CITY] * 6), False, "six-rows"),
    case("custom:csv_city", csv_table("ID, Country, City, Year, Count", [CITY] * 7), False,
         "header-spaces"),
    case("custom:csv_city", csv_table(CITY_HEADER, [CITY] * 3 + [""] + [CITY] * 4), False,
         "blank-line-is-a-row"),
    case("custom:csv_city", csv_table(CITY_HEADER, ['1,"Korea, South",Seoul,2020,5'] * 7),
         True, "quoted-comma"),
    case("custom:csv_city", csv_table(CITY_HEADER, ['"' + "x" * 200000 + '",a,b,c,d'] * 7),
         False, "csv-error-is-false"),
    # custom:csv_special_character: header regex, 14 rows; '"' tripled before parsing.
    case("custom:csv_special_character",
         csv_table(SPECIAL_HEADER, ['2,Toys,"Tom & Jerry",5,1'] + [PRODUCT] * 13), True,
         "quoted-special"),
    case("custom:csv_special_character", csv_table(SPECIAL_HEADER, [PRODUCT] * 14), False,
         "no-quoted-field"),
    case("custom:csv_special_character",
         csv_table(SPECIAL_HEADER, ['2,Toys,"Acme",5,1'] + [PRODUCT] * 13), False,
         "quoted-without-special"),
    case("custom:csv_special_character",
         csv_table(SPECIAL_HEADER, ['2,Toys,"Acme, Inc.",5,1'] + [PRODUCT] * 13), True,
         "quoted-comma-kept-in-field"),
    case("custom:csv_special_character",
         csv_table(SPECIAL_HEADER, ['2,Toys,"Tom & Jerry",5,1'] + [PRODUCT] * 12), False,
         "thirteen-rows"),
    case("custom:csv_special_character",
         csv_table('"ProductID", "Category", Brand, Price, Stock',
                   ['2,Toys,"Tom & Jerry",5,1'] + [PRODUCT] * 13), True, "header-quoted-spaced"),
    case("custom:csv_special_character",
         csv_table("ProductID;Category;Brand;Price;Stock", ['2;"A&B";x;1;2'] * 14), False,
         "header-semicolons"),
    # the first row with a quoted special field decides; later rows are not checked
    case("custom:csv_special_character",
         csv_table(SPECIAL_HEADER, ['2,Toys,"Tom & Jerry",5,1', "3,x"] + [PRODUCT] * 12),
         True, "early-return"),
    # custom:csv_quotes: tab header regex, 3 rows, every field (header too) quoted.
    case("custom:csv_quotes", csv_table(QUOTES_HEADER, [STUDENT] * 3), True, "all-quoted"),
    case("custom:csv_quotes", csv_table("StudentID\tSubject\tGrade\tSemester\tScore",
                                        [STUDENT] * 3), False, "bare-header-fails-later"),
    case("custom:csv_quotes", csv_table(QUOTES_HEADER, [STUDENT] * 2 +
                                        ['"2"\tMath\t"B"\t"Fall"\t"80"']), False, "bare-field"),
    case("custom:csv_quotes", csv_table(QUOTES_HEADER, [STUDENT] * 2), False, "two-rows"),
    case("custom:csv_quotes", csv_table(QUOTES_HEADER.replace("\t", ","),
                                        [STUDENT.replace("\t", ",")] * 3), False, "commas"),
    case("custom:csv_quotes", csv_table(QUOTES_HEADER, [STUDENT] * 2 +
                                        ['"2"\t\t"B"\t"Fall"\t"80"']), False,
         "empty-field-crash-is-false"),
    # custom:date_format_list: comma-separated YYYY-MM-DD, 1769..1821, loose day limits.
    case("custom:date_format_list", "1805-12-02, 1806-10-14", True, "dates"),
    case("custom:date_format_list", "1805-12-02 and 1806-10-14", False, "prose"),
    case("custom:date_format_list", "1900-01-01", False, "year-range"),
    case("custom:date_format_list", "1805-02-30", False, "feb-30"),
    case("custom:date_format_list", "1805-02-29", True, "feb-29-any-year"),
    case("custom:date_format_list", "1805-00-45", True, "month-00-any-day"),
    case("custom:date_format_list", "1805-04-00", True, "day-00"),
    case("custom:date_format_list", "1805-12-02,", False, "trailing-comma"),
    # custom:european_capitals_sort: exactly the official 27, comma-separated, in order.
    case("custom:european_capitals_sort", ", ".join(CAPITALS), True, "exact"),
    case("custom:european_capitals_sort",
         ", ".join(CAPITALS).replace("Reykjavik", "Reykjav\u00edk").replace(
             "Chisinau", "Chi\u0219in\u0103u"), True, "accents-folded"),
    case("custom:european_capitals_sort", ", ".join(CAPITALS) + ".", False, "final-period"),
    case("custom:european_capitals_sort", ", ".join(CAPITALS[1:2] + CAPITALS[:1] +
                                                    CAPITALS[2:]), False, "order"),
    case("custom:european_capitals_sort", "\n".join(CAPITALS), False, "newlines"),
    case("custom:european_capitals_sort", ", ".join(CAPITALS[:-1]) + " and Zagreb", False,
         "and"),
    # custom:mcq_count_length: starts with 'Question', 4 questions x 5 options, longer stems.
    case("custom:mcq_count_length", mcq(["Who?", "Who is?", "Who is it?", "Who is it now?"]),
         True, "valid"),
    case("custom:mcq_count_length", mcq(["Who?", "Who is?", "Who is it?", "Who is it now?"],
                                        preamble="Here you go:"), False, "preamble"),
    case("custom:mcq_count_length", mcq(["Who?", "Who is?", "Who is it?", "Who is it now?"],
                                        n_options=4), False, "four-options"),
    case("custom:mcq_count_length", mcq(["Who is?", "Who?", "Who is it?", "Who is it now?"]),
         False, "not-longer"),
    case("custom:mcq_count_length", mcq(["Who?", "Who is?", "Who is it?"]), False,
         "three-questions"),
    case("custom:mcq_count_length", "Q", False, "no-question"),
    # custom:multiples: the digit runs are exactly 14 21 28 35 42 49.
    case("custom:multiples", "14, 21, 28, 35, 42, 49", True, "commas"),
    case("custom:multiples", "14,21,28,35,42,49", True, "no-spaces"),
    case("custom:multiples", "14\n21\n28\n35\n42\n49", True, "lines"),
    case("custom:multiples", "7, 14, 21, 28, 35, 42, 49", False, "extra-7"),
    case("custom:multiples", "1. 14\n2. 21\n3. 28\n4. 35\n5. 42\n6. 49", False, "numbered"),
    case("custom:multiples", "Multiples of 7: 14, 21, 28, 35, 42, 49", False,
         "any-other-number"),
    # custom:reverse_newline: from 'Zimbabwe', >= 52 lines in descending code-point order.
    case("custom:reverse_newline", "\n".join(AFRICA), True, "52-lines"),
    case("custom:reverse_newline", "Here they are:\n" + "\n".join(AFRICA), True,
         "lines-before-ignored"),
    case("custom:reverse_newline", "\n".join(AFRICA[:-1]), False, "51-lines"),
    case("custom:reverse_newline", "\n".join(AFRICA[1:]), False, "no-zimbabwe"),
    case("custom:reverse_newline", "\n".join(AFRICA[:1] + AFRICA[2:] + AFRICA[1:2]), False,
         "out-of-order"),
    case("custom:reverse_newline", "\n".join(f"{i}. {c}" for i, c in enumerate(AFRICA, 1)),
         False, "numbered-lines"),
    case("custom:reverse_newline", "\n".join(["Zimbabwe", "zambia"] + AFRICA[1:]), False,
         "case-sensitive"),
    # custom:sentence_alphabet: 26 NLTK sentences starting a, b, c, ...
    case("custom:sentence_alphabet", stories(string.ascii_lowercase), True, "26"),
    case("custom:sentence_alphabet", stories(string.ascii_lowercase[:25]), False, "25"),
    case("custom:sentence_alphabet", stories("b" + string.ascii_lowercase[1:]), False,
         "wrong-letter"),
    case("custom:sentence_alphabet", '"' + stories(string.ascii_lowercase), False,
         "leading-quote"),
    case("custom:sentence_alphabet", "", False, "empty"),
    # custom:word_reverse: words reversed (lower, no punctuation) contain 'bald eagle'.
    case("custom:word_reverse", "eagle bald the is symbol national The.", True, "reversed"),
    case("custom:word_reverse", "The bald eagle.", False, "not-reversed"),
    case("custom:word_reverse", "Bald eagle eagle bald", True, "both-orders"),
    case("custom:word_reverse", "eagle bald\nthe", True, "lines-joined"),
    case("custom:word_reverse", "elgae dlab", False, "letters-reversed"),
]


@pytest.mark.parametrize("iid,response,kwargs,expected", CASES)
def test_official_verdict(iid, response, kwargs, expected):
  assert check(iid, response, **kwargs) is expected


def test_every_assigned_id_has_a_checker_and_cases():
  ids = {p.values[0] for p in CASES}
  assert ids == set(official_format.CHECKERS)
  assert len(official_format.CHECKERS) == 25
  counts = {i: sum(p.values[0] == i for p in CASES) for i in ids}
  assert min(counts.values()) >= 5, counts


ODD = ["", " ", "\n\n", "\x00", "\ud800", "\u0301" * 3, "😀" * 50, "*" * 1000,
       "(" * 5000 + ")" * 5000, "\"'" * 2000, ("word " * 20000), '"' + "x" * 200000]


@needs_nltk
@pytest.mark.parametrize("iid", sorted(official_format.CHECKERS))
def test_odd_responses_never_raise(iid):
  for response in ODD:
    for kwargs in ({}, {"sep": "-", "options": "yes/no/maybe"}):
      assert isinstance(official_format.CHECKERS[iid](response, kwargs, ""), bool)


def _published():
  """(row with kwargs and response, mode, official verdict list) over the published rows."""
  with open(os.path.join(RAW, "ifbench_test.full.jsonl"), encoding="utf-8") as f:
    kwargs = {r["prompt"]: r for r in map(json.loads, f)}
  for mode in ("strict", "loose"):
    path = os.path.join(RAW, f"ifbench_eval_results_{mode}.jsonl")
    with open(path, encoding="utf-8") as f:
      for res in map(json.loads, f):
        test_row = kwargs.get(res["prompt"])
        if test_row is not None:
          yield {**test_row, "response": res["response"]}, mode, res["follow_instruction_list"]


@needs_nltk
@pytest.mark.skipif(not os.path.isdir(RAW), reason=f"published IFBench verdicts not at {RAW}")
def test_agreement_with_published_verdicts():
  followed = registry._followed  # pylint: disable=protected-access  (the official protocol)
  agree, pairs, wrong = 0, 0, []
  for row, mode, official in _published():
    for i, (iid, raw) in enumerate(zip(row["instruction_id_list"], row["kwargs"])):
      if iid not in official_format.CHECKERS:
        continue
      kw = {k: v for k, v in raw.items() if v is not None}
      fn, prompt = official_format.CHECKERS[iid], row["prompt"]
      got = followed(lambda r, fn=fn, kw=kw, p=prompt: bool(fn(r, kw, p)), row["response"],
                     mode == "loose")
      pairs += 1
      if got == official[i]:
        agree += 1
      else:
        wrong.append((iid, mode, row["key"]))
  assert pairs == 214 and agree == pairs, wrong
