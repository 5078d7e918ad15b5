"""A random tiny model that runs in seconds; used by the tests."""

from harnessrl_jax.config import base_config


def get_config():
  c = base_config()
  c.model.source = "tiny"
  c.judge.backend = "program"
  c.judge.model.source = "tiny"
  c.rollout.num_samples = 4
  c.rollout.max_new_tokens = 16
  c.rollout.prompt_buckets = (512,)
  c.rl.tasks_per_step = 2
  c.rl.micro_batch_size = 0
  # byte-level prompts of 100-400 tokens: a coarse multiple keeps the update's widths (one
  # compile each) few across the suite, and still trims
  c.rl.prompt_pad_multiple = 128
  c.rl.learning_rate = 1e-3
  c.rl.warmup_steps = 0
  c.rl.mesh.fsdp = 1   # one device even where there are more (the tests fake 8): fast
  c.train.steps = 2
  return c
