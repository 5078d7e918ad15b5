"""Importers: mapped fields and weights on our own fixtures, error lines, the real samples."""

import hashlib
import json
import os
import subprocess
import sys

import pytest

from harnessrl_jax.data import convert
from harnessrl_jax.data.importers import IMPORTERS
from harnessrl_jax.data.loader import load_tasks, parse_task
from harnessrl_jax.errors import DataError
from repo_paths import REPO

FIXTURES = os.path.join(REPO, "tests", "fixtures")
UPSTREAM = os.path.join(os.path.dirname(REPO), "shared", "data", "upstream", "raw")
OWN_FORMATS = ("healthbench", "rar", "rubrichub", "researchqa", "writingbench", "rolebench")


def rows(fmt):
  with open(os.path.join(FIXTURES, f"{fmt}_sample.jsonl"), encoding="utf-8") as f:
    return [json.loads(line) for line in f if line.strip()]


def converted(fmt):
  """Fixture rows converted and parsed into Tasks."""
  return [parse_task(IMPORTERS[fmt](r), where=f"{fmt}:{i}") for i, r in enumerate(rows(fmt))]


def weights(task):
  return [c.weight for c in task.criteria]


def sha12(*parts):
  return hashlib.sha1("\x1f".join(parts).encode()).hexdigest()[:12]


def test_registry_names():
  assert set(IMPORTERS) == set(OWN_FORMATS) | {"ifbench", "ifeval"}
  with pytest.raises(KeyError):
    IMPORTERS["nope"]


def test_healthbench():
  raw = rows("healthbench")
  t0, t1 = converted("healthbench")
  assert t0.id == "healthbench-" + raw[0]["prompt_id"] and t0.domain == "medical"
  assert weights(t0) == [7.0, 9.0, -8.0, 2.0]  # negative points stay penalties
  assert [c.id for c in t0.criteria] == ["c0", "c1", "c2", "c3"]
  assert t0.criteria[2].text == raw[0]["rubrics"][2]["criterion"]
  assert t0.criteria[3].tags == tuple(raw[0]["rubrics"][3]["tags"])
  assert t0.reference_answer is None
  assert [m.role for m in t1.prompt] == ["user", "assistant", "user"]
  assert t1.user_text == "Lisinopril, 10 mg a day."
  assert t1.reference_answer == raw[1]["ideal_completions_data"]["ideal_completion"]
  assert t1.meta["example_tags"] == ("theme:context_seeking",)
  assert all(c.anchor for c in t0.criteria + t1.criteria)


def test_rar_categories_and_pitfall_sign():
  raw = rows("rar")
  t0, t1, t2 = converted("rar")
  assert t0.id == "rar-" + sha12(raw[0]["question"])
  assert weights(t0) == [5.0, 3.0, 1.0, -2.0]
  assert [c.tags for c in t0.criteria] == [("rar:essential",), ("rar:important",),
                                            ("rar:optional",), ("rar:pitfall",)]
  assert t0.criteria[0].text == "Identifies (B) Nitrogen as the final answer."
  assert t0.reference_answer == "B) Nitrogen"
  # Category given as a description prefix: prefix stripped; a pitfall stored as a positive
  # magnitude still becomes a penalty.
  assert weights(t1) == [5.0, 4.0, -1.0]
  assert t1.criteria[2].text == "Does not mention that density is the reason ice floats."
  assert t1.meta["rubric_titles"] == ("Density Comparison", "Hydrogen Bond Lattice",
                                      "Density Error")
  # No category: weight and text as given; null reference stays null.
  assert weights(t2) == [2.0] and t2.criteria[0].tags == () and t2.reference_answer is None
  assert {t.domain for t in (t0, t1, t2)} == {"science"}


def test_rar_rejects_negative_weight_on_positive_category():
  record = rows("rar")[0]
  record["rubric"][0]["weight"] = -5
  with pytest.raises(DataError) as e:
    IMPORTERS["rar"](record)
  assert e.value.problems[0].startswith("rubric[0].weight: negative weight -5")


def test_rubrichub():
  t0, t1 = converted("rubrichub")
  assert (t0.id, t1.id) == ("rubrichub-rh-fixture-17", "rubrichub-42")
  assert weights(t0) == [10.0, 6.0, 0.0] and weights(t1) == [8.0, 8.0, 4.0]
  assert t0.prompt[0].content == rows("rubrichub")[0]["question"]


def test_researchqa():
  t0, t1 = converted("researchqa")
  assert t0.id == "researchqa-rqa-fixture-001" and t0.domain == "science"
  assert weights(t0) == [1.0, 1.0, 1.0]
  assert [c.tags for c in t0.criteria] == [("researchqa:citation",), ("researchqa:comparison",),
                                            ("researchqa:limitation",)]
  assert t1.criteria[1].tags == ()
  assert dict(t0.meta) == {"upstream_id": "rqa-fixture-001", "general_domain": "Life Sciences",
                           "subdomain": "Ecology", "field": "Pollination biology",
                           "date": "2024-03"}


def test_writingbench_binary_criteria_keep_levels():
  raw = rows("writingbench")
  t0, t1 = converted("writingbench")
  assert t0.id == "writingbench-9001" and t0.domain == "writing"
  assert weights(t0) == [1.0, 1.0, 1.0] and weights(t1) == [1.0, 1.0]
  item = raw[0]["checklist"][1]
  text = t0.criteria[1].text
  assert text.startswith("Hands on activity: " + item["criteria_description"])
  assert "at least 7 of 10" in text and item["7-8"] in text
  for cid, item in zip(["c0", "c1", "c2"], raw[0]["checklist"]):
    levels = t0.meta["writingbench_levels"][cid]
    assert dict(levels) == {k: item[k] for k in ("name", "1-2", "3-4", "5-6", "7-8", "9-10")}
  assert t1.prompt[0].content == raw[1]["query"]  # non-ASCII text kept as is
  assert t1.meta["domain2"] == "Slogans"


def test_writingbench_missing_level_is_reported():
  record = rows("writingbench")[0]
  del record["checklist"][2]["9-10"]
  record["checklist"][0]["name"] = ""
  with pytest.raises(DataError) as e:
    IMPORTERS["writingbench"](record)
  assert e.value.problems == ('checklist[0].name: must not be empty',
                              'checklist[2]["9-10"]: missing')


def test_rolebench_our_prompt_and_criteria():
  raw = rows("rolebench")
  t0, t1, t2 = converted("rolebench")
  question = "Captain Nemo, why did you turn your back on the land?"
  assert t0.id == "rolebench-" + sha12("Captain Nemo", question)
  assert t0.domain == "roleplay"
  assert t0.prompt[0].role == "system" and "You are Captain Nemo." in t0.prompt[0].content
  assert t0.prompt[1].content == raw[0]["question"].strip()
  assert t0.reference_answer == raw[0]["generated"][0].strip()
  assert len(t0.criteria) == 3 and weights(t0) == [1.0, 1.0, 1.0]
  assert "in character as Captain Nemo" in t0.criteria[0].text
  assert t1.meta["rolebench_references"] == tuple(raw[1]["generated"])
  assert t1.meta["rolebench_type"] == ("script_based",)
  assert t0.meta["rolebench_type"] == ("script_agnostic",) and "rolebench_type" not in t2.meta
  assert t1.id != t2.id  # same role, different question


def test_convert_cli_fixtures_in_process(tmp_path, capsys):
  for fmt in OWN_FORMATS:
    out = tmp_path / f"{fmt}.jsonl"
    assert convert.main([f"--format={fmt}", os.path.join(FIXTURES, f"{fmt}_sample.jsonl"),
                         str(out)]) == 0
    assert load_tasks(out) == tuple(converted(fmt))
  assert "2 tasks, 7 criteria, 0 checks (healthbench)" in capsys.readouterr().out


def test_convert_json_array_and_domain_override(tmp_path):
  src = tmp_path / "rar.json"
  src.write_text(json.dumps(rows("rar"), indent=2), encoding="utf-8")
  out = tmp_path / "out.jsonl"
  assert convert.main(["--format=rar", "--domain=medical", str(src), str(out)]) == 0
  tasks = load_tasks(out)
  assert [t.domain for t in tasks] == ["medical"] * 3
  assert [t.criteria for t in tasks] == [t.criteria for t in converted("rar")]


def test_convert_reports_lines_and_writes_nothing(tmp_path, capsys):
  good = rows("rubrichub")
  bad_points = json.loads(json.dumps(good[0]))
  bad_points["rubrics"][1]["points"] = "ten"
  no_positive = {"question": "q", "id": "z", "rubrics": [{"criterion": "c", "points": 0}]}
  lines = [json.dumps(good[0]), json.dumps(bad_points), "{not json", json.dumps(good[1]),
           json.dumps(no_positive), json.dumps(good[1])]
  src = tmp_path / "in.jsonl"
  src.write_text("\n".join(lines) + "\n", encoding="utf-8")
  out = tmp_path / "out.jsonl"
  assert convert.main(["--format=rubrichub", str(src), str(out)]) == 1
  printed = capsys.readouterr().out.splitlines()
  assert printed == [
      f"{src}:2: rubrics[1].points: must be a number, got str",
      f"{src}:3: json: bad JSON: Expecting property name enclosed in double quotes: "
      "line 1 column 2 (char 1)",
      f"{src}:5: criteria: needs at least one criterion with a positive weight (the reward is "
      "normalised by the sum of positive weights)",
      f"{src}:6: id: duplicate task id 'rubrichub-42' (also from line 4)",
  ]
  assert not out.exists()


def shared_sample(prefix):
  if not os.path.isdir(UPSTREAM):
    pytest.skip(f"shared upstream samples not found at {UPSTREAM}")
  # The upstream folder also holds other files of a benchmark (IFBench's evaluation results,
  # its full test set): the samples are the `*.sample.jsonl` files.
  names = [n for n in sorted(os.listdir(UPSTREAM))
           if n.startswith(prefix) and n.endswith(".sample.jsonl")]
  if not names:
    pytest.skip(f"no {prefix}* sample in {UPSTREAM}")
  return os.path.join(UPSTREAM, names[0])


@pytest.mark.parametrize("fmt", ["writingbench", "rolebench", "ifbench"])
def test_convert_cli_real_shared_samples(fmt, tmp_path):
  src = shared_sample(fmt)
  if fmt == "ifbench":
    try:
      IMPORTERS["ifbench"]
    except ImportError:
      pytest.skip("the ifbench importer is not written yet")
  out = tmp_path / f"{fmt}.jsonl"
  res = subprocess.run([sys.executable, "-m", "harnessrl_jax.data.convert", f"--format={fmt}",
                        src, str(out)], capture_output=True, text=True, cwd=REPO, timeout=120,
                       env={**os.environ, "PYTHONPATH": REPO})
  assert res.returncode == 0, res.stdout + res.stderr
  with open(src, encoding="utf-8") as f:
    n = sum(1 for line in f if line.strip())
  tasks = load_tasks(out)
  assert len(tasks) == n and len({t.id for t in tasks}) == n
  assert f"{n} tasks" in res.stdout
  assert all(t.source == fmt and any(c.weight > 0 for c in t.criteria) for t in tasks)
