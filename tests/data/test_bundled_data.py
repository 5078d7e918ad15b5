"""Tests for the bundled task set in data/ (train.jsonl, heldout.jsonl, build_bundled.py)."""

import collections
import os
import re
import subprocess
import sys

import pytest

from harnessrl_jax.data import checks, loader
from harnessrl_jax.data.schema import DOMAINS
from repo_paths import REPO

DATA_DIR = os.path.join(REPO, "data")
TRAIN = os.path.join(DATA_DIR, "train.jsonl")
HELDOUT = os.path.join(DATA_DIR, "heldout.jsonl")


@pytest.fixture(scope="module")
def train():
  return loader.load_tasks(TRAIN)


@pytest.fixture(scope="module")
def heldout():
  return loader.load_tasks(HELDOUT)


def _by_domain(tasks):
  out = collections.defaultdict(list)
  for t in tasks:
    out[t.domain].append(t)
  return out


def test_counts_per_domain(train, heldout):
  tr, he = _by_domain(train), _by_domain(heldout)
  assert set(tr) == set(DOMAINS) and set(he) == set(DOMAINS)
  for d in DOMAINS:
    assert len(tr[d]) >= 40, d
    assert len(he[d]) >= 10, d
  assert len(train) >= 200 and len(heldout) >= 50


def test_task_shape(train, heldout):
  for split, tasks in (("train", train), ("heldout", heldout)):
    for t in tasks:
      assert re.fullmatch(rf"[a-z]{{3}}-{split}-\d{{3}}", t.id), t.id
      assert 3 <= len(t.criteria) <= 6, t.id
      assert len({c.id for c in t.criteria}) == len(t.criteria), t.id
      assert all(c.anchor for c in t.criteria), t.id
      assert any(c.weight > 0 for c in t.criteria), t.id
      for c in t.criteria:
        assert 1 <= c.weight <= 10 or -10 <= c.weight <= -3, (t.id, c.id, c.weight)
      # The default run's prompt budget is ~128 tokens with the chat template; 75 words
      # of prompt stays well inside it (calibrate_bundled.py measured max 87 tokens).
      n_words = sum(len(re.findall(r"\b[\w'-]+\b", m.content)) for m in t.prompt)
      assert n_words <= 75, (t.id, n_words)


def test_every_domain_has_penalties_and_a_mix_of_criteria(train, heldout):
  for tasks in (train, heldout):
    for d, ts in _by_domain(tasks).items():
      crits = [c for t in ts for c in t.criteria]
      assert any(c.weight < 0 for c in crits), d
      assert any(c.weight < 0 and c.check is not None for c in crits), d
      assert any(c.check is None for c in crits), d
      share = sum(c.check is not None for c in crits) / len(crits)
      assert 0.4 <= share <= 0.9, (d, share)
      # Most tasks carry at least two positive program checks.
      two = sum(sum(c.check is not None and c.weight > 0 for c in t.criteria) >= 2
                for t in ts)
      assert two >= 0.7 * len(ts), (d, two, len(ts))


def test_program_check_share_overall(train, heldout):
  crits = [c for t in train + heldout for c in t.criteria]
  share = sum(c.check is not None for c in crits) / len(crits)
  assert 0.4 <= share <= 0.9, share


def test_reference_answer_share(train, heldout):
  for tasks in (train, heldout, train + heldout):
    share = sum(t.reference_answer is not None for t in tasks) / len(tasks)
    assert 0.25 <= share <= 0.45, share


def test_reference_answers_meet_their_own_checks(train, heldout):
  n = 0
  for t in train + heldout:
    if t.reference_answer is None:
      continue
    for c in t.criteria:
      if c.check is None:
        continue
      met = checks.run_check(c.check, t.reference_answer, prompt=t.user_text)
      # A reference meets every positive check and triggers no penalty.
      assert met == (c.weight > 0), (t.id, c.id, c.text, t.reference_answer)
      n += 1
  assert n > 200


def test_no_leak_between_train_and_heldout(train, heldout):
  assert not {t.id for t in train} & {t.id for t in heldout}
  train_prompts = {tuple((m.role, m.content) for m in t.prompt) for t in train}
  train_users = {t.user_text.strip().lower() for t in train}
  train_topics = {(t.domain, t.meta["topic"]) for t in train}
  for t in heldout:
    assert tuple((m.role, m.content) for m in t.prompt) not in train_prompts, t.id
    assert t.user_text.strip().lower() not in train_users, t.id
    # Held-out tasks come from topics never used in training (not paraphrases).
    assert (t.domain, t.meta["topic"]) not in train_topics, t.id
  assert loader.validate_files([TRAIN, HELDOUT])[1] == []  # ids unique across both files


def test_prompts_are_varied(train):
  for d, ts in _by_domain(train).items():
    users = [t.user_text for t in ts]
    assert len(set(users)) == len(users), d
    topics = [t.meta["topic"] for t in ts]
    assert len(set(topics)) == len(topics), d


def test_regeneration_is_byte_identical(tmp_path):
  # Run as a user would, in a fresh interpreter, so no state leaks in from the test process.
  subprocess.run([sys.executable, os.path.join(DATA_DIR, "build_bundled.py"), "--out-dir",
                  str(tmp_path)], check=True, capture_output=True)
  for name in ("train.jsonl", "heldout.jsonl"):
    with open(os.path.join(DATA_DIR, name), "rb") as f:
      committed = f.read()
    with open(tmp_path / name, "rb") as f:
      regenerated = f.read()
    assert regenerated == committed, f"data/{name} is stale: run python data/build_bundled.py"
