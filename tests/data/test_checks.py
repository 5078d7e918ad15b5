"""Tests for the verifiable checks: every kind on positive and negative responses, argument
validation messages, and the text units the checks count."""

import pytest

from harnessrl_jax.data import checks
from harnessrl_jax.data import text_units as tu
from harnessrl_jax.data.frozen import FrozenMap
from harnessrl_jax.data.schema import Check
from harnessrl_jax.errors import HarnessError

PROMPT = "Describe the moon in two sentences."

# (type, args, response, expected); the prompt is PROMPT unless the args say otherwise.
CASES = [
    # keyword_present
    ("keyword_present", {"keywords": ["moon", "tide"]}, "The Moon drives the tide.", True),
    ("keyword_present", {"keywords": ["moon", "tide"]}, "The moon is bright.", False),
    ("keyword_present", {"keywords": ["moon", "tide"], "mode": "any"}, "The moon.", True),
    ("keyword_present", {"keywords": ["moon"], "mode": "any"}, "Honeymoon plans.", False),
    ("keyword_present", {"keywords": ["Moon"], "case_sensitive": True}, "the moon", False),
    ("keyword_present", {"keywords": ["C++"]}, "I write C++ daily.", True),
    # keyword_count
    ("keyword_count", {"keyword": "cat", "min": 2}, "Cat, cat and concatenate.", True),
    ("keyword_count", {"keyword": "cat", "min": 3}, "Cat, cat and concatenate.", False),
    ("keyword_count", {"keyword": "cat", "max": 1}, "cat cat", False),
    # forbidden_words
    ("forbidden_words", {"words": ["very", "really"]}, "It is everything.", True),
    ("forbidden_words", {"words": ["very", "really"]}, "It is Really good.", False),
    # word_count ("don't" and "well-known" are one word each: 5 words)
    ("word_count", {"min": 5, "max": 5}, "Don't be a well-known fool.", True),
    ("word_count", {"min": 6}, "Don't be a well-known fool.", False),
    # sentence_count
    ("sentence_count", {"min": 3, "max": 3}, "One. Two! Three?", True),
    ("sentence_count", {"max": 2}, "One. Two! Three?", False),
    # paragraph_count
    ("paragraph_count", {"min": 2, "max": 2}, "First line\nstill first.\n\n  \nSecond.", True),
    ("paragraph_count", {"min": 2}, "Only one\nparagraph here.", False),
    # char_count
    ("char_count", {"max": 5}, "  hello \n", True),
    ("char_count", {"max": 4}, "hello", False),
    # bullet_list
    ("bullet_list", {"min": 3}, "Intro\n- a\n  * b\n- c", True),
    ("bullet_list", {"min": 3}, "- a\n-b\n* c\n**bold**", False),
    # numbered_list
    ("numbered_list", {"min": 2, "max": 2}, "1. first\n2) second\nnot 3. third", True),
    ("numbered_list", {"min": 2}, "1.first\n2. second", False),
    # markdown_headings
    ("markdown_headings", {"min": 2}, "# Title\ntext\n## Sub\n", True),
    ("markdown_headings", {"min": 1}, "#hashtag\ntext #notheading", False),
    # sections
    ("sections", {"marker": "Section", "min": 2}, "## SECTION 1\na\n**Section 2**\nb", True),
    ("sections", {"marker": "Section", "min": 2}, "Section 1\nsee Section 2 below", False),
    ("sections", {"marker": "Section", "min": 2, "max": 2}, "Section 1\na\nSection 2\nb", True),
    ("sections", {"marker": "Section", "min": 1, "max": 1}, "Section 1\na\nSection 2\nb",
     False),
    # highlighted_sections
    ("highlighted_sections", {"min": 2}, "An *italic* and a **bold** part.", True),
    ("highlighted_sections", {"min": 1}, "* not a highlight\n* list item *", False),
    # json_format
    ("json_format", {}, '```json\n{"a": [1, 2]}\n```', True),
    ("json_format", {}, '  {"a": 1}  ', True),
    ("json_format", {}, 'Here: {"a": 1}', False),
    # starts_with / ends_with / first_word
    ("starts_with", {"prefix": "dear"}, "  Dear Sir,", True),
    ("starts_with", {"prefix": "dear", "case_sensitive": True}, "Dear Sir,", False),
    ("ends_with", {"suffix": "Any other questions?"}, "Done. any other questions?\n", True),
    ("ends_with", {"suffix": "Bye."}, "Bye. Really", False),
    ("first_word", {"word": "Indeed"}, "indeed, it is.", True),
    ("first_word", {"word": "Indeed"}, "Indeedly so.", False),
    # case
    ("all_lowercase", {}, "all lower, 123.", True),
    ("all_lowercase", {}, "not All lower", False),
    ("all_uppercase", {}, "ALL UPPER 1!", True),
    ("all_uppercase", {}, "ALMOST Upper", False),
    # capital_words: NASA, FBI count; "A" (one letter) and "Nasa" do not
    ("capital_words", {"min": 2, "max": 2}, "NASA and the FBI. A Nasa.", True),
    ("capital_words", {"min": 1}, "A lone I. Nasa.", False),
    # placeholders: the markdown link does not count
    ("placeholders", {"min": 2}, "Dear [name], at [address].", True),
    ("placeholders", {"min": 2}, "Dear [name], see [docs](http://x).", False),
    # quotation_wrapped
    ("quotation_wrapped", {}, ' "To be or not to be." ', True),
    ("quotation_wrapped", {}, "\u201cCurly wrapped.\u201d", True),
    ("quotation_wrapped", {}, '"Half" quoted.', False),
    # repeat_prompt (whitespace runs collapse)
    ("repeat_prompt", {}, "Describe the moon in  two\nsentences. The moon...", True),
    ("repeat_prompt", {}, "The moon is grey. Describe the moon in two sentences.", False),
    # length_ratio: PROMPT has 35 characters
    ("length_ratio", {"min": 1.0, "max": 2.0}, "x" * 70, True),
    ("length_ratio", {"min": 1.0, "max": 2.0}, "x" * 71, False),
    ("length_ratio", {"max": 0.5}, "x" * 10, True),
    # no_commas
    ("no_commas", {}, "No commas here.", True),
    ("no_commas", {}, "A fullwidth\uff0c comma.", False),
    # title
    ("title", {}, "<<Poem of Joy>>\nText", True),
    ("title", {}, "<< >> and <<broken\ntitle>>", False),
    # postscript
    ("postscript", {}, "Body.\n\np.s. remember me", True),
    ("postscript", {"marker": "P.P.S"}, "Body.\nP.S. only one", False),
    # letter_frequency: "Banana bread" has 4 a's
    ("letter_frequency", {"letter": "a", "min": 4, "max": 4}, "Banana bread", True),
    ("letter_frequency", {"letter": "A", "min": 1, "case_sensitive": True}, "banana", False),
    # two_responses
    ("two_responses", {}, "First answer.\n******\nSecond answer.", True),
    ("two_responses", {}, "Same.\n******\nSame.", False),
    ("two_responses", {}, "One ****** two ****** three", False),
    # question_count
    ("question_count", {"min": 2}, 'Why? He asked "how?" Fine.', True),
    ("question_count", {"min": 2}, "Why? Because.", False),
    # digit_count
    ("digit_count", {"min": 4, "max": 4}, "In 2024 we", True),
    ("digit_count", {"max": 2}, "Call 555", False),
    # regex_match (default min 1, MULTILINE)
    ("regex_match", {"pattern": r"^Step \d+:"}, "Intro\nStep 1: go", True),
    ("regex_match", {"pattern": r"\bfoo\b", "min": 2}, "foo food", False),
    ("regex_match", {"pattern": r"\s", "min": 0, "max": 0}, "no-space", True),
    # paragraph_count with a separator: non-blank pieces between "***" lines
    ("paragraph_count", {"separator": "***", "min": 2, "max": 2}, "A\n  ***\nB\n***\n", True),
    ("paragraph_count", {"separator": "***", "min": 2}, "A\n\nB ***bold*** C", False),
    # repeat_prompt with text: that text instead of the prompt
    ("repeat_prompt", {"text": "Write a haiku."}, "Write a  haiku.\nRain falls.", True),
    ("repeat_prompt", {"text": "Write a haiku."}, PROMPT + " Write a haiku.", False),
    # language (langdetect, seeded; unreadable text fails), optionally in one case
    ("language", {"code": "fr"},
     "Le temps est beau aujourd'hui et nous allons au parc avec nos amis ce soir.", True),
    ("language", {"code": "fr"},
     "The weather is nice today and we are going to the park with our friends.", False),
    ("language", {"code": "fr"}, "12345 !!!", False),
    ("language", {"code": "en", "case": "upper"}, "THE WEATHER IS NICE TODAY AND WE ARE "
     "GOING TO THE PARK.", True),
    ("language", {"code": "en", "case": "upper"}, "THE WEATHER IS NICE today.", False),
    ("language", {"code": "en", "case": "lower"}, "the weather is nice today, 2024.", True),
    # nth_paragraph_first_word (exactly `paragraphs` paragraphs; Markdown ignored)
    ("nth_paragraph_first_word", {"paragraphs": 2, "n": 2, "word": "rain"},
     "Clouds.\n\n**Rain**, at last.", True),
    ("nth_paragraph_first_word", {"paragraphs": 2, "n": 2, "word": "rain"},
     "Clouds.\n\nRain.\n\nSun.", False),
    ("nth_paragraph_first_word", {"paragraphs": 2, "n": 1, "word": "rain"},
     "Raining.\n\nRain.", False),
    # language_english
    ("language_english", {},
     "The weather is nice today and we are going to the park with our friends.", True),
    ("language_english", {},
     "Le temps est beau aujourd'hui et nous allons au parc avec nos amis ce soir.", False),
    ("language_english", {}, "\u4eca\u5929\u5929\u6c14\u5f88\u597d", False),
    # keyword_counts
    ("keyword_counts", {"keywords": ["sun", "moon"], "counts": [1, 2]},
     "The sun, the moon, the Moon.", True),
    ("keyword_counts", {"keywords": ["sun", "moon"], "counts": [1, 2]},
     "The sun, the sun, the moon, the Moon.", False),
    # number_count: 1,000.5 / 42 / 7 are three numbers
    ("number_count", {"min": 3, "max": 3}, "Pay 1,000.5 for 42 apples, 7 days.", True),
    ("number_count", {"min": 2, "max": 2}, "Only 3.14 here.", False),
    # pronoun_count: I, you, it, my, this = 5
    ("pronoun_count", {"min": 5}, "I told you it was my idea; this works.", True),
    ("pronoun_count", {"min": 2}, "The cat sat on the mat.", False),
    # punctuation_cover
    ("punctuation_cover", {}, "Wait, what?! Yes; here: done. Really? Wow!", True),
    ("punctuation_cover", {}, "Wait, what?! Yes; here: done.", False),
    ("punctuation_cover", {}, "Wait, what? Yes; here: done! Sure.", False),
    # unique_word_count: the/cat/sat/on/mat = 5
    ("unique_word_count", {"min": 5}, "The cat sat on the mat.", True),
    ("unique_word_count", {"min": 6}, "The cat sat on the mat.", False),
    # csv_table
    ("csv_table", {"columns": ["A", "B"], "rows": 2, "quoted_special": True},
     'A, B\n1,"x&y"\n2,z\n', True),
    ("csv_table", {"columns": ["A", "B"], "rows": 2}, "```csv\nA,B\n1,2\n3,4\n```", True),
    ("csv_table", {"columns": ["A", "B"], "rows": 2, "quoted_special": True},
     'A,B\n1,"xy"\n2,z\n', False),
    ("csv_table", {"columns": ["A", "B"], "rows": 2}, "A,B\n1,2\n3\n", False),
    ("csv_table", {"columns": ["A", "B"], "rows": 2}, "A,B\n1,2\n", False),
    # number_sequence
    ("number_sequence", {"numbers": [14, 21, 28]}, "14, 21, 28", True),
    ("number_sequence", {"numbers": [14, 21, 28]}, "Multiples of 7: 14, 21, 28", False),
    # sentence_initials
    ("sentence_initials", {"letters": "abc"}, "Ants march. \"Bees buzz!\" Cats nap?", True),
    ("sentence_initials", {"letters": "abc"}, "Ants march. Cats nap. Bees buzz.", False),
    ("sentence_initials", {"letters": "abc"}, "Ants march. Bees buzz.", False),
    # emoji_sentence_end
    ("emoji_sentence_end", {}, "I love it \U0001F600. Great job! \u2764\ufe0f Bye \U0001F44B",
     True),
    ("emoji_sentence_end", {}, "I love it \U0001F600. No emoji here.", False),
    # indent_stairs
    ("indent_stairs", {}, "a\n  b\n\n    c\n\td2", False),
    ("indent_stairs", {}, "a\n  b\n\n    c\n      d", True),
    ("indent_stairs", {}, "a\n  b\n  c", False),
    # marker_list
    ("marker_list", {"marker": "!?!?", "min": 2}, "Items:\n!?!? one\n  !?!? two", True),
    ("marker_list", {"marker": "!?!?", "min": 2}, "!?!? one !?!? two", False),
    # one_word_per_line
    ("one_word_per_line", {}, "Hello,\nworld\n\n!\nagain.", True),
    ("one_word_per_line", {}, "Hello world\nagain", False),
    # prose_then_bullets
    ("prose_then_bullets", {"min_sentences": 2, "min_bullets": 2},
     "First point. Second point.\n\n* one\n* two\n  continued\n", True),
    ("prose_then_bullets", {"min_sentences": 2, "min_bullets": 2},
     "Only one sentence.\n* one\n* two", False),
    ("prose_then_bullets", {"min_sentences": 2, "min_bullets": 2},
     "First. Second.\n* one\n* two\nTrailing prose.", False),
    # one_of
    ("one_of", {"options": ["a)", "b)", "c)", "d)"]}, " C) ", True),
    ("one_of", {"options": ["a)", "b)", "c)", "d)"]}, "c) Negation", False),
    ("one_of", {"options": ["I know", "I don't know"]}, "i don't know.", True),
    # template_labels
    ("template_labels", {"labels": ["My Answer:", "My Conclusion:"]},
     "**My Answer:** 42\nMy Conclusion: it works", True),
    ("template_labels", {"labels": ["My Answer:", "My Conclusion:"]},
     "My Conclusion: x\nMy Answer: y", False),
    ("template_labels", {"labels": ["My Answer:", "My Conclusion:"]},
     "My Answer: [answer] My Conclusion: done", False),
    ("template_labels", {"labels": ["My Answer:", "My Conclusion:"]},
     "Sure! My Answer: 1 My Conclusion: 2", False),
    # quotes_explained
    ("quotes_explained", {}, 'He said "hi" to greet. She said \u201cbye\u201d, leaving.', True),
    ("quotes_explained", {}, 'He said "hi" "there" loudly.', False),
    ("quotes_explained", {}, 'The end: "fin".', False),
    # nested_quotes
    ("nested_quotes", {"min_depth": 3}, "He said, \"She told me 'he yelled \"run\"' once.\"",
     True),
    ("nested_quotes", {"min_depth": 3}, "He said, \"She told me 'don't run' once.\"", False),
    ("nested_quotes", {"min_depth": 3}, "\"a\" 'b' \"c\"", False),
    # sub_bullets
    ("sub_bullets", {}, "* one\n  - detail\n* two\n  - more\n  - more", True),
    ("sub_bullets", {}, "* one\n  - detail\n* two\n", False),
    ("sub_bullets", {}, "- only dashes", False),
    # html_italic_thesis
    ("html_italic_thesis", {}, "# A\n<i>Thesis one.</i> Body.\n# B\n<em>Thesis two.</em>\nMore.",
     True),
    ("html_italic_thesis", {}, "# A\n<i>Thesis.</i> Body.\n# B\nNo thesis here.", False),
    ("html_italic_thesis", {}, "*Markdown italics.* Body.", False),
    # title_case
    ("title_case", {}, "The Lord of the Rings: A Tale in Three Parts", True),
    ("title_case", {}, "The lord of the Rings", False),
    ("title_case", {}, "of Mice and Men", False),
    # trigram_overlap: 2 of the response's 4 trigrams occur in the reference -> 50%
    ("trigram_overlap", {"reference": "the quick brown fox jumps", "min": 48.0, "max": 52.0},
     "The quick brown fox sleeps now", True),
    ("trigram_overlap", {"reference": "the quick brown fox jumps", "max": 10.0},
     "The quick brown fox sleeps now", False),
    # sentence_type_ratio
    ("sentence_type_ratio", {"declarative": 2, "interrogative": 1}, "Yes. No. Why? Wow!", True),
    ("sentence_type_ratio", {"declarative": 2, "interrogative": 1}, "Yes. No? Why?", False),
    ("sentence_type_ratio", {"declarative": 1, "interrogative": 1, "exclamatory": 1},
     "Yes. No? Go! Yes. No? Go!", True),
    ("sentence_type_ratio", {"declarative": 1, "interrogative": 1, "exclamatory": 1},
     "Yes. No? Go. Yes? Go!", False),
    ("sentence_type_ratio", {"declarative": 2, "interrogative": 1}, "Wow!", False),
    # same_length_sentences: each sentence has 8 characters
    ("same_length_sentences", {"count": 3}, "Cat ran. Dog ate. Owl sat.", True),
    ("same_length_sentences", {"count": 3}, "Cat ran. Dog ran. Owl sat.", False),
    ("same_length_sentences", {"count": 3}, "Cat ran. Dog ate. Owls sat.", False),
    ("same_length_sentences", {"count": 3}, "Cat ran. Dog ate.", False),
    # stop_word_ratio: "the cat is on the mat" has 4 stop words of 6 words (66.7%)
    ("stop_word_ratio", {"max": 70.0}, "The cat is on the mat", True),
    ("stop_word_ratio", {"max": 60.0}, "The cat is on the mat", False),
    # exact_response
    ("exact_response", {"text": "Only output this sentence."}, " only output  this sentence. ",
     True),
    ("exact_response", {"text": "Only output this sentence."}, "Only output this sentence. Ok",
     False),
    # keyword_in_sentence
    ("keyword_in_sentence", {"keyword": "eat", "n": 2}, "Hi there. We Eat now. Bye.", True),
    ("keyword_in_sentence", {"keyword": "eat", "n": 2}, "We eat. Hi there. Bye.", False),
    ("keyword_in_sentence", {"keyword": "eat", "n": 4}, "We eat. Hi. Bye.", False),
    # alphabet_chain
    ("alphabet_chain", {}, "Young zebras always bounce.", True),
    ("alphabet_chain", {}, "Apples bake crisp eventually.", False),
    # no_consecutive_first_letter
    ("no_consecutive_first_letter", {}, "The big cat ran.", True),
    ("no_consecutive_first_letter", {}, "The big Bad cat.", False),
    # alternating_syllable_parity: cat(1) table(2) dog(1) happy(2)
    ("alternating_syllable_parity", {}, "Cat table dog happy", True),
    ("alternating_syllable_parity", {}, "Cat dog table", False),
    # paragraph_same_first_last
    ("paragraph_same_first_last", {}, "Love is all you need, love.\n\nTime heals time.", True),
    ("paragraph_same_first_last", {}, "Love is all you need.\nTime heals time.", False),
    # prime_word_lengths: at(2) the(3) house(5) don't(4 counting letters)
    ("prime_word_lengths", {}, "at the house, we sat.", True),
    ("prime_word_lengths", {}, "at the house, don't", False),
    # max_word_repeats
    ("max_word_repeats", {"max": 2}, "The cat and the dog.", True),
    ("max_word_repeats", {"max": 2}, "The cat, the dog, THE end.", False),
    # vowel_types: "A cat can nap" uses only a
    ("vowel_types", {"max": 3}, "A cat can nap, then sit.", True),
    ("vowel_types", {"max": 3}, "A cat, a dog, a unicorn.", False),
    ("vowel_types", {"max": 3}, "A cat.\nA bat.", False),
    # word_positions
    ("word_positions", {"word": "despite", "positions": [2, -2]},
     "Rain, despite forecasts, fell despite everything.", True),
    ("word_positions", {"word": "despite", "positions": [2, -2]},
     "Rain despite forecasts fell.", False),
    # csv_table with every field quoted, tab-delimited
    ("csv_table", {"columns": ["Id", "Name"], "rows": 1, "delimiter": "\t", "all_quoted": True},
     '"Id"\t"Name"\n"1"\t"Ann"', True),
    ("csv_table", {"columns": ["Id", "Name"], "rows": 1, "delimiter": "\t", "all_quoted": True},
     '"Id"\t"Name"\n1\t"Ann"', False),
    # distinct_keywords: and, but, so (twice "and") -> 3 different
    ("distinct_keywords", {"keywords": ["and", "but", "or", "so"], "min": 3},
     "Cats and dogs, but not fish, and so on.", True),
    ("distinct_keywords", {"keywords": ["and", "but", "or", "so"], "min": 3},
     "Cats and dogs and fish and birds.", False),
    ("distinct_keywords", {"keywords": ["Grace"], "min": 1, "case_sensitive": True},
     "Saying grace.", False),
    # consonant_cluster_words
    ("consonant_cluster_words", {}, "Strong black birds sprint.", True),
    ("consonant_cluster_words", {}, "Strong birds go.", False),
    # alliteration_increment: longest runs 2, 4, 5
    ("alliteration_increment", {},
     "Big bears nap. Silly sad sam swims. Very vivid violet vines vanish now.", True),
    ("alliteration_increment", {}, "Silly sad sam swims. Big bears nap.", False),
    # palindrome_words (distinct, 5+ letters)
    ("palindrome_words", {"min": 2, "min_length": 5}, "Level radar; Racecar level, kayak.",
     True),
    ("palindrome_words", {"min": 2, "min_length": 5}, "Level level wow noon.", False),
    # nested_brackets
    ("nested_brackets", {"min_depth": 3}, "f(a [b {c} d] e)", True),
    ("nested_brackets", {"min_depth": 3}, "f(a [b {c) d] e)", False),
    ("nested_brackets", {"min_depth": 3}, "(a) [b] {c}", False),
    # japanese_every_nth_word: words 2 and 4 are Japanese
    ("japanese_every_nth_word", {"n": 2}, "I \u732b like \u3055\u304f\u3089, fine", True),
    ("japanese_every_nth_word", {"n": 2}, "I \u732b like cherry fine", False),
    # sentence_chain
    ("sentence_chain", {}, "I love the sea. Sea waves roll in. In time all ends.", True),
    ("sentence_chain", {}, "I love the sea. Waves roll in.", False),
    # sentence_word_increment: 2, 4, 6 words
    ("sentence_word_increment", {"step": 2}, "Cats sleep. Dogs run very fast. "
     "Birds sing loudly in the morning.", True),
    ("sentence_word_increment", {"step": 2}, "Cats sleep. Dogs run fast.", False),
    # multiple_choice_questions: 2 questions x 3 options, stems getting longer
    ("multiple_choice_questions", {"questions": 2, "options": 3},
     "Question 1. Who?\nA. x\nB. y\nC. z\nQuestion 2. Who painted it?\nA) p\nB) q\nC) r",
     True),
    ("multiple_choice_questions", {"questions": 2, "options": 3},
     "Question 1. Who painted it?\nA. x\nB. y\nC. z\nQuestion 2. Who?\nA) p\nB) q\nC) r",
     False),
    ("multiple_choice_questions", {"questions": 2, "options": 3},
     "Here you go.\nQuestion 1. Who?\nA. x\nB. y\nC. z\nQuestion 2. Who is it?\nA) p\nB) q"
     "\nC) r", False),
    ("multiple_choice_questions", {"questions": 2, "options": 3},
     "Question 1. Who?\nA. x\nB. y\nQuestion 2. Who is it?\nA) p\nB) q\nC) r", False),
    # keyword_at: sentence 2, word 3
    ("keyword_at", {"keyword": "moon", "sentence": 2, "word": 3}, "Hi. I see Moon rise.", True),
    ("keyword_at", {"keyword": "moon", "sentence": 2, "word": 3}, "Hi. I see the moon.", False),
    # repeat_changed_first_word
    ("repeat_changed_first_word", {"text": "Write a poem about cats."},
     "Compose a poem about cats.", True),
    ("repeat_changed_first_word", {"text": "Write a poem about cats."},
     "Write a poem about cats.", False),
    ("repeat_changed_first_word", {"text": "Write a poem about cats."},
     "Compose a poem about cats. Cats are soft.", False),
    # exploit-closing kinds: the padded / repeated response passes the plain kind and
    # fails these
    ("distinct_sentence_word_count", {"min": 5}, "Rest helps. Drink water now.", True),
    ("distinct_sentence_word_count", {"min": 5}, "Rest helps. Rest helps! rest HELPS.", False),
    ("fluent_word_count", {"min": 8}, "Rest is the best cure. Drink a lot of water.", True),
    ("fluent_word_count", {"min": 8}, "Rest is the best. Rest is the best. Xqz vlor ptah "
     "brun kelo.", False),
    ("keyword_sentence_count", {"keywords": ["sleep"], "min": 3},
     "Sleep early. Good sleep needs a dark room. Sleep is key.", True),
    ("keyword_sentence_count", {"keywords": ["sleep"], "min": 3},
     "Sleep, sleep, sleep. Sleep early. Sleep early.", False),
    ("max_sentence_repeats", {"max": 1}, "Rest helps. Drink water.", True),
    ("max_sentence_repeats", {"max": 1}, "Rest helps. Drink water. Rest helps!", False),
    ("distinct_word_ratio", {"min": 0.8}, "Rest and drink water.", True),
    ("distinct_word_ratio", {"min": 0.8}, "Rest rest rest and water.", False),
    ("distinct_word_ratio", {"min": 0.0}, "", False),
    ("keywords_in_same_sentence", {"keywords": ["sorry"], "with": ["headache", "pain"]},
     "I'm sorry the headache keeps you up. Try rest.", True),
    ("keywords_in_same_sentence", {"keywords": ["sorry"], "with": ["headache", "pain"]},
     "I'm sorry. Headaches are common.", False),
    ("repeated_sentences", {"min": 2}, "Rest helps. Drink water. Rest helps!", True),
    ("repeated_sentences", {"min": 2}, "Rest helps. Drink water.", False),
    # ends_complete: a reply cut off at the token limit mid-sentence fails
    ("ends_complete", {}, "Rest helps. Drink water.", True),
    ("ends_complete", {}, "Is it \u201cjust stress?\u201d", True),
    ("ends_complete", {}, "**Rest helps!**", True),
    ("ends_complete", {}, "Rest helps. Drink water and", False),
    ("ends_complete", {}, "1. Rest\n2. Water", False),
    ("cut_off", {}, "Rest helps. Drink water and", True),
    ("cut_off", {}, "Rest helps. Drink water.", False),
    # all_of: every sub-check passes
    ("all_of", {"checks": [{"type": "fluent_word_count", "min": 5},
                           {"type": "ends_complete"}]},
     "Rest is the best cure. Drink water.", True),
    ("all_of", {"checks": [{"type": "fluent_word_count", "min": 5},
                           {"type": "ends_complete"}]},
     "Rest is the best cure. Drink a lot of", False),
    ("all_of", {"checks": [{"type": "fluent_word_count", "min": 5},
                           {"type": "ends_complete"}]}, "Rest helps.", False),
]


@pytest.mark.parametrize("kind,args,response,expected", CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_check_kind(kind, args, response, expected):
  assert checks.validate_check(kind, args) == []
  check = Check(kind, FrozenMap(args))
  assert checks.run_check(check, response, prompt=PROMPT) is expected


def test_every_kind_has_positive_and_negative_cases():
  outcomes = {}
  for kind, _, _, expected in CASES:
    outcomes.setdefault(kind, set()).add(expected)
  assert set(outcomes) == set(checks.CHECKS)
  assert {k for k, seen in outcomes.items() if seen != {True, False}} == set()
  assert len(checks.CHECKS) >= 25


def test_contract_kinds_present():
  contract = """keyword_present keyword_count forbidden_words word_count sentence_count
  paragraph_count char_count bullet_list numbered_list markdown_headings sections
  highlighted_sections json_format starts_with ends_with first_word all_lowercase
  all_uppercase capital_words placeholders quotation_wrapped repeat_prompt length_ratio
  no_commas title postscript letter_frequency two_responses question_count digit_count
  regex_match language_english""".split()
  assert set(contract) <= set(checks.CHECKS)
  assert all(checks.CHECKS[k].doc for k in checks.CHECKS)


def test_checks_without_prompt():
  assert not checks.run_check(Check("repeat_prompt"), "anything")
  assert not checks.run_check(Check("length_ratio", FrozenMap({"min": 0.0})), "anything")


def test_length_ratio_is_language_independent():
  # The same ratio holds for a Chinese prompt and response: characters, not words.
  prompt = "\u63cf\u8ff0\u6708\u4eae"  # 4 characters
  check = Check("length_ratio", FrozenMap({"min": 1.5, "max": 2.0}))
  assert checks.run_check(check, "\u6708" * 8, prompt=prompt)
  assert not checks.run_check(check, "\u6708" * 9, prompt=prompt)


@pytest.mark.parametrize("kind,args,problems", [
    ("word_count", {"min": 1, "foo": 2}, ["unexpected arg 'foo'"]),
    ("keyword_count", {"min": 1}, ["missing arg 'keyword'"]),
    ("word_count", {"min": "3"}, ["arg 'min' must be int, got str"]),
    ("word_count", {"min": True}, ["arg 'min' must be int, got bool"]),
    ("word_count", {"min": 2.5}, ["arg 'min' must be int, got float"]),
    ("length_ratio", {"min": 1}, []),  # an int is a valid float
    ("keyword_present", {"keywords": "moon"}, ["arg 'keywords' must be list[str], got str"]),
    ("keyword_present", {"keywords": ["a", 1]},
     ["arg 'keywords' must be list[str], got list[int|str]"]),
    ("word_count", {}, ["give at least one of min/max"]),
    ("all_of", {"checks": []}, ["arg 'checks' must not be empty"]),
    ("all_of", {"checks": [{"type": "word_count"}]},
     ["checks[0] (word_count): give at least one of min/max"]),
    ("all_of", {"checks": [{"min": 3}]}, ["checks[0]: needs a string 'type'"]),
    ("all_of", {"checks": [{"type": "all_of", "checks": []}]},
     ["checks[0]: all_of does not nest"]),
    ("all_of", {"checks": ["word_count"]}, ["arg 'checks' must be list[Mapping], got list[str]"]),
    ("keyword_count", {"keyword": "x"}, ["give at least one of min/max"]),
    ("word_count", {"min": 5, "max": 3}, ["min (5) is greater than max (3)"]),
    ("regex_match", {"pattern": "x"}, []),  # min defaults to 1: no bound needed
    ("regex_match", {"pattern": "x", "max": 0},
     ["max (0) is below the default min 1; give min: 0 to require that nothing matches"]),
    ("keyword_present", {"keywords": ["a"], "mode": "some"},
     ["arg 'mode' must be 'all' or 'any', got 'some'"]),
    ("keyword_present", {"keywords": []},
     ["arg 'keywords' must be a non-empty list of non-empty items"]),
    ("letter_frequency", {"letter": "ab", "min": 1},
     ["arg 'letter' must be one character, got 'ab'"]),
    ("keyword_counts", {"keywords": ["a", "b"], "counts": [1]},
     ["args 'keywords' and 'counts' must have the same length (2 vs 1)"]),
    ("word_positions", {"word": "x", "positions": [0]},
     ["arg 'positions' are 1-based (negative counts from the end); 0 is not a position"]),
    ("sentence_type_ratio", {"declarative": 0, "interrogative": 0}, ["give a positive weight"]),
    ("json_format", {}, []),
    ("language", {"code": "xx"}, ["arg 'code' must be a langdetect language code "
                                  f"({', '.join(sorted(checks.LANGDETECT_CODES))}), got 'xx'"]),
    ("language", {"code": "en", "case": "title"},
     ["arg 'case' must be 'upper' or 'lower', got 'title'"]),
    ("nth_paragraph_first_word", {"paragraphs": 2, "n": 3, "word": "x"},
     ["arg 'n' (3) is greater than 'paragraphs' (2)"]),
    ("paragraph_count", {"separator": " ", "min": 1}, ["arg 'separator' must not be empty"]),
    ("repeat_prompt", {"text": ""}, ["arg 'text' must not be empty"]),
])
def test_validate_check_messages(kind, args, problems):
  assert checks.validate_check(kind, args) == problems


def test_validate_check_reports_every_problem_at_once():
  got = checks.validate_check("keyword_count", {"max": "x", "bar": 1})
  assert got == ["unexpected arg 'bar'", "missing arg 'keyword'",
                 "arg 'max' must be int, got str"]


def test_unknown_type_lists_known_ones():
  (msg,) = checks.validate_check("word_cnt", {})
  assert msg.startswith("unknown check type 'word_cnt' (known: ")
  for name in ("word_count", "json_format", "regex_match", "title_case"):
    assert name in msg


def test_bad_regex_is_reported():
  (msg,) = checks.validate_check("regex_match", {"pattern": "(unclosed"})
  assert msg.startswith("arg 'pattern' is not a valid regex")


def test_building_a_malformed_check_raises():
  with pytest.raises(checks.InvalidCheck, match="missing arg 'keyword'") as e:
    Check("keyword_count", FrozenMap({"min": 1}))
  assert isinstance(e.value, HarnessError)
  assert e.value.problems == ("missing arg 'keyword'",)
  with pytest.raises(checks.InvalidCheck, match="unknown check type"):
    Check("nope")
  with pytest.raises(checks.InvalidCheck, match="arg 'min' must be int, got dict"):
    Check("word_count", {"min": {"at": 3}})


def test_check_args_are_frozen():
  check = Check("keyword_present", {"keywords": ["moon"]})
  assert isinstance(check.args, FrozenMap) and check.args["keywords"] == ("moon",)
  assert check == Check("keyword_present", FrozenMap({"keywords": ["moon"]}))
  hash(check)


def test_checks_are_validated_once_not_per_cell(monkeypatch):
  calls = []
  validate = checks.validate_check
  monkeypatch.setattr(checks, "validate_check",
                      lambda kind, args: calls.append(kind) or validate(kind, args))
  built = [Check("regex_match", {"pattern": r"\bmoon\b"}),
           Check("keyword_present", {"keywords": ["tide"]})]
  assert calls == ["regex_match", "keyword_present"]
  verdicts = [checks.run_check(c, f"moon tide {i}") for i in range(200) for c in built]
  assert all(verdicts) and len(verdicts) == 400
  assert len(calls) == 2  # grading 400 cells validated nothing


def test_text_units():
  assert tu.words("Don't stop, well-known 3.5!") == ["Don't", "stop", "well-known", "3.5"]
  # A curly apostrophe keeps the word whole; separators inside a number keep it one word.
  assert tu.words("Don\u2019t pay 1,000.50 or 2.") == ["Don\u2019t", "pay", "1,000.50", "or", "2"]
  assert tu.sentences('He said "hi." Then left!  Why?\nok 3.5 here') == [
      'He said "hi."', "Then left!", "Why?", "ok 3.5 here"]
  # No sentence ends after a title, a Latin abbreviation or an initial.
  assert tu.sentences("Dr. Smith met Mr. Li, e.g. at noon. J. K. Rowling wrote. Done.") == [
      "Dr. Smith met Mr. Li, e.g. at noon.", "J. K. Rowling wrote.", "Done."]
  assert tu.paragraphs("a\nb\n \t\nc\n\n\n") == ["a\nb", "c"]
  assert tu.terminal_mark('He said "hi?"') == "?"
  assert tu.is_emoji("\U0001F600") and tu.is_emoji("\u2764") and not tu.is_emoji("a")
  # Unicode's emoji list, not codepoint blocks: the plain check mark and star are symbols.
  assert tu.is_emoji("\u2705") and tu.is_emoji("\u2b50")
  assert not tu.is_emoji("\u2713") and not tu.is_emoji("\u2605")


@pytest.mark.parametrize("word,n", [
    ("cat", 1), ("table", 2), ("banana", 3), ("jumped", 1), ("wanted", 2), ("make", 1),
    ("beautiful", 3), ("syllable", 3), ("the", 1), ("boxes", 2), ("makes", 1), ("free", 1),
    ("happy", 2), ("elephant", 3), ("", 0), ("42", 0),
    # vowel pairs that are two syllables (the dictionary's words), a compound, punctuation
    ("idea", 3), ("poem", 2), ("create", 2), ("area", 3), ("self-care", 2), ("Poem,", 2)])
def test_count_syllables(word, n):
  assert tu.count_syllables(word) == n


@pytest.mark.parametrize("response", ["", "  ", "\n\t "])
def test_a_blank_response_passes_no_check(response):
  # Checks an empty text would otherwise meet ("at most", "none of", "no whitespace"): as
  # the official IFBench/IFEval evaluations rule, saying nothing follows no instruction.
  for kind, args in (("word_count", {"max": 100}), ("forbidden_words", {"words": ["x"]}),
                     ("regex_match", {"pattern": r"\s", "min": 0, "max": 0})):
    assert checks.validate_check(kind, args) == [], kind
    assert checks.run_check(Check(kind, FrozenMap(args)), response) is False, kind
