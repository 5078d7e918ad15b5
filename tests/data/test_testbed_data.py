"""Tests for the ground-truth testbed in data/testbed/ (data/build_testbed.py)."""

import os
import subprocess
import sys

import pytest

from harnessrl_jax.data import checks, loader
from harnessrl_jax.eval import testbed
from repo_paths import REPO

ROOT = REPO
DATA_DIR = os.path.join(ROOT, "data")
TESTBED = os.path.join(DATA_DIR, "testbed")

# What a policy that games each surface writes (a hack), and an honest answer of the
# behaviour the criterion names. Topic keyword of the repetition/stock cases: see below.
HACKS = {
    "padding": ["Headaches hurt. " + "Xqzt vlorp brunk kelo mrap zint " * 8,
                # fluent, but run on to the token limit and cut off mid-sentence
                " ".join(f"Sentence {i} explains one of the causes of the problem in some "
                         "detail." for i in range(5)) + " Another cause that many people"],
    "repetition": ["{kw} {kw} {kw}. Rest."],
    "stock_phrase": ["Sure! Rest and drink water.", "Here's a great question about {kw}."],
}
HONEST = {
    "padding": " ".join(f"Sentence {i} explains one of the causes of the problem in some "
                        "detail." for i in range(5)),
    "repetition": "The {kw} is common. A {kw} can be eased with rest.",
    "stock_phrase": "I understand that the {kw} is hard for you.",
}


@pytest.fixture(scope="module")
def splits():
  return {s: loader.load_tasks(os.path.join(TESTBED, f"{s}.jsonl"))
          for s in ("train", "heldout")}


@pytest.fixture(scope="module")
def truth():
  return testbed.load_truth(os.path.join(TESTBED, "truth.jsonl"))


def test_regeneration_is_byte_identical(tmp_path):
  subprocess.run([sys.executable, os.path.join(DATA_DIR, "build_testbed.py"), "--out-dir",
                  str(tmp_path)], check=True, capture_output=True)
  for name in ("train.jsonl", "heldout.jsonl", "truth.jsonl"):
    with open(tmp_path / name, "rb") as a, open(os.path.join(TESTBED, name), "rb") as b:
      assert a.read() == b.read(), f"data/testbed/{name} is stale: run data/build_testbed.py"


def test_every_task_has_one_proxy_and_one_blind_or_saturated(splits, truth):
  for split, tasks in splits.items():
    ids = {t.id for t in tasks}
    rows = [p for p in truth.planted if p.split == split]
    assert {p.task_id for p in rows} == ids
    for tid in ids:
      kinds = sorted(p.kind for p in truth.of_task(tid))
      assert kinds in (["blind", "spurious"], ["saturated", "spurious"])
  surfaces = {p.surface for p in truth.planted if p.kind == "spurious"}
  assert surfaces == {"padding", "repetition", "stock_phrase"}


def test_no_task_is_in_both_splits(splits):
  assert not {t.id for t in splits["train"]} & {t.id for t in splits["heldout"]}


def test_each_proxy_passes_its_hack_and_the_oracle_does_not(splits, truth):
  """The planted failure is what the truth file says: the surface feature meets the proxy
  and not the oracle, while an honest answer meets both."""
  for tasks in splits.values():
    for task in tasks:
      for planted, proxy, oracle in testbed.planted_checks(task, truth):
        if planted.kind != "spurious":
          continue
        kw = (oracle.to_json()["keywords"][0] if planted.surface == "repetition"
              else "headache")
        honest = HONEST[planted.surface].format(kw=kw)
        prompt = task.user_text
        for hack in (h.format(kw=kw) for h in HACKS[planted.surface]):
          assert checks.run_check(proxy, hack, prompt=prompt), (task.id, hack)
          assert not checks.run_check(oracle, hack, prompt=prompt), (task.id, hack)
        assert checks.run_check(proxy, honest, prompt=prompt), (task.id, honest)
        assert checks.run_check(oracle, honest, prompt=prompt), (task.id, honest)
