"""Digest stability and the history log: same harness -> same digest, any change -> new
digest, across processes and hash seeds; a logged history replays to every digest, and its
hash chain breaks at the first edited, deleted or moved line."""

import dataclasses
import hashlib
import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

import harnessrl_jax.harness as H
from harnessrl_jax.data.frozen import FrozenMap
from harnessrl_jax.data.schema import Check, Criterion, Message, Task
from harnessrl_jax.errors import DataError, HarnessError
from harnessrl_jax.harness.history import GENESIS, BrokenHistory, head_of
from repo_paths import REPO



def tasks():
  return [Task("t0", "medical", (Message("user", "Dose?"),),
               (Criterion("c0", "gives a dose", 10.0, tags=("axis:accuracy",)),
                Criterion("c1", "unsafe dose", -5.0), Criterion("c2", "cites ÄÖ source", 30.0))),
          Task("t1", "writing", (Message("user", "Poem"),), (Criterion("p0", "rhymes", 1.0),))]


OPS = [H.RubricCreate("t0", "n0", "mg and frequency", 50.0), H.SamplingLevelDown("t1"),
       H.AddGuidance("t1", "critique", "Rhyme the last lines."),
       H.RubricSplit("t0", "n0", (("n1", "mg", 1.0), ("n2", "frequency", 3.0))),
       H.RubricReweight("t0", "c1", -20.0), H.EnforceSchedule(5, 10),
       H.RubricMerge("t0", ("n1", "n2"), "m0", "mg and frequency"),
       H.RubricRewrite("t0", "m0", "mg and how often"), H.RubricDelete("t0", "m0"),
       H.SetLadder((1.0, 0.7, 0.3, 0.1))]


def test_digest_matches_an_independent_canonical_encoding():
  h = H.apply(H.from_tasks(tasks()), H.AddGuidance("t1", "reference", "Good: moon/June"))
  header = {"format": "harnessrl_jax.harness/1", "total_weight": 100.0,
            "guidance_caps": [3, 2, 1, 0], "num_tasks": 2, "num_criteria": 3}
  t0 = {"id": "t0", "retired_ids": [], "guidance": [], "criteria": [
      {"id": "c0", "text": "gives a dose", "anchor": True, "tags": ["axis:accuracy"],
       "check": None},
      {"id": "c1", "text": "unsafe dose", "anchor": True, "tags": [], "check": None},
      {"id": "c2", "text": "cites ÄÖ source", "anchor": True, "tags": [], "check": None}]}
  t1 = {"id": "t1", "retired_ids": [], "guidance": [["reference", "Good: moon/June"]],
        "criteria": [{"id": "p0", "text": "rhymes", "anchor": True, "tags": [],
                      "check": None}]}
  # Numbers as little-endian bytes, built by hand with struct (not NumPy).
  numbers = (struct.pack("<2i", 0, 0) + struct.pack("<i", 3)
             + struct.pack("<4f", 1.0, 0.61, 0.38, 0.17)
             + struct.pack("<6f", 25.0, -12.5, 75.0, 100.0, 0.0, 0.0))
  enc = lambda o: json.dumps(o, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
  lines = [enc(header), hashlib.sha256(numbers).hexdigest()] + [
      hashlib.sha256(enc(t).encode()).hexdigest() for t in (t0, t1)]
  assert H.digest(h) == hashlib.sha256("\n".join(lines).encode()).hexdigest()
  canon = H.canonical(h)
  assert canon["tasks"][0] == {**t0, "level": 0, "weights": [25.0, -12.5, 75.0]}
  assert canon["tasks"][1] == {**t1, "level": 0, "weights": [100.0]}
  assert canon["ladder"] == [float(np.float32(x)) for x in (1.0, 0.61, 0.38, 0.17)]


def test_same_harness_built_two_ways_has_the_same_digest():
  # Way 1: seed rubric plus a created criterion. Way 2: a pool whose task already holds
  # that criterion (non-anchor) and the weights the first way ends with.
  h1 = H.apply(H.from_tasks(tasks()), H.RubricCreate("t0", "n0", "new", 40.0))
  t = tasks()
  w = [c.weight for c in h1.criteria("t0")]
  t[0] = Task("t0", "medical", t[0].prompt, tuple(
      Criterion(c.id, c.text, x, anchor=c.anchor, tags=c.tags)
      for c, x in zip(t[0].criteria + (Criterion("n0", "new", 0.0, anchor=False),), w)))
  h2 = H.from_tasks(t)
  assert H.digest(h1) == H.digest(h2)
  # Different padding history (a long rubric created then removed) does not matter.
  h3 = H.apply_all(H.from_tasks(tasks()), [
      H.RubricCreate("t1", "x1", "a", 1.0), H.RubricCreate("t1", "x2", "b", 1.0),
      H.RubricCreate("t1", "x3", "c", 1.0), H.RubricDelete("t1", "x1"),
      H.RubricDelete("t1", "x2"), H.RubricDelete("t1", "x3")])
  h4 = H.from_tasks(tasks())
  assert H.digest(h3) != H.digest(h4)  # retired ids are state: ids can never be reused
  assert h3.weights.shape == h4.weights.shape
  assert H.digest(H.apply(h1, H.SamplingLevelDown("t1"))) == \
      H.digest(H.apply(h2, H.SamplingLevelDown("t1")))


def test_any_change_changes_the_digest():
  h = H.apply(H.from_tasks(tasks()), H.RubricCreate("t0", "n0", "new", 40.0))
  seen = {H.digest(h)}
  variants = [H.RubricReweight("t0", "c0", 10.0001), H.RubricRewrite("t0", "n0", "new."),
              H.RubricRewrite("t0", "n0", "New"), H.SamplingLevelDown("t0"),
              H.AddGuidance("t0", "critique", "x"), H.AddGuidance("t0", "reference", "x"),
              H.EnforceSchedule(3, 4), H.SetLadder((1.0, 0.61, 0.38, 0.16)),
              H.RubricDelete("t0", "n0")]
  for op in variants:
    d = H.digest(H.apply(h, op))
    assert d not in seen, op
    seen.add(d)
  # Guidance order is state (it decides which field the schedule drops first).
  a = H.apply_all(h, [H.AddGuidance("t0", "critique", "x"), H.AddGuidance("t0", "reference", "y")])
  b = H.apply_all(h, [H.AddGuidance("t0", "reference", "y"), H.AddGuidance("t0", "critique", "x")])
  assert H.digest(a) != H.digest(b)


_CHILD = """
import harnessrl_jax.harness as H
from tests.harness.test_harness_digest import tasks, OPS
h = H.apply_all(H.from_tasks(tasks()), OPS)
print(H.digest(h))
"""


def test_digest_is_identical_across_processes_and_hash_seeds():
  h = H.apply_all(H.from_tasks(tasks()), OPS)
  got = set()
  for seed in ("0", "1", "12345"):
    # The paths pytest adds (pyproject.toml's pythonpath): tests.* and repo_paths import.
    env = dict(os.environ, PYTHONHASHSEED=seed, JAX_PLATFORMS="cpu",
               PYTHONPATH=os.pathsep.join([REPO, os.path.join(REPO, "tests")]))
    out = subprocess.run([sys.executable, "-c", _CHILD], env=env,
                         capture_output=True, text=True, check=True, cwd=REPO, timeout=120)
    got.add(out.stdout.strip().splitlines()[-1])
  assert got == {H.digest(h)}


def test_history_log_replays_every_digest(tmp_path):
  h0 = H.from_tasks(tasks())
  log = H.HistoryLog(tmp_path / "history.jsonl")
  h, d = h0, None
  digests = [H.digest(h0)]
  for step, op in enumerate(OPS):
    h, rec = H.apply_logged(h, op, step=step, measurement={"delta": 0.5 * step, "label": "x"},
                            log=log, digest_before=d)
    d = rec.digest_after
    digests.append(d)
  with pytest.raises(HarnessError):  # an illegal op writes nothing
    H.apply_logged(h, H.SamplingLevelUp("t0"), step=99, log=log)
  records = H.read_history(tmp_path / "history.jsonl")
  assert len(records) == len(OPS)
  assert [r.digest_before for r in records] == digests[:-1]
  assert [r.digest_after for r in records] == digests[1:]
  assert [r.op for r in records] == OPS
  assert records[3].measurement["delta"] == 1.5
  assert H.digest(H.replay(h0, records)) == H.digest(h)
  # A record whose op changed (its hash recomputed, so the chain holds): replay stops at
  # that line and step.
  bad_records = list(records)
  bad_records[4] = dataclasses.replace(records[4], op=H.RubricReweight("t0", "c0", 21.0))
  with pytest.raises(HarnessError, match=r"history:5 \(step 4, rubric_reweight\).*digest_after"):
    H.replay(h0, bad_records)
  # Replaying from the wrong H_0 fails on the first record.
  with pytest.raises(HarnessError, match=r"history:1 .*digest_before"):
    H.replay(H.apply(h0, H.SamplingLevelDown("t0")), records)
  lines = (tmp_path / "history.jsonl").read_text(encoding="utf-8").splitlines()
  bad = tmp_path / "bad.jsonl"
  bad.write_text(lines[0] + "\n{not json\n", encoding="utf-8")
  with pytest.raises(DataError, match="bad.jsonl:2"):
    H.read_history(bad)


# ---- the hash chain (harness/history.py's docstring)


def logged_history(path):
  """(H_0, records) of OPS logged to `path` with measurements like the evolver's."""
  h0 = H.from_tasks(tasks())
  log = H.HistoryLog(path)
  h, records = h0, []
  for step, op in enumerate(OPS):
    h, rec = H.apply_logged(h, op, step=step, log=log, measurement={
        "candidate": "rubric", "route": "rubric", "criterion_id": "c0",
        "label": {"criterion_id": "c0", "label": "spurious", "confidence": 0.9,
                  "evidence": ["quoted"]},
        "critic": {"delta": 0.25 * step, "band": [0.1, 0.4], "reasons": ["(i) sign: Δ > 0"]}})
    records.append(rec)
  return h0, records


def test_the_chain_is_recomputable_from_the_lines_alone(tmp_path):
  path = tmp_path / "history.jsonl"
  _, records = logged_history(path)
  prev = "0" * 64
  for line, rec in zip(path.read_text(encoding="utf-8").splitlines(), records):
    obj = json.loads(line)
    body = {k: v for k, v in obj.items() if k != "hash"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)
    assert obj["prev"] == prev == rec.prev
    assert obj["hash"] == hashlib.sha256(text.encode("utf-8")).hexdigest() == rec.hash
    # The hashed text is the line itself without its hash member.
    assert line.replace(f'"hash":"{obj["hash"]}",', "") == text
    prev = obj["hash"]
  assert [r.hash for r in H.read_history(path)] == [r.hash for r in records]
  assert "Δ > 0" in path.read_text(encoding="utf-8")   # UTF-8 text, not escaped


def _edit(obj, where):
  """Changes one field of a record object, named by a path of keys ("op" alone: the op's
  first field after its kind)."""
  if where == ("op",):
    where = ("op", sorted(k for k in obj["op"] if k != "op")[0])
  *parents, last = where
  for k in parents:
    obj = obj[k]
  v = obj[last]
  if isinstance(v, list):
    obj, last, v = v, 0, v[0]
  obj[last] = (v + 1 if isinstance(v, int) else v + 0.5 if isinstance(v, float)
               else v[:-1] + ("0" if v[-1] != "0" else "1"))


EDITS = [("step",), ("op",), ("op", "op"), ("digest_before",), ("digest_after",),
         ("measurement", "route"), ("measurement", "label", "label"),
         ("measurement", "label", "confidence"), ("measurement", "label", "evidence"),
         ("measurement", "critic", "delta"), ("prev",), ("hash",)]


@pytest.mark.parametrize("where", EDITS, ids=".".join)
@pytest.mark.parametrize("line", [0, 2, len(OPS) - 1], ids=["first", "middle", "last"])
def test_editing_any_field_of_any_record_breaks_the_chain_there(tmp_path, where, line):
  path = tmp_path / "history.jsonl"
  logged_history(path)
  lines = path.read_text(encoding="utf-8").splitlines()
  obj = json.loads(lines[line])
  _edit(obj, where)
  lines[line] = json.dumps(obj, ensure_ascii=False)
  path.write_text("\n".join(lines) + "\n", encoding="utf-8")
  with pytest.raises(BrokenHistory, match=f"history.jsonl:{line + 1}: ") as e:
    H.read_history(path)
  assert e.value.line == line + 1


@pytest.mark.parametrize("change, first_bad", [
    (lambda ls: ls[1:], 1),                               # first line deleted
    (lambda ls: ls[:2] + ls[3:], 3),                      # a middle line deleted
    (lambda ls: ls[:1] + [ls[2], ls[1]] + ls[3:], 2),     # two lines swapped
    (lambda ls: ls[:2] + [ls[1]] + ls[2:], 3),            # a line repeated
], ids=["delete-first", "delete-middle", "swap", "repeat"])
def test_deleting_or_reordering_lines_breaks_the_chain(tmp_path, change, first_bad):
  path = tmp_path / "history.jsonl"
  logged_history(path)
  lines = path.read_text(encoding="utf-8").splitlines()
  path.write_text("\n".join(change(lines)) + "\n", encoding="utf-8")
  with pytest.raises(BrokenHistory, match="deleted, inserted or moved") as e:
    H.read_history(path)
  assert e.value.line == first_bad


def test_unchained_or_doubled_key_lines_are_refused(tmp_path):
  path = tmp_path / "history.jsonl"
  logged_history(path)
  lines = path.read_text(encoding="utf-8").splitlines()
  obj = json.loads(lines[0])
  del obj["hash"], obj["prev"]   # a record without its chain fields parses, but is refused
  assert H.HistoryRecord.from_json(obj).hash is None
  path.write_text(json.dumps(obj) + "\n" + "\n".join(lines[1:]) + "\n", encoding="utf-8")
  with pytest.raises(BrokenHistory, match=r"history.jsonl:1: .*no hash"):
    H.read_history(path)
  # A second "step" key that json.loads would silently let win: refused, not hashed.
  doubled = lines[0][:-1] + ',"step":7}'
  path.write_text(doubled + "\n" + "\n".join(lines[1:]) + "\n", encoding="utf-8")
  with pytest.raises(BrokenHistory, match="history.jsonl:1: .*twice"):
    H.read_history(path)


def test_a_cut_history_keeps_a_valid_chain_ending_at_its_head(tmp_path):
  path = tmp_path / "history.jsonl"
  h0, records = logged_history(path)
  lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
  for n in range(len(lines) + 1):
    path.write_text("".join(lines[:n]), encoding="utf-8")
    got = H.read_history(path)
    assert head_of(got) == (records[n - 1].hash if n else GENESIS)
  # Appending after a cut continues the chain from the head the log is reset to.
  path.write_text("".join(lines[:3]), encoding="utf-8")
  log = H.HistoryLog(path)
  log.reset(records[2].hash)
  h = H.replay(h0, H.read_history(path))
  H.apply_logged(h, OPS[3], step=3, log=log, measurement=records[3].to_json()["measurement"])
  assert H.read_history(path)[3].hash == records[3].hash
  # A log that does not write (processes other than 0) chains alike.
  quiet = H.HistoryLog(tmp_path / "never.jsonl", write=False)
  _, rec = H.apply_logged(h0, OPS[0], step=0, log=quiet,
                          measurement=records[0].to_json()["measurement"])
  assert rec.hash == records[0].hash == quiet.head
  assert not (tmp_path / "never.jsonl").exists()


def test_measurement_must_be_plain_json():
  with pytest.raises(HarnessError, match="not plain JSON"):
    H.apply_logged(H.from_tasks(tasks()), H.SamplingLevelDown("t0"), step=0,
                   measurement={"delta": float("nan")})


def test_a_check_is_state_in_the_digest_and_replays(tmp_path):
  words = Check("word_count", FrozenMap({"min": 30}))
  distinct = Check("distinct_sentence_word_count", FrozenMap({"min": 30}))
  h0 = H.from_tasks(tasks())
  plain = H.apply(h0, H.RubricCreate("t0", "n0", "long", 40.0))
  checked = H.apply(h0, H.RubricCreate("t0", "n0", "long", 40.0, check=words))
  assert H.canonical(checked)["tasks"][0]["criteria"][3]["check"] == {"type": "word_count",
                                                                       "min": 30}
  # Same text, another check: another digest (and text alone keeps the check's digest).
  swapped = H.apply(checked, H.RubricRewrite("t0", "n0", "long", distinct))
  assert len({H.digest(plain), H.digest(checked), H.digest(swapped)}) == 3
  ops = [H.RubricCreate("t0", "n0", "long", 40.0, check=words),
         H.RubricRewrite("t0", "n0", "long; repeats count once", distinct),
         H.RubricRewrite("t0", "n0", "long, repeats counted once")]
  log = H.HistoryLog(tmp_path / "history.jsonl")
  h = h0
  for step, op in enumerate(ops):
    h, _ = H.apply_logged(h, op, step=step, log=log)
  records = H.read_history(tmp_path / "history.jsonl")
  assert [r.op for r in records] == ops
  assert H.digest(H.replay(h0, records)) == H.digest(h)
  assert h.criteria("t0")[3].check == distinct
