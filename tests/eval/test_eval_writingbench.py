"""WritingBench's own 1-10 protocol (eval/writingbench.py): the critic prompt, the score
parser, the aggregation by hand, and protocols.writingbench end to end with scripted judges."""

from __future__ import annotations

import json
import math
import os
import re

import pytest

from harnessrl_jax.eval import protocols
from harnessrl_jax.eval import writingbench as wb
from harnessrl_jax.judges.client import ServerError, TextClient, TransportError
from harnessrl_jax.judges.judge import Judge
from repo_paths import FIXTURES

FIX = FIXTURES
PATH = os.path.join(FIX, "eval_writingbench_scores.jsonl")

RESPONSES = {
    "budget meeting": "Minutes, 3 March. Decision: cut travel (owner: Ana).",
    "灯塔": "老人每晚点亮灯塔。",
    "photosynthesis": "1. What do plants need sunlight for? ...",
}

# Per checklist item name: the critic's reply, or a list of replies for successive asks.
REPLIES = {
    "Decision_Record": '{"score": 9, "reason": "each decision has an owner"}',
    "Word_Limit": "```json\n{\"score\": 6, \"reason\": \"close to the limit\"}\n```",
    "Formal_Register": "Score: 7",
    "Date_Accuracy": '<think>maybe 8?</think>\n\n{"reason": "the date is wrong", "score": 3}',
    "Narrative_Arc": '{"score": "8", "reason": "clear turn"}',
    "Setting_Detail": ["I liked it a lot.", "Still no number, sorry."],   # never readable
    "Language_Match": '{"score": 10, "reason": "Chinese throughout"}',
    "Question_Count": "**Score:** 5/10",
    "Age_Fit": '{"score": 4.0, "reason": "some jargon"}',
}
# Hand-computed from REPLIES: per query the mean of its readable items.
Q11 = (9 + 6 + 7 + 3) / 4           # 6.25, two of four items >= 7
Q12 = (8 + 10) / 2                  # 9.0, Setting_Detail unparsed; both >= 7
Q13 = (5 + 4) / 2                   # 4.5, none >= 7


def scripted_generate(chats):
  out = []
  for chat in chats:
    hits = [v for k, v in RESPONSES.items() if k in chat[-1].content]
    assert len(hits) == 1, chat[-1].content
    out.append(hits[0])
  return out


def _item_name(user: str) -> str:
  return re.search(r"Criterion: (\w+)\n", user).group(1)


class CriticClient(TextClient):
  """Scripted critic: answers the 1-10 request from REPLIES (by the item's name, n-th ask
  for a list) and the binary judge's request with criteria_met iff the item's scripted
  score is >= 7. Records every batch it is sent."""

  identity = "scripted-critic"

  def __init__(self, replies=None, fail=()):
    self.replies = REPLIES if replies is None else replies
    self.fail = set(fail)
    self.batches = []
    self.asked = {}

  def _complete(self, chats, max_tokens):
    self.batches.append([c[-1].content for c in chats])
    out = []
    for chat in chats:
      user = chat[1].content
      if '"criteria_met"' in user:   # the binary judge's prompt (judges/prompt.py)
        item = re.search(r"<<<BEGIN RUBRIC ITEM \w+>>>\n([^:]+):", user).group(1)
        name = next(n for n in self.replies if n.replace("_", " ").lower() == item.lower())
        score = wb.parse_score(self._reply(name, 0))
        out.append('{"explanation": "x", "criteria_met": %s}'
                   % str(score is not None and score >= 7).lower())
        continue
      name = _item_name(user)
      if name in self.fail:
        out.append(TransportError("scripted outage"))
        continue
      n = self.asked.get(name, 0)
      self.asked[name] = n + 1
      out.append(self._reply(name, n))
    return out

  def _reply(self, name, n):
    reply = self.replies[name]
    return reply[min(n, len(reply) - 1)] if isinstance(reply, list) else reply


def _tasks():
  return protocols.import_tasks("WritingBench", PATH, "writingbench")


# ---------------------------------------------------------------- the prompt

def test_prompt_holds_query_response_item_and_bands():
  task = _tasks()[0]
  crit = task.criteria[1]
  system, user = wb.item_messages(task.user_text, "Minutes, 3 March.",
                                  wb.item_meta(task, crit))
  assert system.role == "system" and user.role == "user"
  text = user.content
  assert "Write the minutes of a budget meeting held on 3 March, in under 300 words." in text
  assert "Minutes, 3 March." in text
  assert "Criterion: Word_Limit\n" in text
  assert "What it assesses: Stays under 300 words.\n" in text
  for band, word in zip(wb.LEVELS, ("one-two", "three-four", "five-six", "seven-eight",
                                    "nine-ten")):
    assert f"  {band}: Length band {word}:" in text
  # the item is restated after the response; the other items of the query are absent
  assert text.count("Criterion: Word_Limit\n") == 2
  assert text.index("Minutes, 3 March.") < text.rindex("Criterion: Word_Limit")
  assert "Decision_Record" not in text
  # the scale, the strictness rules and the answer format
  assert "integer from 1 to 10" in text and '"score"' in text and '"reason"' in text
  for band, _ in wb.SCALE:
    assert f"  {band}: " in text
  assert "fabricated" in text and "Length and formatting must not sway you" in text
  # untrusted text is fenced: query and response each between their own markers
  assert re.search(r"<<<BEGIN QUERY \w+>>>\nWrite the minutes", text)
  assert re.search(r"<<<BEGIN RESPONSE \w+>>>\nMinutes, 3 March.\n<<<END RESPONSE", text)


def test_item_meta_recovers_the_upstream_item():
  task = _tasks()[1]
  meta = wb.item_meta(task, task.criteria[2])
  assert meta == {"name": "Language_Match", "description": "Is written in Chinese as the query is.",
                  "1-2": "Language band one-two: missing entirely.",
                  "3-4": "Language band three-four: present but weak.",
                  "5-6": "Language band five-six: adequate.",
                  "7-8": "Language band seven-eight: strong with minor gaps.",
                  "9-10": "Language band nine-ten: flawless."}


def test_prompt_drops_reasoning_before_think_end():
  task = _tasks()[2]
  msgs = wb.task_messages(task, "<think>count to five first</think>\n\n1. What is chlorophyll?")
  assert len(msgs) == 2
  for _, user in msgs:
    assert "1. What is chlorophyll?" in user.content
    assert "count to five" not in user.content


# ---------------------------------------------------------------- the parser

@pytest.mark.parametrize("reply,expected", [
    ('{"score": 7, "reason": "good"}', 7),
    ('```json\n{\n  "score": 9,\n  "reason": "x"\n}\n```', 9),
    ('Here is my evaluation: {"reason": "ok", "score": 3}', 3),
    ('{"score": "8", "reason": "quoted number"}', 8),
    ('{"score": 7.0, "reason": "x"}', 7),
    ('{"score": 1, "reason": "x"}', 1),
    ('{"score": 10, "reason": "x"}', 10),
    ('{"score": 7.5, "reason": "x"}', None),            # not an integer
    ('{"score": 11, "reason": "x"}', None),             # out of range
    ('{"score": 0, "reason": "x"}', None),              # out of range
    ('{"score": true, "reason": "x"}', None),           # a boolean is no score
    ('{"score": null, "reason": "x"}', None),
    ('{"score": "high", "reason": "x"}', None),
    ('{"score": 7, "reason": "x"} {"score": 2, "reason": "y"}', 7),   # the first object wins
    ('{"score": 6, "reason": "better than a Score: 3 draft"}', 6),    # JSON before prose
    ('{"evaluation": {"score": 4, "reason": "nested"}}', 4),
    ('{"score": 8, "reason": "he said "fine" twice"}', 8),            # broken JSON, key read
    ('{"score": 5, "reason": "cut off mid-sent', 5),                  # truncated answer
    ('<think>a 2 at first? score: 2</think>\n\n{"score": 9, "reason": "x"}', 9),
    ("Score: 6", 6),
    ("**Score:** 8/10", 8),
    ("score = 4 out of 10", 4),
    ("The score is 5.", 5),
    ("Scores run from 1 to 10. On a score of 1 to 10, my score: 6", 6),
    ("Score: 7\nReason: tight.\nFinal score: 7", 7),    # repeated, consistent
    ("Score: 3. On reflection, final score: 8", None),  # conflicting numbers
    ("Score: 12", None),
    ("Score: -3", None),
    ("Score: 8.5", None),
    ("8", 8),
    ("10/10", 10),
    ("7 and 8", None),                                   # several bare numbers
    ("I think it is good.", None),
    ('{"explanation": "x", "criteria_met": true}', None),
    ("", None),
    (None, None),
])
def test_parse_score(reply, expected):
  assert wb.parse_score(reply) == expected


# ---------------------------------------------------------------- aggregation

def test_score_items_by_hand():
  tasks = _tasks()
  client = CriticClient()
  rated = wb.score_items(client, tasks, scripted_generate([t.prompt for t in tasks]))
  assert rated.scores == ((9, 6, 7, 3), (8, None, 10), (5, 4))
  assert rated.unparsed == 1 and rated.failed == 0
  assert rated.per_query == [Q11, Q12, Q13]
  assert rated.pass_rate() == [50.0, 100.0, 0.0]
  assert rated.pass_rate(5) == [75.0, 100.0, 50.0]
  assert rated.pooled == pytest.approx((9 + 6 + 7 + 3 + 8 + 10 + 5 + 4) / 8)
  assert rated.raw[1][1] == "Still no number, sorry."
  # one batch with all nine items, then one with the single unreadable item re-asked
  assert [len(b) for b in client.batches] == [9, 1]
  assert client.batches[1] == [wb.REMINDER]
  summary = wb.summary(tasks, rated)
  assert summary["score_1_10"] == pytest.approx((Q11 + Q12 + Q13) / 3)
  assert summary["pass_rate_at_7"] == pytest.approx(50.0)
  assert summary["items_1_10"] == {"writingbench-11": Q11, "writingbench-12": Q12,
                                   "writingbench-13": Q13}
  assert summary["unparsed_items"] == 1 and summary["failed_items"] == 0


def test_score_items_counts_failed_and_fully_unscored_queries():
  tasks = _tasks()
  client = CriticClient(fail={"Question_Count", "Age_Fit"})
  rated = wb.score_items(client, tasks, scripted_generate([t.prompt for t in tasks]),
                         parse_retries=0)
  assert rated.scores[2] == (None, None)
  assert rated.failed == 2 and rated.unparsed == 1
  assert len(client.batches) == 1          # no re-asks with parse_retries=0
  assert rated.raw[2][0].startswith("failed: ")
  assert math.isnan(rated.per_query[2]) and math.isnan(rated.pass_rate()[2])
  summary = wb.summary(tasks, rated)
  # a query with no scored item is left out of the mean, not counted as 0
  assert summary["score_1_10"] == pytest.approx((Q11 + Q12) / 2)
  assert set(summary["items_1_10"]) == {"writingbench-11", "writingbench-12"}


def test_score_items_rejects_mismatched_lengths():
  with pytest.raises(ValueError):
    wb.score_items(CriticClient(), _tasks(), ["only one"])


# ---------------------------------------------------------------- protocols.writingbench

def test_protocol_reports_1_10_beside_binary_pass_rate():
  judge = Judge(CriticClient(), use_checks=False)
  out = protocols.writingbench(PATH, scripted_generate, judge)
  json.dumps(out)
  # the binary judge (criteria_met iff the scripted score >= 7): share of items met
  assert out["items"] == {"writingbench-11": 50.0, "writingbench-12": pytest.approx(200 / 3),
                          "writingbench-13": 0.0}
  assert out["score"] == pytest.approx((50.0 + 200 / 3 + 0.0) / 3)
  # WritingBench's protocol on the same responses
  assert out["score_1_10"] == pytest.approx((Q11 + Q12 + Q13) / 3)
  assert out["score_1_10_pooled"] == pytest.approx(52 / 8)
  assert out["pass_rate_at_7"] == pytest.approx(50.0)
  assert out["unparsed_items"] == 1 and out["failed_items"] == 0
  assert out["items_1_10"]["writingbench-12"] == Q12
  assert out["protocol_1_10"].startswith("WritingBench's")
  assert out["num_items"] == 3 and out["unscored_items"] == 0


def test_protocol_conversion_effect_on_identical_judgments():
  # Queries 11 and 13 have the same mean 1-10 (6.5) but pass rates of 75% and 50%.
  replies = {**REPLIES, "Decision_Record": "Score: 7", "Word_Limit": "Score: 7",
             "Formal_Register": "Score: 7", "Date_Accuracy": "Score: 5",
             "Narrative_Arc": "Score: 6", "Setting_Detail": "Score: 6",
             "Language_Match": "Score: 6", "Question_Count": "Score: 10", "Age_Fit": "Score: 3"}
  out = protocols.writingbench(PATH, scripted_generate, Judge(CriticClient(replies),
                                                              use_checks=False))
  assert out["items_1_10"] == {"writingbench-11": 6.5, "writingbench-12": 6.0,
                               "writingbench-13": 6.5}
  # 11: 75% at >= 7; 12: 0%; 13: 50%: pass rates order the queries differently from means
  assert out["pass_rate_at_7"] == pytest.approx((75.0 + 0.0 + 50.0) / 3)
  assert out["score_1_10"] == pytest.approx(19 / 3)


def test_protocol_without_llm_client_keeps_binary_only():
  judge = Judge(None, use_checks=True)       # the program judge: no LLM, no 1-10 scores
  out = protocols.writingbench(PATH, scripted_generate, judge)
  assert out["score_1_10"] is None
  assert out["protocol_1_10"].startswith("not run: the judge has no LLM client")
  assert "pass_rate_at_7" not in out and "unparsed_items" not in out
  assert out["unscored_items"] == 3 and math.isnan(out["score"])


def test_protocol_request_failures_are_counted_not_scored():
  judge = Judge(CriticClient(fail={"Age_Fit"}), use_checks=False)
  out = protocols.writingbench(PATH, scripted_generate, judge)
  assert out["failed_items"] == 1
  assert out["items_1_10"]["writingbench-13"] == 5.0


def test_server_error_type_is_what_clients_return():
  # complete_or_errors puts a ServerError in place of a failed answer; score_items relies on it
  assert issubclass(TransportError, ServerError)
