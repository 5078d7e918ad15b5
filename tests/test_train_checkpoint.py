"""RunCheckpoints keeps the latest N plus the best held-out step, round-trips its trees,
the run key and memory directories; the workdir's config guard."""

import types

import jax
import numpy as np
import pytest

from harnessrl_jax.checkpoint import (RunCheckpoints, guard_config, restore_target,
                                      run_key_of, state_tree)
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


def test_config_guard(tmp_path):
  from configs.tiny import get_config  # pylint: disable=g-import-not-at-top
  c = get_config()
  assert guard_config(c, str(tmp_path)) is False     # first use: written
  assert guard_config(get_config(), str(tmp_path)) is True
  c2 = get_config()
  c2.rollout.num_samples = 2
  with pytest.raises(ConfigError, match=r"rollout\.num_samples: 4 -> 2.*new --workdir"):
    guard_config(c2, str(tmp_path))


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
