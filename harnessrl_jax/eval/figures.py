"""The reports' figures: matplotlib off-screen (Agg, imported only when a report plots),
each figure laid out, written as a PNG at one resolution, closed, and remembered by name."""

from __future__ import annotations

import os
from typing import Any


class Figures:
  """Writes a report's figures into `out_dir`; `made` maps each file name to its path."""

  def __init__(self, out_dir: str):
    import matplotlib  # pylint: disable=g-import-not-at-top
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
    self.plt = plt
    self.out_dir = out_dir
    self.made: dict[str, str] = {}

  def save(self, fig: Any, name: str) -> None:
    """Writes `fig` as out_dir/name (100 dpi) and closes it."""
    path = os.path.join(self.out_dir, name)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    self.plt.close(fig)
    self.made[name] = path
