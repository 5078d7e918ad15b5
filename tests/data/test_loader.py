"""Task JSONL loading: round trip, every planted error reported with its line, the CLI."""

import json
import os
import re
import subprocess
import sys

import pytest

from harnessrl_jax.data import checks
from harnessrl_jax.data.frozen import FrozenMap
from harnessrl_jax.data.loader import (dump_tasks, load_tasks, parse_task, task_line,
                                       validate_files)
from harnessrl_jax.data.schema import Check, Criterion, Message, Task
from harnessrl_jax.errors import DataError
from repo_paths import REPO

PROBLEM = re.compile(r"^(?P<file>.+?):(?P<line>\d+): (?P<field>[^:\s]+): (?P<msg>.+)$")


def good(tid, **overrides):
  task = {"id": tid, "domain": "writing",
          "prompt": [{"role": "user", "content": f"Write a haiku about {tid}."}],
          "criteria": [{"id": "c0", "text": "Is a haiku.", "weight": 3},
                       {"id": "c1", "text": "Uses no commas.", "weight": 1,
                        "check": {"type": "no_commas"}}]}
  task.update(overrides)
  return json.dumps(task)


def write(path, lines):
  path.write_text("\n".join(lines) + "\n", encoding="utf-8")
  return str(path)


def test_parse_task_defaults_and_string_prompt():
  obj = {"id": "a", "domain": "medical", "prompt": "How much water per day?",
         "criteria": [{"id": "x", "text": "Gives a range.", "weight": 2}]}
  task = parse_task(obj, where="f.jsonl:3")
  assert task == Task(id="a", domain="medical",
                      prompt=(Message("user", "How much water per day?"),),
                      criteria=(Criterion("x", "Gives a range.", 2.0),), reference_answer=None,
                      source="", meta=FrozenMap())
  assert task.criteria[0].anchor is True
  assert isinstance(task.criteria[0].weight, float)


def test_parse_task_names_location_and_field():
  with pytest.raises(DataError) as e:
    parse_task({"id": "a", "domain": "x", "prompt": "p",
                "criteria": [{"id": "c", "text": "t", "weight": True}]}, where="in.jsonl:7")
  assert e.value.problems == ("in.jsonl:7: criteria[0].weight: must be a number, got bool",)


def test_round_trip(tmp_path):
  tasks = (
      Task(id="t1", domain="instruction_following",
           prompt=(Message("system", "Be terse."), Message("user", "List three fruits. ünïcode")),
           criteria=(Criterion("c0", "Lists three fruits.", 4.0, tags=("core",)),
                     Criterion("c1", "Stays under 20 words.", 1.5,
                               check=Check("word_count", FrozenMap({"max": 20}))),
                     Criterion("c2", "Lists a vegetable.", -2.0, anchor=False,
                               check=Check("keyword_present",
                                           FrozenMap({"keywords": ("carrot", "leek"),
                                                      "mode": "any"})))),
           reference_answer="Apple, pear, plum.", source="handmade",
           meta={"b": [1, {"z": None}], "a": "x"}),
      Task(id="t2", domain="roleplay", prompt=(Message("user", "Hi"),),
           criteria=(Criterion("c0", "Greets back.", 1.0),)),
  )
  path = tmp_path / "tasks.jsonl"
  dump_tasks(tasks, path)
  loaded = load_tasks(path)
  assert loaded == tasks
  first = path.read_text(encoding="utf-8")
  dump_tasks(loaded, path)
  assert path.read_text(encoding="utf-8") == first  # canonical: a second dump is identical
  line = json.loads(first.splitlines()[0])
  assert list(line) == ["id", "domain", "source", "prompt", "criteria", "reference_answer", "meta"]
  assert list(line["meta"]) == ["a", "b"]
  assert line["criteria"][1]["check"] == {"type": "word_count", "max": 20}
  assert task_line(loaded[0]) == first.splitlines()[0]


# Each planted error: (line, field). Line 1 and the last line are good tasks; line 10 is blank.
PLANTED = [
    (2, "json"),                      # truncated JSON
    (3, "task"),                      # an array, not an object
    (4, "prompt"),                    # prompt missing
    (5, "criteria"),                  # no positive weight
    (6, "id"),                        # duplicate of line 1's id
    (7, "criteria[0].check"),         # unknown check type
    (8, "criteria[1].weight"),        # weight is a string
    (9, "criteria[1].id"),            # criterion id repeated within the task
    (11, "rubric"),                   # unknown top-level field
    (11, "prompt[0].role"),           # role not system/user/assistant
    (12, "domain"),                   # domain missing
    (12, "id"),                       # empty id
    (13, "criteria[0].tags"),         # tags not a list
    (13, "criteria[0].anchor"),       # anchor not a bool
    (14, "reference_answer"),         # not a string
    (14, "meta"),                     # not an object
    (15, "json"),                     # NaN is not JSON
    (16, "prompt"),                   # no user message
    (17, "criteria[0].check"),        # bounded check without bounds
    (18, "criteria"),                 # empty criteria list
]


def broken_file(tmp_path):
  crit = lambda **kw: {"id": "c0", "text": "Good.", "weight": 1, **kw}
  lines = [
      good("t1"),
      '{"id": "t2", "domain": "writing", "prompt": ',
      "[1, 2]",
      json.dumps({"id": "t4", "domain": "writing", "criteria": [crit()]}),
      good("t5", criteria=[crit(weight=-1), {"id": "c1", "text": "Meh.", "weight": 0}]),
      good("t1"),
      good("t7", criteria=[crit(check={"type": "no_such_check"})]),
      good("t8", criteria=[crit(), {"id": "c1", "text": "x", "weight": "high"}]),
      good("t9", criteria=[crit(), crit()]),
      "",
      good("t11", rubric=[], prompt=[{"role": "narrator", "content": "hi"}]),
      json.dumps({"id": "", "prompt": "p", "criteria": [crit()]}),
      good("t13", criteria=[crit(tags="core", anchor="yes")]),
      good("t14", reference_answer=5, meta=["x"]),
      '{"id": "t15", "domain": "writing", "prompt": "p", "criteria": '
      '[{"id": "c0", "text": "t", "weight": NaN}]}',
      good("t16", prompt=[{"role": "system", "content": "Be nice."}]),
      good("t17", criteria=[crit(check={"type": "word_count"})]),
      good("t18", criteria=[]),
      good("t19"),
  ]
  return write(tmp_path / "broken.jsonl", lines)


def parse_problems(lines, path):
  out = []
  for line in lines:
    m = PROBLEM.match(line)
    assert m, f"not FILE:LINE: field: message: {line!r}"
    assert m["file"] == path
    out.append((int(m["line"]), m["field"]))
  return out


def test_broken_file_reports_every_planted_error(tmp_path):
  path = broken_file(tmp_path)
  with pytest.raises(DataError) as e:
    load_tasks(path)
  found = parse_problems(e.value.problems, path)
  assert sorted(set(found)) == sorted(set(PLANTED))
  assert len(found) == len(PLANTED)  # one message per planted error, nothing extra
  dup = [p for p in e.value.problems if p.startswith(f"{path}:6: id:")]
  assert "line 1" in dup[0]  # names both lines
  # The good tasks on lines 1 and 19 are not returned on their own: the file is rejected whole.
  good_files, problems = validate_files([path])
  assert good_files == {} and len(problems) == len(found)


def test_file_level_problems(tmp_path):
  empty = write(tmp_path / "empty.jsonl", ["", "  "])
  with pytest.raises(DataError, match=r"empty\.jsonl:1: file: no tasks"):
    load_tasks(empty)
  with pytest.raises(DataError, match=r"missing\.jsonl:0: file: cannot read"):
    load_tasks(tmp_path / "missing.jsonl")
  bad = tmp_path / "latin1.jsonl"
  bad.write_bytes(good("t1").encode() + b'\n{"id": "caf\xe9"}\n')  # latin-1, not UTF-8
  with pytest.raises(DataError) as e:
    load_tasks(bad)
  assert parse_problems(e.value.problems, str(bad)) == [(2, "json")]


def test_duplicate_ids_across_files(tmp_path):
  a = write(tmp_path / "a.jsonl", [good("x"), good("y")])
  b = write(tmp_path / "b.jsonl", [good("z"), good("y")])
  good_files, problems = validate_files([a, b])
  assert problems == [f"{b}:2: id: duplicate task id 'y' (first in {a}:2)"]
  assert list(good_files) == [str(a)]   # b is rejected whole
  c = write(tmp_path / "c.jsonl", [good("w")])
  good_files, problems = validate_files([a, c])
  assert problems == [] and [t.id for p in (a, c) for t in good_files[str(p)]] == ["x", "y", "w"]


def test_check_arg_problems_each_on_its_own_line(tmp_path):
  bad = {"type": "keyword_count", "max": "x", "bar": 1}
  path = write(tmp_path / "bad.jsonl", [good("a"), good("b", criteria=[
      {"id": "c0", "text": "t", "weight": 1, "check": bad}])])
  with pytest.raises(DataError) as e:
    load_tasks(path)
  where = f"{path}:2: criteria[0].check"
  assert e.value.problems == (f"{where}: unexpected arg 'bar'", f"{where}: missing arg "
                              "'keyword'", f"{where}: arg 'max' must be int, got str")
  path = write(tmp_path / "regex.jsonl", [good("b", criteria=[
      {"id": "c0", "text": "t", "weight": 1,
       "check": {"type": "regex_match", "pattern": "(unclosed"}}])])
  with pytest.raises(DataError) as e:
    load_tasks(path)
  (msg,) = e.value.problems
  assert msg.startswith(f"{path}:1: criteria[0].check: arg 'pattern' is not a valid regex")


def test_loading_validates_each_check_once(tmp_path, monkeypatch):
  calls = []
  validate = checks.validate_check
  monkeypatch.setattr(checks, "validate_check",
                      lambda kind, args: calls.append(kind) or validate(kind, args))
  tasks = load_tasks(write(tmp_path / "ok.jsonl", [good("a"), good("b")]))
  assert calls == ["no_commas", "no_commas"]
  for t in tasks:
    for c in t.criteria:
      if c.check is not None:
        assert checks.run_check(c.check, "no commas here", prompt=t.user_text)
  assert len(calls) == 2  # grading did not validate again


def run_validate(*files):
  env = {**os.environ, "PYTHONPATH": REPO}
  return subprocess.run([sys.executable, "-m", "harnessrl_jax.data.validate", *files],
                        capture_output=True, text=True, cwd=REPO, env=env, timeout=120)


def test_validate_cli(tmp_path):
  ok = write(tmp_path / "ok.jsonl", [good("a"), good("b", criteria=[
      {"id": "c0", "text": "t", "weight": 1, "check": {"type": "word_count", "min": 3}},
      {"id": "c1", "text": "u", "weight": -1, "check": {"type": "no_commas"}},
      {"id": "c2", "text": "v", "weight": 2}])])
  res = run_validate(ok)
  assert res.returncode == 0, res.stdout + res.stderr
  assert res.stdout.strip() == f"{ok}: OK: 2 tasks, 5 criteria, 3 checks"

  broken = broken_file(tmp_path)
  res = run_validate(ok, broken)
  assert res.returncode == 1
  problem_lines = [l for l in res.stdout.splitlines() if not l.startswith(f"{ok}: OK")]
  assert sorted(set(parse_problems(problem_lines, broken))) == sorted(set(PLANTED))
  assert f"{ok}: OK: 2 tasks" in res.stdout
