"""Official-mode checkers of the 25 IFEval ids (harnessrl_jax/eval/ifverify/official_ifeval.py).

Each expected verdict is read off google-research instruction_following_eval's
check_following (and build_description) for that id; the note on each case names the
official behaviour it pins. No published per-instruction IFEval verdicts are stored, so these
hand-written cases are the agreement measure.
"""

from __future__ import annotations

import os

import pytest

from repo_paths import REPO

NLTK_DATA = os.path.join(REPO, "..", "shared", "data", "nltk_data")
os.environ.setdefault("NLTK_DATA", NLTK_DATA)

from harnessrl_jax.eval.ifverify import official_ifeval, registry  # noqa: E402

needs_nltk = pytest.mark.skipif(not os.path.isdir(NLTK_DATA),
                                reason=f"NLTK data (punkt_tab) not at {NLTK_DATA}")
IDS = ("keywords:existence", "keywords:frequency", "keywords:forbidden_words",
       "keywords:letter_frequency", "language:response_language",
       "length_constraints:number_sentences", "length_constraints:number_paragraphs",
       "length_constraints:number_words", "length_constraints:nth_paragraph_first_word",
       "detectable_content:number_placeholders", "detectable_content:postscript",
       "detectable_format:number_bullet_lists", "detectable_format:constrained_response",
       "detectable_format:number_highlighted_sections", "detectable_format:multiple_sections",
       "detectable_format:json_format", "detectable_format:title",
       "combination:two_responses", "combination:repeat_prompt", "startend:end_checker",
       "change_case:capital_word_frequency", "change_case:english_capital",
       "change_case:english_lowercase", "punctuation:no_comma", "startend:quotation")
NLTK_IDS = ("length_constraints:number_sentences", "change_case:capital_word_frequency")

AT_LEAST, LESS = "at least", "less than"
FR = "Bonjour mes amis, comment allez-vous aujourd'hui? Je suis très content de vous voir."
EN = "I think hamburgers are sandwiches because they have bread on both sides."
END = "Is there anything else I can help with?"
REPEAT = "Write a poem about the sea."

# (id, kwargs, response, expected, note: the official behaviour pinned)
CASES = [
    # keywords:existence: re.search(keyword, response, IGNORECASE) for each keyword
    ("keywords:existence", {"keywords": ["cat", "dog"]}, "The Cat and the DOG.", True,
     "case-insensitive"),
    ("keywords:existence", {"keywords": ["cat", "bird"]}, "cat and dog", False,
     "every keyword needed"),
    ("keywords:existence", {"keywords": ["cat"]}, "Concatenate it", True,
     "substring match, no word boundary"),
    ("keywords:existence", {"keywords": ["colou?r"]}, "The color red", True,
     "keyword is an unescaped regex"),
    ("keywords:existence", {"keywords": ["(unclosed"]}, "(unclosed", False,
     "bad regex raises re.error: crash counts as not followed"),
    ("keywords:existence", {}, "anything", False, "no keywords: random draw"),
    ("keywords:existence", {"keywords": []}, "anything", False, "empty list: random draw"),
    ("keywords:existence", {"keywords": ["café"]}, "CAFÉ au lait", True,
     "unicode case folding of re.IGNORECASE"),
    # keywords:frequency: len(re.findall(keyword.strip(), response, IGNORECASE))
    ("keywords:frequency", {"keyword": "war", "frequency": 2, "relation": AT_LEAST},
     "War is war.", True, "case-insensitive count"),
    ("keywords:frequency", {"keyword": "war", "frequency": 3, "relation": AT_LEAST},
     "war, software, Warning", True, "substring count: software and Warning count"),
    ("keywords:frequency", {"keyword": "war", "frequency": 2, "relation": LESS},
     "war and war", False, "less than is strict"),
    ("keywords:frequency", {"keyword": "war", "frequency": 0, "relation": AT_LEAST},
     "peace", True, "frequency 0 is kept (only None or < 0 is redrawn)"),
    ("keywords:frequency", {"keyword": " war ", "frequency": 1.0, "relation": AT_LEAST},
     "war", True, "keyword stripped; float count works"),
    ("keywords:frequency", {"keyword": "a.c", "frequency": 1, "relation": AT_LEAST},
     "abc", True, "keyword is an unescaped regex"),
    ("keywords:frequency", {"keyword": "war", "frequency": 1}, "war", False,
     "no relation: random draw"),
    ("keywords:frequency", {"keyword": "war", "frequency": 1, "relation": "at most"}, "x",
     False, "unknown relation raises ValueError"),
    ("keywords:frequency", {"keyword": "war", "frequency": -1, "relation": LESS}, "x", False,
     "negative frequency: random draw"),
    # keywords:forbidden_words: re.search(r"\b" + word + r"\b", response, IGNORECASE)
    ("keywords:forbidden_words", {"forbidden_words": ["rock"]}, "I like rocks", True,
     "whole words only: rocks is not rock"),
    ("keywords:forbidden_words", {"forbidden_words": ["rock"]}, "ROCK on", False,
     "case-insensitive"),
    ("keywords:forbidden_words", {"forbidden_words": ["rock", "roll"]}, "rolling roll", False,
     "any word found fails"),
    ("keywords:forbidden_words", {"forbidden_words": ["rock"]}, "the rock's edge", False,
     "apostrophe is a word boundary"),
    ("keywords:forbidden_words", {"forbidden_words": ["new york"]}, "I love New York!",
     False, "multi-word phrase"),
    ("keywords:forbidden_words", {"forbidden_words": ["a.b"]}, "axb", False,
     "word is an unescaped regex: . matches x"),
    ("keywords:forbidden_words", {"forbidden_words": ["naïve"]}, "so NAÏVE", False,
     "unicode word, case-insensitive"),
    ("keywords:forbidden_words", {"forbidden_words": []}, "anything", False,
     "empty list: random draw"),
    # keywords:letter_frequency: Counter(response.lower())[letter.lower()]
    ("keywords:letter_frequency", {"letter": "t", "let_frequency": 2, "let_relation": LESS},
     "at most once", False, "t appears 2 times, less than 2 fails"),
    ("keywords:letter_frequency", {"letter": "o", "let_frequency": 6,
                                   "let_relation": AT_LEAST}, "oOoOoO", True,
     "case-insensitive count"),
    ("keywords:letter_frequency", {"letter": "A", "let_frequency": 2,
                                   "let_relation": AT_LEAST}, "a A", True, "letter lowered"),
    ("keywords:letter_frequency", {"letter": "#", "let_frequency": 4,
                                   "let_relation": AT_LEAST}, "#a #b #c #d", True,
     "any character, not only letters"),
    ("keywords:letter_frequency", {"letter": "ab", "let_frequency": 1,
                                   "let_relation": AT_LEAST}, "ab", False,
     "more than one character: random letter"),
    ("keywords:letter_frequency", {"let_frequency": 1, "let_relation": AT_LEAST}, "a", False,
     "no letter: random letter"),
    ("keywords:letter_frequency", {"letter": "a", "let_relation": AT_LEAST}, "a", False,
     "no frequency: random draw"),
    ("keywords:letter_frequency", {"letter": "a", "let_frequency": 1,
                                   "let_relation": "more than"}, "a", False,
     "unknown relation raises ValueError"),
    ("keywords:letter_frequency", {"letter": " ", "let_frequency": 1,
                                   "let_relation": AT_LEAST}, "a b c", False,
     "letter ' ' is stripped to '' and counts 0"),
    # language:response_language: langdetect.detect(response) == language
    ("language:response_language", {"language": "fr"}, FR, True, "French detected"),
    ("language:response_language", {"language": "fr"}, EN, False, "English is not French"),
    ("language:response_language", {"language": "de"},
     "Ich glaube, dass Hamburger keine Sandwiches sind, weil sie anders gegessen werden.",
     True, "German detected"),
    ("language:response_language", {"language": "kn"},
     "ಹ್ಯಾಂಬರ್ಗರ್‌ಗಳು ಸ್ಯಾಂಡ್‌ವಿಚ್‌ಗಳೇ? ಇಲ್ಲ, ಅವು ವಿಭಿನ್ನ ಆಹಾರಗಳು.", True,
     "Kannada detected"),
    ("language:response_language", {"language": "fr"}, "12345 !!! 678", True,
     "LangDetectException (no letters) counts as followed"),
    ("language:response_language", {"language": "zh"}, "我认为汉堡是三明治。", False,
     "code outside LANGUAGE_CODES: KeyError in build_description"),
    ("language:response_language", {}, FR, False, "no language: random draw"),
    ("language:response_language", {"language": "en"}, EN, True, "English detected"),
    # length_constraints:number_sentences: len(punkt sentences) (see NLTK_CASES)
    # length_constraints:number_paragraphs: re.split(r"\s?\*\*\*\s?")
    ("length_constraints:number_paragraphs", {"num_paragraphs": 3}, "A\n***\nB\n***\nC",
     True, "*** separates"),
    ("length_constraints:number_paragraphs", {"num_paragraphs": 3}, "A\n\nB\n\nC", False,
     "blank lines do not separate: 1 paragraph"),
    ("length_constraints:number_paragraphs", {"num_paragraphs": 2}, "***\nA\n***\nB\n***",
     True, "blank first and last pieces are dropped"),
    ("length_constraints:number_paragraphs", {"num_paragraphs": 2}, "A\n***\n\n***\nB",
     False, "blank middle piece fails"),
    ("length_constraints:number_paragraphs", {"num_paragraphs": 3}, "***bold*** text\n***\nB",
     True, "***bold*** splits too: 3 paragraphs"),
    ("length_constraints:number_paragraphs", {"num_paragraphs": 1}, "A **bold** B", True,
     "** does not split"),
    ("length_constraints:number_paragraphs", {"num_paragraphs": 2}, "A\n****\nB", True,
     "**** splits, leaving a '*' in the second piece"),
    ("length_constraints:number_paragraphs", {}, "A", False, "no count: random draw"),
    # length_constraints:number_words: runs of \w
    ("length_constraints:number_words", {"num_words": 3, "relation": AT_LEAST}, "don't stop",
     True, "don't is 2 words"),
    ("length_constraints:number_words", {"num_words": 4, "relation": LESS},
     "state-of-the-art", False, "hyphenated word is 4 words"),
    ("length_constraints:number_words", {"num_words": 5, "relation": LESS},
     "one two three four", True, "4 < 5"),
    ("length_constraints:number_words", {"num_words": 2, "relation": AT_LEAST},
     "日本語 テキスト", True, "unicode \\w runs"),
    ("length_constraints:number_words", {"num_words": 2, "relation": AT_LEAST},
     "snake_case_name", False, "underscore is a word character: 1 word"),
    ("length_constraints:number_words", {"num_words": 3.0, "relation": AT_LEAST}, "a b c",
     True, "float count works"),
    ("length_constraints:number_words", {"num_words": 3}, "a b c", False,
     "no relation: random draw"),
    ("length_constraints:number_words", {"num_words": 1, "relation": LESS}, "... !!!", True,
     "punctuation only: 0 words"),
    # length_constraints:nth_paragraph_first_word: split on "\n\n"
    ("length_constraints:nth_paragraph_first_word",
     {"num_paragraphs": 2, "nth_paragraph": 1, "first_word": "hello"},
     "Hello world.\n\nSecond one.", True, "first word, case-insensitive"),
    ("length_constraints:nth_paragraph_first_word",
     {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "second"},
     "Hello world.\n\nThird one.", False, "wrong first word"),
    ("length_constraints:nth_paragraph_first_word",
     {"num_paragraphs": 3, "nth_paragraph": 1, "first_word": "hello"},
     "Hello world.\n\nSecond one.", False, "paragraph count must be exact"),
    ("length_constraints:nth_paragraph_first_word",
     {"num_paragraphs": 2, "nth_paragraph": 1, "first_word": "Hello"},
     '"Hello," she said.\n\nNext.', True, "leading quote dropped, cut at comma"),
    ("length_constraints:nth_paragraph_first_word",
     {"num_paragraphs": 2, "nth_paragraph": 1, "first_word": "hello"},
     "**Hello** world\n\nNext.", False, "markdown stays: first word is **hello**"),
    ("length_constraints:nth_paragraph_first_word",
     {"num_paragraphs": 2, "nth_paragraph": 1, "first_word": "don"},
     "Don't go.\n\nNext.", True, "cut at the apostrophe: don"),
    ("length_constraints:nth_paragraph_first_word",
     {"num_paragraphs": 3, "nth_paragraph": 2, "first_word": "b"},
     "A\n\n\n\nB\n\nC", False, "nth piece indexed with blank pieces kept: piece 2 is blank"),
    ("length_constraints:nth_paragraph_first_word",
     {"num_paragraphs": 2, "nth_paragraph": 1, "first_word": "a"},
     "\n\nA\n\nB", False, "leading blank piece is piece 1"),
    ("length_constraints:nth_paragraph_first_word",
     {"num_paragraphs": 2, "nth_paragraph": 3, "first_word": "a"},
     "A\n\nB", False, "nth > num_paragraphs: random draw"),
    ("length_constraints:nth_paragraph_first_word",
     {"num_paragraphs": 2.0, "nth_paragraph": 2.0, "first_word": "b"},
     "A\n\nB", True, "integral floats read as ints"),
    # detectable_content:number_placeholders: re.findall(r"\[.*?\]")
    ("detectable_content:number_placeholders", {"num_placeholders": 2},
     "[name] at [address]", True, "two placeholders"),
    ("detectable_content:number_placeholders", {"num_placeholders": 2}, "[name] only",
     False, "one placeholder"),
    ("detectable_content:number_placeholders", {"num_placeholders": 2}, "[] []", True,
     "empty brackets count"),
    ("detectable_content:number_placeholders", {"num_placeholders": 1}, "[a\nb]", False,
     "not across a newline"),
    ("detectable_content:number_placeholders", {"num_placeholders": 1},
     "see [the docs](http://x.y)", True, "markdown link counts"),
    ("detectable_content:number_placeholders", {"num_placeholders": 2}, "[[a]]", False,
     "nested brackets count once"),
    ("detectable_content:number_placeholders", {"num_placeholders": 0}, "none", True,
     "0 required"),
    ("detectable_content:number_placeholders", {}, "[a]", False, "no count: random draw"),
    # detectable_content:postscript
    ("detectable_content:postscript", {"postscript_marker": "P.S."}, "Body.\n\nP.S. Bye",
     True, "P.S. line"),
    ("detectable_content:postscript", {"postscript_marker": "P.S."}, "Body.\n\nPS Bye",
     False, "dots needed"),
    ("detectable_content:postscript", {"postscript_marker": "P.S."}, "body\np. s. bye", True,
     "case-insensitive, one optional space"),
    ("detectable_content:postscript", {"postscript_marker": "P.S."},
     "Thanks (p.s. call me) and more text after", True, "anywhere, not only at the end"),
    ("detectable_content:postscript", {"postscript_marker": "P.S."}, "P.P.S. x", True,
     "P.P.S. contains p.s."),
    ("detectable_content:postscript", {"postscript_marker": "P.P.S"}, "Body\nP. P. S hi",
     True, "P.P.S with optional spaces"),
    ("detectable_content:postscript", {"postscript_marker": "P.S"}, "You pass the test",
     True, "other marker is an unescaped regex: p.s matches 'pass'"),
    ("detectable_content:postscript", {"postscript_marker": " Note: "}, "NOTE: hi", True,
     "other marker stripped, lowered"),
    ("detectable_content:postscript", {}, "P.S. hi", False, "no marker: random draw"),
    # detectable_format:number_bullet_lists
    ("detectable_format:number_bullet_lists", {"num_bullets": 3}, "* a\n* b\n* c", True,
     "* bullets"),
    ("detectable_format:number_bullet_lists", {"num_bullets": 3}, "- a\n- b", False,
     "exactly num_bullets"),
    ("detectable_format:number_bullet_lists", {"num_bullets": 2}, "  * a\n  - b", True,
     "indented * and - bullets"),
    ("detectable_format:number_bullet_lists", {"num_bullets": 2}, "* a\n---\n* b", False,
     "a --- rule counts as a bullet"),
    ("detectable_format:number_bullet_lists", {"num_bullets": 1}, "**Bold** line\n* a", True,
     "**bold** line is no bullet"),
    ("detectable_format:number_bullet_lists", {"num_bullets": 1}, "*italic* line", True,
     "*italic* line counts as a bullet"),
    ("detectable_format:number_bullet_lists", {"num_bullets": 0}, "1. a\n2. b\n+ c", True,
     "numbered and + items are not bullets"),
    ("detectable_format:number_bullet_lists", {"num_bullets": 2}, "• a\n• b", False,
     "unicode bullets are not bullets"),
    ("detectable_format:number_bullet_lists", {}, "* a", False, "no count: random draw"),
    # detectable_format:constrained_response: an option is a substring of the response
    ("detectable_format:constrained_response", {}, "My answer is yes.", True, "option"),
    ("detectable_format:constrained_response", {}, "my answer is yes.", False,
     "case-sensitive"),
    ("detectable_format:constrained_response", {}, "I'd say: My answer is no. Because.",
     True, "option anywhere"),
    ("detectable_format:constrained_response", {}, "My answer is yes", False,
     "the full stop is part of the option"),
    ("detectable_format:constrained_response", {}, "My answer is maybe.", True, "maybe"),
    ("detectable_format:constrained_response", {}, "Yes.", False, "bare yes"),
    ("detectable_format:constrained_response", {}, "My answer is yes.\n\nMore text.", True,
     "text after the option is fine"),
    ("detectable_format:constrained_response", {"options": "x"}, "My answer is yes.", False,
     "unknown argument: TypeError in build_description"),
    # detectable_format:number_highlighted_sections
    ("detectable_format:number_highlighted_sections", {"num_highlights": 2},
     "*a* and *b*", True, "two *x* spans"),
    ("detectable_format:number_highlighted_sections", {"num_highlights": 1}, "**x**", True,
     "**x** counts once"),
    ("detectable_format:number_highlighted_sections", {"num_highlights": 2}, "**x**", False,
     "**x** does not count twice"),
    ("detectable_format:number_highlighted_sections", {"num_highlights": 2}, "*a*b*", False,
     "*a*b* is one span"),
    ("detectable_format:number_highlighted_sections", {"num_highlights": 1}, "* *", False,
     "blank span"),
    ("detectable_format:number_highlighted_sections", {"num_highlights": 1}, "*a\nb*", False,
     "not across a newline"),
    ("detectable_format:number_highlighted_sections", {"num_highlights": 2},
     "**bold** and *it*", True, "single and double spans both count"),
    ("detectable_format:number_highlighted_sections", {"num_highlights": 2}, "***x***", True,
     "***x*** counts as *x* and **x**"),
    ("detectable_format:number_highlighted_sections", {}, "*a*", False,
     "no count: random draw"),
    # detectable_format:multiple_sections: re.split(r"\s?" + spliter + r"\s?\d+\s?")
    ("detectable_format:multiple_sections", {"section_spliter": "Section", "num_sections": 2},
     "Section 1\nA\nSection 2\nB", True, "two sections"),
    ("detectable_format:multiple_sections", {"section_spliter": "Section", "num_sections": 3},
     "Section 1\nA\nSection 2\nB", False, "too few"),
    ("detectable_format:multiple_sections", {"section_spliter": "Section", "num_sections": 2},
     "SECTION 1\nA\nSECTION 2\nB", False, "case-sensitive splitter"),
    ("detectable_format:multiple_sections", {"section_spliter": "Section", "num_sections": 2},
     "Section 1 A Section 2 B Section 3 C", True, "at least, not exactly"),
    ("detectable_format:multiple_sections", {"section_spliter": "Section", "num_sections": 1},
     "As said in Section 2 above.", True, "a mention with a number starts a section"),
    ("detectable_format:multiple_sections", {"section_spliter": "Section", "num_sections": 1},
     "Section one\nA", False, "number must be digits"),
    ("detectable_format:multiple_sections",
     {"section_spliter": " PARAGRAPH ", "num_sections": 2},
     "PARAGRAPH 1\nA\n\nPARAGRAPH 2\nB", True, "splitter stripped; any word"),
    ("detectable_format:multiple_sections", {"num_sections": 1}, "Section 1", False,
     "no splitter: random draw"),
    # detectable_format:json_format
    ("detectable_format:json_format", {}, '{"a": 1}', True, "JSON object"),
    ("detectable_format:json_format", {}, '```json\n{"a": 1}\n```', True, "```json fence"),
    ("detectable_format:json_format", {}, "```JSON\n[1, 2]\n```", True, "```JSON fence"),
    ("detectable_format:json_format", {}, 'Here: {"a": 1}', False, "text around"),
    ("detectable_format:json_format", {}, "42", True, "any JSON value passes"),
    ("detectable_format:json_format", {}, "NaN", True, "Python json accepts NaN"),
    ("detectable_format:json_format", {}, "```python\n{}\n```", False,
     "only ``` removed: 'python' stays"),
    ("detectable_format:json_format", {}, "{'a': 1}", False, "single quotes"),
    ("detectable_format:json_format", {}, "[" * 100000 + "]" * 100000, False,
     "RecursionError (official crash) counts as not followed"),
    # detectable_format:title: re.findall(r"<<[^\n]+>>") with non-blank inside
    ("detectable_format:title", {}, "<<Title>>\nbody", True, "title"),
    ("detectable_format:title", {}, "<<  >>\nbody", False, "blank title"),
    ("detectable_format:title", {}, "<<a\nb>>", False, "not across a newline"),
    ("detectable_format:title", {}, "<<<x>>>", True, "extra brackets stripped"),
    ("detectable_format:title", {}, "text <<T>> mid", True, "anywhere"),
    ("detectable_format:title", {}, "<<>>", False, "empty"),
    ("detectable_format:title", {}, "no title", False, "none"),
    ("detectable_format:title", {"title": "x"}, "<<x>>", False,
     "unknown argument: TypeError"),
    # combination:two_responses: split on "******"
    ("combination:two_responses", {}, "A\n******\nB", True, "two different"),
    ("combination:two_responses", {}, "A\n******\nA", False, "same after strip"),
    ("combination:two_responses", {}, "A ****** B ****** C", False, "three"),
    ("combination:two_responses", {}, "******\nA\n******\nB\n******", True,
     "blank first/last pieces allowed"),
    ("combination:two_responses", {}, "A\n*******\nB", True,
     "7 asterisks split too (second piece '*\\nB')"),
    ("combination:two_responses", {}, "A************B", False, "blank middle piece"),
    ("combination:two_responses", {}, "A only", False, "one"),
    ("combination:two_responses", {}, "A \n******\n A", False, "differ only in spaces"),
    # combination:repeat_prompt: stripped, lowered prefix
    ("combination:repeat_prompt", {"prompt_to_repeat": REPEAT}, REPEAT + "\nThe sea...",
     True, "prefix"),
    ("combination:repeat_prompt", {"prompt_to_repeat": REPEAT}, "Sure! " + REPEAT, False,
     "words before"),
    ("combination:repeat_prompt", {"prompt_to_repeat": REPEAT}, "\n  " + REPEAT, True,
     "leading whitespace stripped"),
    ("combination:repeat_prompt", {"prompt_to_repeat": REPEAT}, REPEAT.upper(), True,
     "case-insensitive"),
    ("combination:repeat_prompt", {"prompt_to_repeat": REPEAT + "  \n"}, REPEAT + "x", True,
     "prompt_to_repeat stripped; what follows is not looked at"),
    ("combination:repeat_prompt", {"prompt_to_repeat": REPEAT}, "Write a poem.", False,
     "partial repeat"),
    ("combination:repeat_prompt", {}, REPEAT, False, "no prompt_to_repeat: ValueError"),
    ("combination:repeat_prompt", {"prompt_to_repeat": ""}, REPEAT, False,
     "empty prompt_to_repeat: ValueError"),
    # startend:end_checker
    ("startend:end_checker", {"end_phrase": END}, "Text. " + END, True, "ends with phrase"),
    ("startend:end_checker", {"end_phrase": END}, END + " Bye.", False, "text after"),
    ("startend:end_checker", {"end_phrase": END}, '"Text. ' + END + '"', True,
     "quotes stripped from the response"),
    ("startend:end_checker", {"end_phrase": END}, "text. " + END.upper() + "\n ", True,
     "case-insensitive, trailing whitespace stripped"),
    ("startend:end_checker", {"end_phrase": 'say "hi"'}, 'I say "hi"', False,
     "phrase ending in a quote can never match"),
    ("startend:end_checker", {"end_phrase": END}, END + ".", False, "trailing full stop"),
    ("startend:end_checker", {"end_phrase": "  Any other questions?  "},
     "Done. Any other questions?", True, "phrase stripped"),
    ("startend:end_checker", {}, END, False, "no phrase: random draw"),
    # startend:quotation
    ("startend:quotation", {}, '"hello"', True, "wrapped"),
    ("startend:quotation", {}, "hello", False, "not wrapped"),
    ("startend:quotation", {}, '  "hi"\n', True, "stripped first"),
    ("startend:quotation", {}, '""', True, "two quotes alone pass"),
    ("startend:quotation", {}, '"', False, "one character"),
    ("startend:quotation", {}, "“hello”", False, "curly quotes fail"),
    ("startend:quotation", {}, '"a" b', False, "must end with the quote"),
    ("startend:quotation", {}, "'hello'", False, "single quotes fail"),
    # punctuation:no_comma
    ("punctuation:no_comma", {}, "no commas here", True, "none"),
    ("punctuation:no_comma", {}, "a, b", False, "comma"),
    ("punctuation:no_comma", {}, "1,000", False, "digit grouping comma"),
    ("punctuation:no_comma", {}, "a，b", True, "fullwidth comma passes"),
    ("punctuation:no_comma", {}, "a، b", True, "Arabic comma passes"),
    ("punctuation:no_comma", {}, "a‚b", True, "low-9 quotation mark passes"),
    ("punctuation:no_comma", {}, "", True, "checker alone: nothing to find"),
    ("punctuation:no_comma", {"x": 1}, "a", False, "unknown argument: TypeError"),
    # change_case:english_capital: isupper() and langdetect == "en"
    ("change_case:english_capital", {}, "HELLO THERE, HOW ARE YOU DOING TODAY MY FRIEND?",
     True, "upper English"),
    ("change_case:english_capital", {}, "HELLO there, how are you doing today?", False,
     "lower-case letters"),
    ("change_case:english_capital", {}, FR.upper(), False, "upper French"),
    ("change_case:english_capital", {}, "THE YEAR 2024 WAS GREAT, WASN'T IT? WE ALL THINK SO.",
     True, "digits and punctuation ignored by isupper"),
    ("change_case:english_capital", {}, "HELLO WORLD\n\nTHIS IS A TEST OF THE SYSTEM.", True,
     "multi-line"),
    ("change_case:english_capital", {}, "123 !!!", False, "no cased letter: isupper False"),
    ("change_case:english_capital", {}, EN, False, "mixed case"),
    ("change_case:english_capital", {"x": 1}, "HELLO THERE FRIEND", False,
     "unknown argument: TypeError"),
    # change_case:english_lowercase: islower() and langdetect == "en"
    ("change_case:english_lowercase", {}, "what are the two young boys holding?", True,
     "lower English"),
    ("change_case:english_lowercase", {}, "what are they holding? [Your Name]", False,
     "one capital fails"),
    ("change_case:english_lowercase", {}, FR.lower(), False, "lower French"),
    ("change_case:english_lowercase", {}, "123 !!!", False, "no cased letter: islower False"),
    ("change_case:english_lowercase", {}, "i think it is a good day to go outside and play.",
     True, "lower i"),
    ("change_case:english_lowercase", {}, "hello World, how are you doing today?", False,
     "capital W"),
    ("change_case:english_lowercase", {}, "dear team,\n\nthe meeting moved to 3 pm.\n\nbest",
     True, "multi-line"),
    ("change_case:english_lowercase", {"x": 1}, "hello there friend", False,
     "unknown argument: TypeError"),
]

# Ids that need NLTK's Punkt data (sentences, word_tokenize).
NLTK_CASES = [
    ("length_constraints:number_sentences", {"num_sentences": 3, "relation": AT_LEAST},
     "Hi there. How are you? Fine.", True, "three Punkt sentences"),
    ("length_constraints:number_sentences", {"num_sentences": 3, "relation": LESS},
     "Hi there. How are you? Fine.", False, "less than is strict"),
    ("length_constraints:number_sentences", {"num_sentences": 3, "relation": LESS},
     "Dr. Smith went home. He slept.", True, "Punkt knows Dr.: 2 sentences"),
    ("length_constraints:number_sentences", {"num_sentences": 2, "relation": AT_LEAST},
     "- a\n- b\n- c", False, "a list without full stops is one sentence"),
    ("length_constraints:number_sentences", {"num_sentences": 2.0, "relation": AT_LEAST},
     "One. Two.", True, "float count works"),
    ("length_constraints:number_sentences", {"relation": AT_LEAST}, "One.", False,
     "no count: random draw"),
    ("length_constraints:number_sentences", {"num_sentences": -1, "relation": AT_LEAST},
     "One.", False, "negative count: random draw"),
    ("length_constraints:number_sentences", {"num_sentences": 1, "relation": "at most"},
     "One.", False, "unknown relation raises ValueError"),
    ("change_case:capital_word_frequency", {"capital_frequency": 4,
                                            "capital_relation": AT_LEAST},
     "I saw NASA's U.S. COVID-19 plan", True, "I, NASA, U.S., COVID-19 are upper tokens"),
    ("change_case:capital_word_frequency", {"capital_frequency": 4,
                                            "capital_relation": LESS},
     "I saw NASA's U.S. COVID-19 plan", False, "4 is not less than 4"),
    ("change_case:capital_word_frequency", {"capital_frequency": 1,
                                            "capital_relation": AT_LEAST}, "hello world",
     False, "none"),
    ("change_case:capital_word_frequency", {"capital_frequency": 10,
                                            "capital_relation": LESS}, "A B C", True,
     "3 < 10"),
    ("change_case:capital_word_frequency", {"capital_frequency": 2,
                                            "capital_relation": AT_LEAST}, "DON'T", True,
     "word_tokenize splits DON'T into DO + N'T"),
    ("change_case:capital_word_frequency", {"capital_frequency": 2,
                                            "capital_relation": AT_LEAST},
     "STATE-OF-THE-ART", False, "hyphenated word is one token"),
    ("change_case:capital_word_frequency", {"capital_frequency": -1,
                                            "capital_relation": AT_LEAST}, "none here", True,
     "negative frequency is kept (only None is redrawn)"),
    ("change_case:capital_word_frequency", {"capital_relation": AT_LEAST}, "A", False,
     "no frequency: random draw"),
    ("change_case:capital_word_frequency", {"capital_frequency": 1}, "A", False,
     "no relation: random draw"),
]


def _params(cases) -> list:
  return [pytest.param(*c, id=f"{c[0].split(':')[1]}-{c[4]}") for c in cases]


@pytest.mark.parametrize("iid,kwargs,response,expected,note", _params(CASES))
def test_checker_matches_official_verdict(iid, kwargs, response, expected, note):
  assert official_ifeval.CHECKERS[iid](response, kwargs, "Some prompt.") is expected, note


@needs_nltk
@pytest.mark.parametrize("iid,kwargs,response,expected,note", _params(NLTK_CASES))
def test_nltk_checker_matches_official_verdict(iid, kwargs, response, expected, note):
  assert official_ifeval.CHECKERS[iid](response, kwargs, "Some prompt.") is expected, note


def test_every_classic_id_has_a_checker_and_at_least_8_cases():
  assert set(official_ifeval.CHECKERS) == set(IDS)
  counts = {iid: 0 for iid in IDS}
  for case in CASES + NLTK_CASES:
    counts[case[0]] += 1
  assert {iid: n for iid, n in counts.items() if n < 8} == {}


@pytest.mark.parametrize("iid", [i for i in IDS if i not in NLTK_IDS])
@pytest.mark.parametrize("response", ["", " ", "\x00\u202e😀" * 3, "*" * 10000,
                                      "Section 1 " * 2000, "[" * 5000, "<<" * 5000])
def test_checkers_never_raise_on_odd_responses(iid, response):
  # Official crashes (bad regex, missing args, deep JSON) come back as False, never raise.
  for kwargs in ({}, {"num_bullets": "x"}, {"keywords": ["("], "prompt_to_repeat": None}):
    assert official_ifeval.CHECKERS[iid](response, kwargs, "") in (True, False)


def test_prompt_is_not_what_repeat_prompt_compares_with():
  # IFEval re-builds with prompt=... only when the args hold a "prompt" key; repeat_prompt's
  # key is prompt_to_repeat, so the row's prompt never replaces it.
  check = official_ifeval.CHECKERS["combination:repeat_prompt"]
  assert check("Tell me a joke. Ok.", {"prompt_to_repeat": "Write a poem."},
               "Tell me a joke.") is False


def test_language_detection_is_repeatable():
  # Seeded private factory: the same borderline text gets the same verdict every call.
  check = official_ifeval.CHECKERS["language:response_language"]
  text = "Ok ciao merci danke"
  assert len({check(text, {"language": "it"}, "") for _ in range(5)}) == 1


def _row(key, ids, kwargs, response, prompt="Write something."):
  return {"key": key, "prompt": prompt, "instruction_id_list": ids, "kwargs": kwargs,
          "response": response}


@needs_nltk
def test_end_to_end_rows_through_the_registry():
  """IFEval-format rows (HF-style null kwargs included) through verify_row, both modes."""
  rows = [
      # comma only on the first line: loose drops it
      (_row(1000, ["punctuation:no_comma", "detectable_format:number_highlighted_sections",
                   "length_constraints:number_words"],
            [{}, {"num_highlights": 2, "num_words": None},
             {"relation": "at least", "num_words": 5.0}],
            "Intro, with a comma\n*One* and *two* highlighted sections here today"),
       [False, True, True], [True, True, True]),
      # repeat_prompt compares with prompt_to_repeat; title anywhere
      (_row(1012, ["combination:repeat_prompt", "detectable_format:title"],
            [{"prompt_to_repeat": REPEAT}, {}],
            REPEAT + "\n<<Waves>>\nThe sea is wide.",
            prompt=REPEAT + "\nFirst repeat the request word for word without change, ..."),
       [True, True], [True, True]),
      # trailing sign-off: loose drops the last line so the end phrase is last
      (_row(1128, ["startend:end_checker", "detectable_format:number_bullet_lists",
                   "length_constraints:number_sentences"],
            [{"end_phrase": "Any other questions?"}, {"num_bullets": 2},
             {"relation": "less than", "num_sentences": 10}],
            "* one\n* two\nAny other questions?\nThanks!"),
       [False, True, True], [True, True, True]),
      # blank response fails everything
      (_row(1130, ["keywords:letter_frequency"],
            [{"let_relation": "less than", "letter": "t", "let_frequency": 2}], "  \n "),
       [False], [False]),
  ]
  for r, strict, loose in rows:
    for is_loose, want in ((False, strict), (True, loose)):
      out = registry.verify_row(r, "official", is_loose)
      assert out["follow_instruction_list"] == want, (r["key"], is_loose)
      assert out["follow_all_instructions"] is all(want)
      assert out["key"] == r["key"]
