"""A random tiny model that runs in seconds; used by the tests."""

from harnessrl_jax.config import base_config


def get_config():
  c = base_config()
  c.model.source = "tiny"
  c.rollout.num_samples = 4
  c.rollout.max_new_tokens = 16
  c.rl.tasks_per_step = 2
  c.train.steps = 2
  return c
