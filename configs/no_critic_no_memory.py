"""Ablation: no critic and no memory (no time index, donors or reversal check)."""

from configs import default


def get_config():
  c = default.get_config()
  c.ablation.critic = False
  c.ablation.memory = False
  return c
