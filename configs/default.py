"""The embedded CPU default: SmolLM2-135M-Instruct on the bundled data."""

from harnessrl_jax.config import base_config


def get_config():
  c = base_config()
  c.model.source = "smollm2"
  return c
