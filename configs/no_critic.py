"""Ablation: the evolver without its just-in-time critic (structurally valid candidates
are accepted unmeasured)."""

from configs import default


def get_config():
  c = default.get_config()
  c.ablation.critic = False
  return c
