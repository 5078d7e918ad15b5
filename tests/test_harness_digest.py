"""Digest stability and the history log: same harness -> same digest, any change -> new
digest, across processes and hash seeds; a logged history replays to every digest."""

import hashlib
import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

import harnessrl_jax.harness as H
from harnessrl_jax.data.schema import Criterion, Message, Task
from harnessrl_jax.errors import DataError, HarnessError

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
import sys; sys.path.insert(0, {repo!r})
import harnessrl_jax.harness as H
from tests.test_harness_digest import tasks, OPS
h = H.apply_all(H.from_tasks(tasks()), OPS)
print(H.digest(h))
"""


def test_digest_is_identical_across_processes_and_hash_seeds():
  h = H.apply_all(H.from_tasks(tasks()), OPS)
  got = set()
  for seed in ("0", "1", "12345"):
    env = dict(os.environ, PYTHONHASHSEED=seed, JAX_PLATFORMS="cpu")
    out = subprocess.run([sys.executable, "-c", _CHILD.format(repo=REPO)], env=env,
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
  # Tamper with one record's op: replay stops at that line and step.
  lines = (tmp_path / "history.jsonl").read_text().splitlines()
  obj = json.loads(lines[4])
  obj["op"]["weight"] = -21.0
  lines[4] = json.dumps(obj)
  bad = tmp_path / "bad.jsonl"
  bad.write_text("\n".join(lines) + "\n")
  with pytest.raises(HarnessError, match=r"history:5 \(step 4, rubric_reweight\).*digest_after"):
    H.replay(h0, H.read_history(bad))
  # Replaying from the wrong H_0 fails on the first record.
  with pytest.raises(HarnessError, match=r"history:1 .*digest_before"):
    H.replay(H.apply(h0, H.SamplingLevelDown("t0")), records)
  bad.write_text(lines[0] + "\n{not json\n")
  with pytest.raises(DataError, match="bad.jsonl:2"):
    H.read_history(bad)


def test_measurement_must_be_plain_json():
  with pytest.raises(HarnessError, match="not plain JSON"):
    H.apply_logged(H.from_tasks(tasks()), H.SamplingLevelDown("t0"), step=0,
                   measurement={"delta": float("nan")})
