"""Baseline: GRPO with the static seed harness H_0 (no evolver, no memory)."""

from configs import default


def get_config():
  c = default.get_config()
  c.evolver.enabled = False
  return c
