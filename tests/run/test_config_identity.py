"""The split of the config into experiment and operational fields: the operational ones
exist, docs/operational.md shows the same table, and only the experiment part
moves the digest; a run recorded with fields that have since left the tree still loads."""

import json
import os
import re

import pytest

from harnessrl_jax import run_files
from harnessrl_jax.config import base_config, validate
from harnessrl_jax.errors import ConfigError
from harnessrl_jax.eval.evaluate import load_run_config
from harnessrl_jax.run import checkpoint
from harnessrl_jax.run import identity as ci
from repo_paths import REPO



def leaves():
  return set(ci.flat(ci.config_tree(base_config())))


def test_operational_fields_exist_and_retired_ones_are_gone():
  fields = leaves()   # every other field is an experiment field
  assert set(ci.OPERATIONAL) - fields == set(), "no such fields"
  assert set(ci.RETIRED) & fields == set(), "a retired field is back in the tree"
  assert set(ci.ADDED) - fields == set(), "an added field has left the tree: retire it"
  assert set(ci.ADDED) & set(ci.OPERATIONAL) == set(), "operational: no need to list it"


def test_docs_show_the_operational_table():
  with open(os.path.join(REPO, "docs", "operational.md"), encoding="utf-8") as f:
    text = f.read()
  # the table under its header row (the page has other tables)
  table = text.split("| field | why it may change on resume |", 1)[1].split("\n\n", 1)[0]
  rows = re.findall(r"^\| `([\w.]+)` \| (.+) \|$", table, flags=re.M)
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


def _recorded_before_retirements(config):
  """The config.json tree a run of `config` wrote before rl.temperature and
  evolver.async_evolver left the tree."""
  tree = ci.config_tree(config)
  tree["rl"]["temperature"] = tree["rollout"]["temperature"]
  tree["evolver"]["async_evolver"] = False
  return tree


def test_a_run_recorded_with_retired_fields_still_loads(tmp_path, monkeypatch):
  c = base_config()
  c.rollout.temperature = 0.7
  old = _recorded_before_retirements(c)
  assert ci.differences(old, ci.config_tree(c)) == ()
  assert ci.as_current_tree(old) == ci.config_tree(c)
  # The evaluator's reader, and the resume guard and recorder of a workdir with a checkpoint.
  (tmp_path / run_files.CONFIG).write_text(json.dumps(
      {run_files.EXPERIMENT_SHA256: "recorded", run_files.CONFIG_TREE: old}))
  loaded = load_run_config(str(tmp_path))
  validate(loaded)
  assert "temperature" not in loaded.rl and loaded.rollout.temperature == 0.7
  monkeypatch.setattr(checkpoint, "has_checkpoint", lambda workdir: True)
  checkpoint.guard_config(c, str(tmp_path))
  assert checkpoint.record_config(c, str(tmp_path), resumed_at=3) == []
  changes = tmp_path / run_files.CONFIG_CHANGES
  assert not changes.exists() or not changes.read_text()   # nothing changed
  assert "temperature" not in json.loads(
      (tmp_path / run_files.CONFIG).read_text())[run_files.CONFIG_TREE]["rl"]


def test_a_retired_field_that_meant_another_run_is_refused():
  c = base_config()
  old = _recorded_before_retirements(c)
  old["rl"]["temperature"] = 0.7     # scored at 0.7, sampled at 1.0: not expressible now
  old["evolver"]["async_evolver"] = True
  with pytest.raises(ConfigError) as e:
    ci.differences(old, ci.config_tree(c))
  lines = str(e.value).splitlines()
  assert [l.split(":")[0] for l in lines] == ["recorded config.rl.temperature = 0.7",
                                              "recorded config.evolver.async_evolver = True"]


def _recorded_before_additions(config):
  """The config.json tree a run of `config` wrote before the `ADDED` fields existed."""
  tree = ci.config_tree(config)
  for path in ci.ADDED:
    section, name = path.split(".")
    del tree[section][name]
  return tree


def test_added_fields_are_filled_with_todays_defaults():
  # so a run recorded before them resumes under the defaults, which reproduce it
  tree = ci.config_tree(base_config())
  now = ci.flat(tree)
  assert dict(ci.ADDED) == {p: now[p] for p in ci.ADDED}
  assert ci.as_current_tree(_recorded_before_additions(base_config())) == tree


def test_a_run_recorded_before_a_field_was_added_resumes(tmp_path, monkeypatch):
  c = base_config()
  c.rollout.temperature = 0.7
  old = _recorded_before_additions(c)
  assert ci.differences(old, ci.config_tree(c)) == ()
  (tmp_path / run_files.CONFIG).write_text(json.dumps(
      {run_files.EXPERIMENT_SHA256: "recorded", run_files.CONFIG_TREE: old}))
  loaded = load_run_config(str(tmp_path))
  assert loaded.evolver.accept_test == "band" and not loaded.evolver.guidance_own_memory
  monkeypatch.setattr(checkpoint, "has_checkpoint", lambda workdir: True)
  checkpoint.guard_config(c, str(tmp_path))
  assert checkpoint.record_config(c, str(tmp_path), resumed_at=3) == []
  # The new option at another value is another experiment, refused like any change.
  c.evolver.accept_test = "ttest"
  with pytest.raises(ConfigError, match=r"evolver.accept_test: 'band' -> 'ttest'"):
    checkpoint.guard_config(c, str(tmp_path))


def test_a_new_field_not_listed_as_added_still_reads_as_a_change():
  tree = ci.config_tree(base_config())
  del tree["evolver"]["intervention_flip_share"]
  assert [c.field for c in ci.differences(tree, ci.config_tree(base_config()))] == [
      "evolver.intervention_flip_share"]
