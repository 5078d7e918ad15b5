"""The training-time memory m_t: time index + semantics index + reference donors.

Memory is the one mutable store of the evolver loop (a faiss index cannot be copied per
step at useful sizes); it is written only at write-back and read through queries.

Donors: for every (task, criterion) the best and worst recorded responses: the
satisfying response with the highest reward, and the violating one with the lowest
(see time_index for "satisfying"). Ties keep the earlier record. A rewrite of the
criterion clears its donors: they were judged against the old text.

On disk (`save`/`load`) a memory is a directory:
  meta.json                  format, sizes, embedding dimension (written last)
  time_index.jsonl           one Draw per line
  donors.jsonl               one (task, criterion, best, worst) per line
  semantic_entries.jsonl, semantic_vectors.npz, semantic.faiss, semantic_meta.json
written into a sibling temporary directory and renamed over the target, so a reader
sees the old or the new memory, never a half-written one.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
from collections.abc import Sequence

import numpy as np

from harnessrl_jax.errors import HarnessError
from harnessrl_jax.harness.state import Harness
from harnessrl_jax.memory.config import MemoryConfig
from harnessrl_jax.memory.embedder import Embedder
from harnessrl_jax.memory.semantic_index import SemanticIndex
from harnessrl_jax.memory.time_index import Draw, TimeIndex

FORMAT = "harnessrl_jax.memory/1"


@dataclasses.dataclass(frozen=True)
class Example:
  text: str
  reward: float
  step: int


@dataclasses.dataclass(frozen=True)
class Neighbor:
  """A similar criterion of another task, with its `<reference>` donors."""

  task_id: str
  criterion_id: str
  text: str
  cosine: float
  best: Example | None
  worst: Example | None


class Memory:
  """m_t. `embedder` maps texts to [n, d] vectors (see memory.embedder)."""

  def __init__(self, config, embedder: Embedder, *, dim: int | None = None):
    """`config`: the memory config section or its `MemoryConfig`."""
    self.config = MemoryConfig.from_config(config)
    self.embedder = embedder
    self.time = TimeIndex()
    self.donors: dict[tuple[str, str], tuple[Example | None, Example | None]] = {}
    if dim is None:
      dim = getattr(embedder, "dim", None) or embedder(["dimension probe"]).shape[1]
    self.semantic = SemanticIndex(dim, self.config)

  # ---- write-back

  def sync_rubrics(self, h: Harness) -> int:
    """Makes the semantics index hold exactly h's criteria; returns how many it embedded.

    New and rewritten criteria are embedded (in one batched call), deleted ones removed.
    """
    want = {(t.task_id, c.id): c.text for t in h.tasks for c in t.criteria}
    gone = [k for k in self.semantic.keys() if k not in want]
    changed = sorted(k for k, text in want.items() if self.semantic.text(*k) != text)
    for key in gone + [k for k in changed if self.semantic.text(*k) is not None]:
      self.donors.pop(key, None)
    self.semantic.remove(gone)
    if changed:
      texts = [want[k] for k in changed]
      bs = self.config.embed_batch_size
      vecs = np.concatenate([np.asarray(self.embedder(texts[i:i + bs]), np.float32)
                             for i in range(0, len(texts), bs)])
      self.semantic.upsert(changed, texts, vecs)
    return len(changed)

  def add_draw(self, draw: Draw, responses: Sequence[str] | None = None) -> None:
    """Records a draw; with its J responses, updates the criteria's donors."""
    self.time.add(draw)
    if responses is None:
      return
    if len(responses) != draw.rewards.shape[0]:
      raise HarnessError(f"draw of task {draw.task_id!r}: {len(responses)} responses for "
                         f"{draw.rewards.shape[0]} rollouts")
    sat = draw.satisfied()
    for k, cid in enumerate(draw.criterion_ids):
      key = (draw.task_id, cid)
      best, worst = self.donors.get(key, (None, None))
      for j in np.argsort(-draw.rewards, kind="stable"):
        if sat[k, j] == 1:
          if best is None or draw.rewards[j] > best.reward:
            best = Example(responses[j], float(draw.rewards[j]), draw.step)
          break
      for j in np.argsort(draw.rewards, kind="stable"):
        if sat[k, j] == 0:
          if worst is None or draw.rewards[j] < worst.reward:
            worst = Example(responses[j], float(draw.rewards[j]), draw.step)
          break
      if best is not None or worst is not None:
        self.donors[key] = (best, worst)

  # ---- queries

  def similar(self, task_id: str, criterion_id: str, *, k: int | None = None,
              eta: float | None = None) -> tuple[Neighbor, ...]:
    """Top-k criteria of OTHER tasks with cosine >= eta to this criterion, with donors."""
    return self.similar_to_vector(self.semantic.vector(task_id, criterion_id),
                                  exclude_task=task_id, k=k, eta=eta)

  def similar_to_text(self, text: str, *, exclude_task: str | None = None,
                      k: int | None = None, eta: float | None = None) -> tuple[Neighbor, ...]:
    return self.similar_to_vector(np.asarray(self.embedder([text]))[0],
                                  exclude_task=exclude_task, k=k, eta=eta)

  def similar_to_vector(self, vector, *, exclude_task: str | None = None,
                        k: int | None = None, eta: float | None = None
                        ) -> tuple[Neighbor, ...]:
    k = self.config.top_k if k is None else k
    eta = self.config.eta if eta is None else eta
    hits = self.semantic.search(vector, k=k, eta=eta, exclude_task=exclude_task)
    return tuple(Neighbor(h.task_id, h.criterion_id, h.text, h.cosine,
                          *self.donors.get((h.task_id, h.criterion_id), (None, None)))
                 for h in hits)

  # ---- persistence

  def save(self, path: str | os.PathLike) -> None:
    """Writes the memory to directory `path` atomically (replacing what was there)."""
    path = os.path.abspath(os.fspath(path))
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=os.path.basename(path) + ".tmp-", dir=parent)
    try:
      self.time.write(os.path.join(tmp, "time_index.jsonl"))
      with open(os.path.join(tmp, "donors.jsonl"), "w", encoding="utf-8") as f:
        for (tid, cid), (best, worst) in sorted(self.donors.items()):
          f.write(json.dumps({"task_id": tid, "criterion_id": cid,
                              "best": best and dataclasses.asdict(best),
                              "worst": worst and dataclasses.asdict(worst)},
                             ensure_ascii=False) + "\n")
      self.semantic.save(tmp)
      with open(os.path.join(tmp, "meta.json"), "w", encoding="utf-8") as f:
        json.dump({"format": FORMAT, "dim": self.semantic.dim, "draws": len(self.time),
                   "criteria": len(self.semantic)}, f)
      for name in os.listdir(tmp):
        with open(os.path.join(tmp, name), "rb") as f:
          os.fsync(f.fileno())
      old = None
      if os.path.exists(path):
        old = tempfile.mkdtemp(prefix=os.path.basename(path) + ".old-", dir=parent)
        os.rename(path, os.path.join(old, "m"))
      os.rename(tmp, path)
      if old:
        shutil.rmtree(old)
    except BaseException:
      shutil.rmtree(tmp, ignore_errors=True)
      raise

  @classmethod
  def load(cls, path: str | os.PathLike, config, embedder: Embedder) -> Memory:
    path = os.fspath(path)
    meta_path = os.path.join(path, "meta.json")
    if not os.path.exists(meta_path):
      raise HarnessError(f"{path}: not a saved memory (no meta.json)")
    with open(meta_path, encoding="utf-8") as f:
      meta = json.load(f)
    if meta.get("format") != FORMAT:
      raise HarnessError(f"{meta_path}: format {meta.get('format')!r}, expected {FORMAT!r}")
    out = cls(config, embedder, dim=meta["dim"])
    out.time = TimeIndex.read(os.path.join(path, "time_index.jsonl"))
    with open(os.path.join(path, "donors.jsonl"), encoding="utf-8") as f:
      for line in f:
        d = json.loads(line)
        out.donors[(d["task_id"], d["criterion_id"])] = (
            d["best"] and Example(**d["best"]), d["worst"] and Example(**d["worst"]))
    out.semantic = SemanticIndex.load(path, out.config)
    return out
