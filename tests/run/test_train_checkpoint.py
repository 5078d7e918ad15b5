"""RunCheckpoints keeps the latest N plus the best held-out step, round-trips its trees,
the run key and memory directories; the workdir's config guard (another experiment is
refused once there is a checkpoint) and record (operational changes logged with the step)."""

import json
import types

import jax
import numpy as np
import pytest

from harnessrl_jax.run.checkpoint import (RunCheckpoints, guard_config, record_config,
                                      restore_target, run_key_of, state_tree)
from harnessrl_jax.run.identity import config_tree, experiment_digest
from harnessrl_jax.errors import ConfigError


class FakeMemory:
  """Writes one file, like Memory.save writes its directory."""

  def __init__(self, text):
    self.text = text

  def save(self, path):
    import os  # pylint: disable=g-import-not-at-top
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "meta.json"), "w", encoding="utf-8") as f:
      f.write(self.text)


def test_keeps_latest_and_best(tmp_path):
  ck = RunCheckpoints(str(tmp_path), keep=1)
  rewards = {1: None, 2: 0.9, 3: None, 4: 0.2, 5: None}
  for step, r in rewards.items():
    ck.save(step, {"w": np.full(3, step, np.float32)}, {"step": step},
            memory=FakeMemory(str(step)), heldout_reward=r)
  assert ck.steps() == [2, 5]          # best held-out (0.9 at 2) + the latest
  assert ck.best() == 2
  assert sorted(p.name for p in (tmp_path / "memory").iterdir()) == ["2", "5"]
  tree, meta = ck.restore(2, {"w": np.zeros(3, np.float32)})
  np.testing.assert_array_equal(np.asarray(tree["w"]), np.full(3, 2, np.float32))
  assert meta == {"step": 2}
  assert (tmp_path / "memory" / "2" / "meta.json").read_text() == "2"
  ck.close()
  # A fresh manager on the same directory sees the same complete checkpoints.
  again = RunCheckpoints(str(tmp_path), keep=1)
  assert again.latest() == 5
  again.close()


def test_half_written_checkpoint_is_ignored(tmp_path):
  ck = RunCheckpoints(str(tmp_path), keep=2)
  ck.save(1, {"w": np.ones(2, np.float32)}, {"step": 1})
  ck.close()
  junk = tmp_path / "checkpoints" / "2.orbax-checkpoint-tmp" / "state"
  junk.mkdir(parents=True)
  (junk / "x").write_bytes(b"\0")
  again = RunCheckpoints(str(tmp_path), keep=2)
  assert again.latest() == 1
  again.close()


def tiny():
  from configs.tiny import get_config  # pylint: disable=g-import-not-at-top
  return get_config()


def read_json(path):
  with open(path, encoding="utf-8") as f:
    return json.load(f)


def read_jsonl(path):
  with open(path, encoding="utf-8") as f:
    return [json.loads(line) for line in f]


def test_config_guard_refuses_another_experiment_once_there_is_a_checkpoint(tmp_path):
  run = tmp_path / "run"
  guard_config(tiny(), str(run))                      # reads only
  assert not run.exists()
  assert record_config(tiny(), str(run), resumed_at=None) == []
  stored = read_json(run / "config.json")
  assert stored["experiment_sha256"] == experiment_digest(config_tree(tiny()))
  assert stored["config"] == config_tree(tiny())
  other = tiny()
  other.rollout.num_samples = 2
  guard_config(other, str(run))   # no checkpoint yet: nothing to protect
  ck = RunCheckpoints(str(run))
  ck.save(1, {"w": np.ones(2, np.float32)}, {"step": 1})
  ck.close()
  with pytest.raises(ConfigError, match=r"another experiment.*rollout\.num_samples: 4 -> 2"
                                        r".*new --workdir"):
    guard_config(other, str(run))
  moved = tiny()
  moved.judge.openai.base_url = "http://127.0.0.1:9/v1"
  guard_config(moved, str(run))   # operational: accepted


def test_start_without_checkpoint_replaces_the_config(tmp_path):
  run = tmp_path / "run"
  record_config(tiny(), str(run), resumed_at=None)
  (run / "config_changes.jsonl").write_text('{"step": 0}\n')   # an earlier attempt's
  other = tiny()
  other.rl.learning_rate = 0.5
  lines = record_config(other, str(run), resumed_at=None)
  assert len(lines) == 1 and "replaced" in lines[0] and "rl.learning_rate: 0.001 -> 0.5" in lines[0]
  assert read_json(run / "config.json")["config"]["rl"]["learning_rate"] == 0.5
  assert not (run / "config_changes.jsonl").exists()


def test_resume_records_each_changed_operational_field(tmp_path):
  run = tmp_path / "run"
  record_config(tiny(), str(run), resumed_at=None)
  digest = read_json(run / "config.json")["experiment_sha256"]
  changed = tiny()
  changed.judge.openai.base_url = "http://127.0.0.1:9/v1"
  changed.judge.max_unscored_share = 0.5
  lines = record_config(changed, str(run), resumed_at=3)
  assert lines == [
      "config.judge.max_unscored_share: 0.1 -> 0.5 from step 3 on (operational; "
      "config_changes.jsonl)",
      "config.judge.openai.base_url: 'http://127.0.0.1:8000/v1' -> 'http://127.0.0.1:9/v1' "
      "from step 3 on (operational; config_changes.jsonl)"]
  assert read_jsonl(run / "config_changes.jsonl") == [
      {"step": 3, "field": "judge.max_unscored_share", "old": 0.1, "new": 0.5},
      {"step": 3, "field": "judge.openai.base_url", "old": "http://127.0.0.1:8000/v1",
       "new": "http://127.0.0.1:9/v1"}]
  stored = read_json(run / "config.json")
  assert stored["experiment_sha256"] == digest
  assert stored["config"] == config_tree(changed)
  assert record_config(changed, str(run), resumed_at=5) == []   # nothing changed since
  # A resume to an earlier checkpoint drops the rows of later steps, keeps its own step's.
  later = tiny()
  later.judge.timeout_s = 30.0
  record_config(later, str(run), resumed_at=2)
  assert [(r["step"], r["field"]) for r in read_jsonl(run / "config_changes.jsonl")] == [
      (2, "judge.max_unscored_share"), (2, "judge.openai.base_url"), (2, "judge.timeout_s")]


def test_unreadable_stored_config_is_refused(tmp_path):
  (tmp_path / "config.json").write_text("{not json")
  with pytest.raises(ConfigError, match=r"config\.json: cannot read"):
    guard_config(tiny(), str(tmp_path))


def test_run_key_round_trips_as_numpy(tmp_path):
  key = jax.random.fold_in(jax.random.key(7), 3)
  state = types.SimpleNamespace(params={"w": jax.numpy.arange(3.0)}, opt_state=(),
                                step=jax.numpy.asarray(5), skipped_steps=jax.numpy.asarray(0))
  tree = state_tree(state, key)
  # Orbax refuses host-local jax.Arrays on several processes: the key must be NumPy.
  assert isinstance(tree["key"], np.ndarray)
  ck = RunCheckpoints(str(tmp_path))
  ck.save(1, tree, {"step": 1})
  restored, _ = ck.restore(1, restore_target(state_tree(state, jax.random.key(0))))
  ck.close()
  assert isinstance(restored["key"], np.ndarray)
  back = run_key_of(restored)
  np.testing.assert_array_equal(jax.random.key_data(back), jax.random.key_data(key))
  np.testing.assert_array_equal(jax.random.uniform(back, (4,)), jax.random.uniform(key, (4,)))
  np.testing.assert_array_equal(np.asarray(restored["params"]["w"]), [0.0, 1.0, 2.0])
