"""The training-time memory: time index of every draw, semantics index of criterion texts
(a JAX BERT sentence embedder + faiss), reference donors, and their persistence."""

from harnessrl_jax.memory.config import MemoryConfig, memory_defaults
from harnessrl_jax.memory.embedder import (BertEmbedder, Embedder, SentenceEmbedder,
                                         embedder_from_config)
from harnessrl_jax.memory.semantic_index import Hit, SemanticIndex
from harnessrl_jax.memory.store import Example, Memory, Neighbor
from harnessrl_jax.memory.time_index import CriterionHistory, Draw, TimeIndex, make_draw
