"""Ablation: the evolver may update only the sampling interface."""

from configs import default


def get_config():
  c = default.get_config()
  c.ablation.routes = ("sampling",)
  return c
