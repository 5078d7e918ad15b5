"""The semantics index: criterion embeddings in faiss, queried for similar criteria of
other tasks.

Rows are unit vectors, so inner product = cosine. Each row belongs to one
(task_id, criterion_id, text); rewriting a criterion marks its row dead and appends a new
one, deleting marks it dead (HNSW cannot remove vectors). Queries over-fetch and drop
dead rows and the querying task's own criteria, widening the search until `k` survive or
the similarities fall below eta. Dead rows are compacted away by a rebuild once they pass
`rebuild_dead_fraction`.

Index choice: exact flat inner product up to `exact_max_size` rows; above it HNSW or IVF
(`approx_kind`). The flat index runs on a GPU where faiss has one (`index_placement`,
`memory.faiss_gpu`); HNSW and IVF stay on the CPU. The faiss index is saved as a file
rather than rebuilt on load: HNSW construction is multi-threaded and not reproducible, a
stored graph is, so a restored index answers every query exactly as the saved one did. A
GPU index is copied to the CPU to be saved, so the file loads on any machine.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os

import faiss
import numpy as np

from harnessrl_jax.errors import HarnessError
from harnessrl_jax.memory.config import MemoryConfig

KINDS = ("flat", "hnsw", "ivf")
# faiss's GPU k-selection returns at most this many neighbours per query (DeviceDefs.cuh).
GPU_MAX_K = 2048
# Scratch memory for faiss on the GPU. The GPU is JAX's, which preallocates most of it;
# faiss's default (up to 1.5 GiB) is sized for batch searches far larger than ours (one
# query at a time over at most exact_max_size rows).
GPU_TEMP_BYTES = 256 << 20


@dataclasses.dataclass(frozen=True)
class Hit:
  task_id: str
  criterion_id: str
  text: str
  cosine: float


def normalise(v: np.ndarray) -> np.ndarray:
  v = np.array(v, np.float32, ndmin=2)
  norms = np.linalg.norm(v, axis=1, keepdims=True)
  if np.any(norms == 0) or not np.all(np.isfinite(v)):
    raise HarnessError("an embedding is zero or not finite; cannot take its cosine")
  return np.ascontiguousarray(v / norms)


def index_placement(faiss_module, config: MemoryConfig) -> str:
  """Where the exact (flat) index runs: "gpu" when `config.faiss_gpu` is "auto" and
  `faiss_module` is a build with GPU support that sees a GPU, otherwise "cpu"."""
  if config.faiss_gpu == "off":
    return "cpu"
  # faiss-cpu has get_num_gpus (always 0) but none of the GPU classes.
  if not (hasattr(faiss_module, "StandardGpuResources")
          and hasattr(faiss_module, "get_num_gpus")):
    return "cpu"
  return "gpu" if faiss_module.get_num_gpus() > 0 else "cpu"


class SemanticIndex:
  """Embeddings of criterion texts, keyed by (task_id, criterion_id)."""

  def __init__(self, dim: int, config):
    """`config`: the memory config section or its `MemoryConfig`."""
    self.dim = int(dim)
    self.config = MemoryConfig.from_config(config)
    self.entries: list[tuple[str, str, str]] = []  # row -> (task_id, criterion_id, text)
    self.vectors = np.zeros((0, self.dim), np.float32)
    self.live = np.zeros((0,), bool)
    self.rows: dict[tuple[str, str], int] = {}     # live key -> row
    self.placement = index_placement(faiss, self.config)
    self._gpu = None                                 # faiss GPU resources, made on first use
    self.kind = "flat"
    self.index = self._flat()

  # ---- size and lookups

  def __len__(self) -> int:
    return len(self.rows)

  def text(self, task_id: str, criterion_id: str) -> str | None:
    row = self.rows.get((task_id, criterion_id))
    return None if row is None else self.entries[row][2]

  def vector(self, task_id: str, criterion_id: str) -> np.ndarray:
    row = self.rows.get((task_id, criterion_id))
    if row is None:
      raise HarnessError(f"memory has no embedding of criterion {criterion_id!r} of task "
                         f"{task_id!r}; sync the rubric first")
    return self.vectors[row]

  def keys(self) -> list[tuple[str, str]]:
    return sorted(self.rows)

  # ---- updates

  def upsert(self, keys: list[tuple[str, str]], texts: list[str],
             vectors: np.ndarray) -> None:
    """Adds or replaces the embeddings of `keys` (vectors are normalised here)."""
    if len(set(keys)) != len(keys):
      raise HarnessError("upsert: a (task_id, criterion_id) key appears twice in one call")
    vectors = normalise(vectors) if len(keys) else np.zeros((0, self.dim), np.float32)
    if vectors.shape != (len(keys), self.dim):
      raise HarnessError(f"embeddings of shape {vectors.shape}; expected "
                         f"({len(keys)}, {self.dim}) (the index's dimension is fixed)")
    for key in keys:
      self._kill(key)
    start = len(self.entries)
    self.entries.extend((k[0], k[1], t) for k, t in zip(keys, texts, strict=True))
    self.vectors = np.concatenate([self.vectors, vectors])
    self.live = np.concatenate([self.live, np.ones(len(keys), bool)])
    for i, key in enumerate(keys):
      self.rows[key] = start + i
    if self.kind == "flat" and self._want_approx(len(self.entries)):
      self.rebuild()
    else:
      self.index.add(vectors)
      self._maybe_compact()

  def remove(self, keys: list[tuple[str, str]]) -> None:
    for key in keys:
      self._kill(key)
    self._maybe_compact()

  def _kill(self, key: tuple[str, str]) -> None:
    row = self.rows.pop(key, None)
    if row is not None:
      self.live[row] = False

  def _want_approx(self, n: int) -> bool:
    return n > self.config.exact_max_size

  def _maybe_compact(self) -> None:
    dead = len(self.entries) - len(self.rows)
    if dead and dead > self.config.rebuild_dead_fraction * len(self.entries):
      self.rebuild()

  def rebuild(self) -> None:
    """Drops dead rows and builds the index the config selects for the live size."""
    keep = np.flatnonzero(self.live)
    self.entries = [self.entries[i] for i in keep]
    self.vectors = np.ascontiguousarray(self.vectors[keep])
    self.live = np.ones(len(keep), bool)
    self.rows = {(e[0], e[1]): i for i, e in enumerate(self.entries)}
    self.kind, self.index = self._new_index(self.vectors)
    self.index.add(self.vectors)

  def _flat(self, cpu_index=None):
    """An exact inner-product index (`cpu_index`'s vectors, else empty) where
    `self.placement` says."""
    index = faiss.IndexFlatIP(self.dim) if cpu_index is None else cpu_index
    if self.placement == "cpu":
      return index
    if self._gpu is None:
      self._gpu = faiss.StandardGpuResources()
      self._gpu.setTempMemory(GPU_TEMP_BYTES)
    return faiss.index_cpu_to_gpu(self._gpu, 0, index)

  def _cpu_index(self):
    """The faiss index on the CPU (a copy when it lives on the GPU)."""
    on_gpu = self.kind == "flat" and self.placement == "gpu"
    return faiss.index_gpu_to_cpu(self.index) if on_gpu else self.index

  def _new_index(self, vectors: np.ndarray):
    n = len(vectors)
    if not self._want_approx(n):
      return "flat", self._flat()
    c = self.config
    if c.approx_kind == "hnsw":
      index = faiss.IndexHNSWFlat(self.dim, c.hnsw_m, faiss.METRIC_INNER_PRODUCT)
      index.hnsw.efConstruction = c.hnsw_ef_construction
      index.hnsw.efSearch = c.hnsw_ef_search
      return "hnsw", index
    # faiss's k-means wants >= 39 training points per list.
    nlist = max(1, min(c.ivf_nlist or int(4 * math.sqrt(n)), n // 39))
    quantizer = faiss.IndexFlatIP(self.dim)
    index = faiss.IndexIVFFlat(quantizer, self.dim, nlist, faiss.METRIC_INNER_PRODUCT)
    index.cp.seed = 0  # k-means seed: a rebuild on the same vectors gives the same lists
    index.train(vectors)
    index.nprobe = c.ivf_nprobe
    return "ivf", index

  # ---- queries

  def search(self, vector: np.ndarray, *, k: int, eta: float,
             exclude_task: str | None = None) -> list[Hit]:
    """Up to `k` live criteria with cosine >= eta, best first, none of `exclude_task`.

    Ties in cosine are broken by (task_id, criterion_id) so results do not depend on the
    order rows were added in.
    """
    if k <= 0 or not self.rows:
      return []
    q = normalise(vector)
    total = self.index.ntotal
    fetch = min(total, 4 * k + 16)
    while True:
      if self.kind == "hnsw":
        self.index.hnsw.efSearch = max(self.config.hnsw_ef_search, fetch)
      scores, ids = self._search(q, fetch)
      hits, below = [], False
      for s, i in zip(scores[0], ids[0]):
        if i < 0:
          continue
        if s < eta:
          below = True
          break
        task_id, criterion_id, text = self.entries[i]
        if self.live[i] and task_id != exclude_task:
          hits.append(Hit(task_id, criterion_id, text, float(s)))
      if len(hits) >= k or below or fetch >= total:
        break
      fetch = min(total, fetch * 4)
    if self.kind == "hnsw":
      self.index.hnsw.efSearch = self.config.hnsw_ef_search
    hits.sort(key=lambda h: (-h.cosine, h.task_id, h.criterion_id))
    return hits[:k]

  def _search(self, q: np.ndarray, fetch: int):
    if fetch > GPU_MAX_K and self.kind == "flat" and self.placement == "gpu":
      # Past the GPU's k limit (a wide search after many excluded rows): search a CPU copy.
      return faiss.index_gpu_to_cpu(self.index).search(q, fetch)
    return self.index.search(q, fetch)

  # ---- persistence

  def save(self, directory: str) -> None:
    np.savez(os.path.join(directory, "semantic_vectors.npz"), vectors=self.vectors,
             live=self.live)
    with open(os.path.join(directory, "semantic_entries.jsonl"), "w", encoding="utf-8") as f:
      for e in self.entries:
        f.write(json.dumps(list(e), ensure_ascii=False) + "\n")
    faiss.write_index(self._cpu_index(), os.path.join(directory, "semantic.faiss"))
    with open(os.path.join(directory, "semantic_meta.json"), "w", encoding="utf-8") as f:
      json.dump({"dim": self.dim, "kind": self.kind}, f)

  @classmethod
  def load(cls, directory: str, config) -> SemanticIndex:
    with open(os.path.join(directory, "semantic_meta.json"), encoding="utf-8") as f:
      meta = json.load(f)
    out = cls(meta["dim"], config)
    arrays = np.load(os.path.join(directory, "semantic_vectors.npz"))
    out.vectors = np.ascontiguousarray(arrays["vectors"], np.float32)
    out.live = np.asarray(arrays["live"], bool)
    with open(os.path.join(directory, "semantic_entries.jsonl"), encoding="utf-8") as f:
      out.entries = [tuple(json.loads(line)) for line in f]
    if not len(out.entries) == len(out.vectors) == len(out.live):
      raise HarnessError(f"{directory}: semantic index files disagree on the row count")
    out.rows = {(e[0], e[1]): i for i, e in enumerate(out.entries) if out.live[i]}
    out.kind = meta["kind"]
    index = faiss.read_index(os.path.join(directory, "semantic.faiss"))
    if index.ntotal != len(out.entries) or index.d != out.dim:
      raise HarnessError(f"{directory}: semantic.faiss holds {index.ntotal} vectors of "
                         f"dimension {index.d}; expected {len(out.entries)} x {out.dim}")
    out.index = out._flat(index) if out.kind == "flat" else index
    if out.kind == "hnsw":
      out.index.hnsw.efSearch = out.config.hnsw_ef_search
    elif out.kind == "ivf":
      out.index.nprobe = out.config.ivf_nprobe
    return out
