"""IFBench's evaluation protocol around the checkers (harnessrl_jax/eval/ifverify/registry.py)
and its command line: blank responses, the 8 loose variants, strict mode through our checks
with the official fallback, errors that name the row, and the agreement with the published
verdicts over every id the published rows use."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from harnessrl_jax.errors import DataError
from harnessrl_jax.eval import ifbench_verify
from harnessrl_jax.eval.ifverify import registry
from repo_paths import REPO

RAW = os.path.join(REPO, "..", "shared", "data", "upstream", "raw")
NLTK_DATA = os.path.join(REPO, "..", "shared", "data", "nltk_data")


def row(ids, kwargs, response, prompt="Write something."):
  return {"key": 7, "prompt": prompt, "instruction_id_list": ids, "kwargs": kwargs,
          "response": response}


@pytest.fixture
def fake_checkers(monkeypatch):
  """Two hand-checkable official checkers: one that always passes, one that passes only a
  response without "*" and without a line starting "Title"."""
  monkeypatch.setitem(registry.OFFICIAL, "test:always", lambda r, kw, p: True)
  monkeypatch.setitem(registry.OFFICIAL, "test:plain",
                      lambda r, kw, p: "*" not in r and not r.startswith("Title"))


def test_loose_variants_are_the_official_eight_in_order():
  got = registry.loose_variants("Title\n**body**\nend ")
  assert got == ["Title\n**body**\nend ", "Title\nbody\nend ", "**body**\nend",
                 "Title\n**body**", "**body**", "body\nend", "Title\nbody", "body"]
  assert registry.loose_variants("one line") == ["one line", "one line", "", "", "", "",
                                                 "", ""]


@pytest.mark.parametrize("response", ["", "   ", "\n\t\n", None])
def test_blank_or_missing_response_fails_every_instruction(fake_checkers, response):
  for loose in (False, True):
    out = registry.verify_row(row(["test:always", "test:always"], [{}, None], response),
                              "official", loose)
    assert out["follow_instruction_list"] == [False, False]
    assert out["follow_all_instructions"] is False


def test_loose_passes_what_strict_fails_through_a_variant(fake_checkers):
  r = row(["test:plain", "test:always"], [{}, {}], "Title\n**bold** body")
  strict = registry.verify_row(r, "official", False)
  loose = registry.verify_row(r, "official", True)
  assert strict["follow_instruction_list"] == [False, True]
  assert loose["follow_instruction_list"] == [True, True]   # first line dropped, "*" removed
  assert (strict["follow_all_instructions"], loose["follow_all_instructions"]) == (False, True)
  assert strict["key"] == 7 and strict["instruction_id_list"] == ["test:plain", "test:always"]


def test_null_kwargs_are_dropped_before_the_checker_sees_them(monkeypatch):
  seen = []
  monkeypatch.setitem(registry.OFFICIAL, "test:kwargs",
                      lambda r, kw, p: seen.append((dict(kw), p)) or True)
  registry.verify_row(row(["test:kwargs"], [{"N": 3.0, "keyword": None}], "x", "P?"),
                      "official", False)
  assert seen == [({"N": 3.0}, "P?")]


def test_strict_mode_uses_our_checks_and_names_the_official_fallback(monkeypatch):
  monkeypatch.setitem(registry.OFFICIAL, "custom:european_capitals_sort",
                      lambda r, kw, p: r.startswith("Oslo"))
  r = row(["count:word_count_range", "custom:european_capitals_sort"],
          [{"min_words": 2.0, "max_words": 3.0}, {}], "Oslo, Helsinki, Stockholm")
  out = registry.verify_row(r, "strict", False)
  assert out["follow_instruction_list"] == [True, True]
  assert out["official_fallback"] == ["custom:european_capitals_sort"]
  too_long = registry.verify_row({**r, "response": "Oslo is north of Rome."}, "strict", False)
  assert too_long["follow_instruction_list"] == [False, True]


def test_problems_name_the_row():
  with pytest.raises(DataError, match=r"IN.jsonl:3: instruction id 'test:nope' has no "
                                      r"official checker"):
    registry.verify_row(row(["test:nope"], [{}], "text"), "official", False,
                        where="IN.jsonl:3")
  with pytest.raises(DataError, match=r"IN.jsonl:4: kwargs has 1 entries but "
                                      r"instruction_id_list has 2"):
    registry.verify_row(row(["a", "b"], [{}], "text"), "official", False, where="IN.jsonl:4")
  with pytest.raises(DataError, match=r"IN.jsonl:5: missing field 'response'"):
    registry.verify_row({"prompt": "p", "instruction_id_list": [], "kwargs": []},
                        "official", False, where="IN.jsonl:5")
  with pytest.raises(ValueError, match="mode must be one of"):
    registry.verify_row(row([], [], "x"), "lenient", False)


def test_accuracy_and_agreement_as_the_official_report():
  results = [{"instruction_id_list": ["a", "b"], "follow_all_instructions": False,
              "follow_instruction_list": [True, False]},
             {"instruction_id_list": ["a"], "follow_all_instructions": True,
              "follow_instruction_list": [True]}]
  assert ifbench_verify.accuracy(results) == {"prompt_level": 0.5,
                                              "instruction_level": 2 / 3}
  official = [{"prompt": "p1", "follow_instruction_list": [True, True]},
              {"prompt": "p2", "follow_instruction_list": [True]}]
  ag = ifbench_verify.agreement(results, ["p1", "p2"], official)
  assert (ag["agree"], ag["pairs"], ag["by_id"]) == (2, 3, {"a": [2, 2], "b": [0, 1]})


def test_command_line_writes_official_shaped_rows_and_names_bad_lines(tmp_path):
  src, dst = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
  src.write_text(json.dumps(row(["count:word_count_range"],
                                [{"min_words": 1.0, "max_words": 3.0}], "two words")) + "\n")
  cmd = [sys.executable, "-m", "harnessrl_jax.eval.ifbench_verify", "--mode=strict",
         str(src), str(dst)]
  env = {**os.environ, "PYTHONPATH": REPO}
  done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True,
                        timeout=120)
  assert done.returncode == 0, done.stderr
  assert "prompt-level 1.0000" in done.stdout
  assert [json.loads(l) for l in dst.read_text().splitlines()] == [
      {"key": 7, "instruction_id_list": ["count:word_count_range"],
       "follow_all_instructions": True, "follow_instruction_list": [True],
       "official_fallback": []}]
  src.write_text(src.read_text() + "{not json\n")
  bad = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=120)
  assert bad.returncode == 2 and f"{src}:2: not JSON" in bad.stderr
  extra = subprocess.run(cmd + ["third"], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=120)
  assert extra.returncode != 0 and "'third': unexpected argument" in extra.stderr


def test_evaluate_says_why_the_official_numbers_are_missing():
  from harnessrl_jax.eval import protocols  # pylint: disable=g-import-not-at-top
  out = protocols.official_scores([row(["test:nope"], [{}], None)], ["some text"])
  assert list(out) == ["unavailable"] and "'test:nope' has no official checker" in \
      out["unavailable"]


def test_a_checker_without_its_data_is_left_out_and_named(monkeypatch):
  from harnessrl_jax.errors import ConfigError  # pylint: disable=g-import-not-at-top
  from harnessrl_jax.eval import protocols  # pylint: disable=g-import-not-at-top

  def needs_tagger(r, kw, p):
    raise ConfigError("needs NLTK's POS tagger")
  monkeypatch.setitem(registry.OFFICIAL, "test:tagger", needs_tagger)
  monkeypatch.setitem(registry.OFFICIAL, "test:always", lambda r, kw, p: True)
  r = row(["test:always", "test:tagger"], [{}, {}], "text")
  with pytest.raises(ConfigError, match="POS tagger"):
    registry.verify_row(r, "official", False)
  out = registry.verify_row(r, "official", False, skip_unavailable=True)
  assert out["follow_instruction_list"] == [True, None]
  assert out["follow_all_instructions"] is None
  assert out["unscored"] == {"test:tagger": "needs NLTK's POS tagger"}
  rows = [r, row(["test:always"], [{}], "x")]
  got = protocols.official_scores(rows, ["text", "text"])
  assert got["strict"] == {"prompt_level": 100.0, "instruction_level": 100.0,
                           "prompts": 1, "instructions": 2}
  assert got["unscored"] == {"test:tagger": 1}
  assert got["unscored_why"] == ["needs NLTK's POS tagger"]
