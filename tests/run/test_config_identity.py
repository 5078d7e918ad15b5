"""The split of the config into experiment and operational fields: every field is in
exactly one part, docs/operational.md shows the same table, and only the experiment part
moves the digest."""

import os
import re

from harnessrl_jax.run import identity as ci
from harnessrl_jax.config import base_config
from repo_paths import REPO



def leaves():
  return set(ci.flat(ci.config_tree(base_config())))


def test_every_field_is_classified_exactly_once():
  fields, operational = leaves(), set(ci.OPERATIONAL)
  assert not operational & ci.EXPERIMENT, operational & ci.EXPERIMENT
  assert fields - operational - ci.EXPERIMENT == set(), "classify these fields"
  assert (operational | ci.EXPERIMENT) - fields == set(), "no such fields"


def test_docs_show_the_operational_table():
  with open(os.path.join(REPO, "docs", "operational.md"), encoding="utf-8") as f:
    rows = re.findall(r"^\| `([\w.]+)` \| (.+) \|$", f.read(), flags=re.M)
  assert dict(rows) == dict(ci.OPERATIONAL)
  assert len(rows) == len(ci.OPERATIONAL)   # each once


def test_only_experiment_fields_move_the_digest():
  c = base_config()
  digest = ci.experiment_digest(ci.config_tree(c))
  c.judge.openai.base_url = "http://elsewhere:8000/v1"
  c.judge.max_unscored_share = 0.5
  c.train.eval_every = 3
  assert ci.experiment_digest(ci.config_tree(c)) == digest
  c.train.steps = 11
  assert ci.experiment_digest(ci.config_tree(c)) != digest


def test_differences_name_each_field_and_its_part():
  a, b = base_config(), base_config()
  b.judge.timeout_s = 300.0
  b.rollout.prompt_buckets = (32,)
  got = ci.differences(ci.config_tree(a), ci.config_tree(b))
  assert [(c.field, c.old, c.new, c.operational) for c in got] == [
      ("judge.timeout_s", 120.0, 300.0, True),
      ("rollout.prompt_buckets", [64, 128, 256, 512], [32], False)]
  assert ci.shown(got, limit=1) == "judge.timeout_s: 120.0 -> 300.0 ..."
  # A field the stored config lacks (written before the field existed) differs from None.
  tree = ci.config_tree(a)
  del tree["judge"]["cache_size"]
  assert [str(c) for c in ci.differences(tree, ci.config_tree(a))] == [
      "judge.cache_size: None -> 200000"]
