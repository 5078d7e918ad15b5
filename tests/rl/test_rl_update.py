"""Old log-probs and epochs, ratio/KL identity in the step, batch building, mesh config."""

import jax
import ml_collections
import numpy as np
import pytest
from flax import nnx

from harnessrl_jax.errors import ConfigError
from harnessrl_jax.models.architecture import ModelConfig
from harnessrl_jax.models.decoder import Decoder
from harnessrl_jax.rl import mesh as rl_mesh
from harnessrl_jax.rl import train_step as ts
from harnessrl_jax.rl.batch import build_batch
from harnessrl_jax.rl.config import rl_defaults
from tests.rl.test_rl_train_step import V, _batch, _rl


@pytest.fixture(scope="module")
def model():
  graphdef, params = nnx.split(Decoder(ModelConfig.tiny(vocab_size=V, num_layers=1),
                                       rngs=nnx.Rngs(0)))
  return graphdef, params, None


def test_identical_policies_give_ratio_one_and_zero_kl(model):
  graphdef, params, _ = model
  rl = _rl()
  fwd = ts.decoder_forward(graphdef)
  cfg = ts.StepConfig.from_config(rl, temperature=1.0)
  tx, step = ts.build_step(fwd, rl, temperature=1.0, donate=False)
  state, _ = rl_mesh.init_state(params, tx, None, ref_params=params)  # ref == policy
  logprob_fn = ts.make_logprob_fn(fwd, cfg)
  batch = rl_mesh.shard_batch(_batch(2).replace(old_logprobs=None), None)
  old = logprob_fn(params, batch)
  want = ts.response_logprobs(fwd, params, batch, chunk=64, temperature=1.0)[0]
  np.testing.assert_allclose(old, want, rtol=1e-6, atol=1e-6)  # micro-batch order undone
  _, metrics = step(state, batch.replace(old_logprobs=old))
  assert abs(float(metrics["kl"])) < 1e-6
  np.testing.assert_allclose(metrics["ratio"], 1.0, atol=1e-6)
  assert float(metrics["clip_frac"]) == 0.0
  # Two epochs: old log-probs recomputed; the first update sees ratio 1, the second does not.
  _, hist = ts.update_on_batch(step, logprob_fn, state, batch, num_epochs=2)
  assert abs(hist[0]["ratio"] - 1.0) < 1e-6 and abs(hist[1]["ratio"] - 1.0) > 1e-6
  assert hist[0]["tokens_per_s"] > 0


def test_build_batch_from_rollout_fields():
  class Rollout:  # the fields of rollout.sampler.RolloutBatch
    prompt_tokens = np.array([[0, 7, 8], [5, 6, 7]], np.int32)
    prompt_mask = np.array([[False, True, True], [True, True, True]])
    response_tokens = np.array([[1, 2], [3, 0]], np.int32)
    response_mask = np.array([[True, True], [True, False]])
    logprobs = np.array([[-1.0, -2.0], [-0.5, 0.0]], np.float32)

  batch = build_batch(Rollout, rewards=[1.0, 0.0], group_id=[0, 0], task_prob=[0.25, 0.25],
                      num_tasks=8)
  np.testing.assert_array_equal(batch.tokens, [[0, 7, 8, 1, 2], [5, 6, 7, 3, 0]])
  np.testing.assert_array_equal(batch.positions, [[0, 0, 1, 2, 3], [0, 1, 2, 3, 3]])
  np.testing.assert_array_equal(batch.loss_mask, [[1, 1], [1, 0]])
  np.testing.assert_allclose(batch.advantages, [1.0, -1.0], rtol=1e-5)  # (1 - .5) / .5
  np.testing.assert_allclose(batch.task_weight, [0.5, 0.5])  # 1 / (8 * 0.25)
  assert batch.prompt_len == 3


def test_mesh_from_config_fills_the_free_axis():
  mesh = rl_mesh.mesh_from_config(rl_defaults().mesh)  # data 1, fsdp -1, tensor 1
  assert dict(mesh.shape) == {"data": 1, "fsdp": jax.device_count(), "tensor": 1}
  mesh = rl_mesh.mesh_from_config(ml_collections.ConfigDict({"data": -1, "fsdp": 1, "tensor": 2}))
  assert dict(mesh.shape) == {"data": jax.device_count() // 2, "fsdp": 1, "tensor": 2}
  for bad in ({"data": -1, "fsdp": -1, "tensor": 1}, {"data": 3, "fsdp": -1, "tensor": 1}):
    with pytest.raises(ConfigError, match="config.rl.mesh"):
      rl_mesh.mesh_from_config(ml_collections.ConfigDict(bad))
