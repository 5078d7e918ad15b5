"""Ablation: the evolver may update only the guidance interface."""

from configs import default


def get_config():
  c = default.get_config()
  c.ablation.routes = ("guidance",)
  return c
