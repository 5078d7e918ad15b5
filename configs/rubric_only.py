"""Ablation: the evolver may update only the rubric interface."""

from configs import default


def get_config():
  c = default.get_config()
  c.ablation.routes = ("rubric",)
  return c
