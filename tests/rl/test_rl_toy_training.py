"""End to end on a toy reward: rollout -> rewards -> RLBatch -> GRPO updates raise the reward."""

import jax
import numpy as np
from flax import nnx

from harnessrl_jax.models.architecture import ModelConfig
from harnessrl_jax.models.decoder import Decoder
from harnessrl_jax.rl import mesh as rl_mesh
from harnessrl_jax.rl import train_step as ts
from harnessrl_jax.rl.batch import build_batch
from harnessrl_jax.rl.config import rl_defaults
from harnessrl_jax.rollout.sampler import generate_padded
from harnessrl_jax.rollout.sampling import SamplingParams

V, K, TASKS, J, NEW = 16, 3, 8, 4, 4


def test_emit_token_k_reward_rises():
  cfg = ModelConfig.tiny(vocab_size=V, num_layers=1, eos_token_ids=())
  graphdef, params = nnx.split(Decoder(cfg, rngs=nnx.Rngs(0)))
  rl = rl_defaults()
  rl.learning_rate = 3e-3
  rl.warmup_steps = 0
  rl.beta = 0.01
  rl.micro_batch_size = 16
  rl.logprob_chunk = 4
  fwd = ts.decoder_forward(graphdef)
  tx, step = ts.build_step(fwd, rl, temperature=1.0)
  logprob_fn = ts.make_logprob_fn(fwd, ts.StepConfig.from_config(rl, temperature=1.0))
  state, _ = rl_mesh.init_state(params, tx, None, ref_params=params)
  prompts = np.random.default_rng(0).integers(0, V, (TASKS, 3)).astype(np.int32)
  sampling = SamplingParams(temperature=1.0, max_new_tokens=NEW)
  group_id = np.repeat(np.arange(TASKS), J)
  key = jax.random.key(0)
  mean_rewards = []
  for _ in range(25):
    key, sub = jax.random.split(key)
    roll = generate_padded(graphdef, state.params, prompts, np.ones_like(prompts, bool), sampling,
                           sub, num_samples=J, eos_token_ids=())
    resp = np.asarray(roll.response_tokens)
    rewards = (resp == K).mean(axis=1)
    mean_rewards.append(float(rewards.mean()))
    batch = build_batch(roll, rewards, group_id, np.full(TASKS * J, 1.0 / TASKS), TASKS)
    state, hist = ts.update_on_batch(step, logprob_fn, state, batch)
    # The rollout's log-probs are the learner's old log-probs: the ratio starts at 1.
    assert abs(hist[0]["ratio"] - 1.0) < 1e-4
  assert np.mean(mean_rewards[:3]) < 0.2
  assert np.mean(mean_rewards[-3:]) > 0.6, mean_rewards
  assert int(state.skipped_steps) == 0
