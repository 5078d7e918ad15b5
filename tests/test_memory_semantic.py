"""Semantics index: exact search against float64 NumPy, approximate recall, updates,
persistence with identical answers, and one test with the real MiniLM embedder."""

import hashlib
import os

import numpy as np
import pytest

import harnessrl_jax.harness as H
import harnessrl_jax.memory as M
from harnessrl_jax.data.schema import Criterion, Message, Task
from harnessrl_jax.errors import ConfigError, HarnessError


def brute_force(vectors, keys, live, q, *, k, eta, exclude):
  v = vectors.astype(np.float64)
  v /= np.linalg.norm(v, axis=1, keepdims=True)
  q = q.astype(np.float64) / np.linalg.norm(q)
  sims = v @ q
  cands = [(-s, keys[i]) for i, s in enumerate(sims)
           if live[i] and keys[i][0] != exclude and s >= eta]
  return [key for _, key in sorted(cands)[:k]], sims


def clustered(rng, n, d, centres=40, spread=0.35):
  c = rng.normal(size=(centres, d))
  return (c[rng.integers(0, centres, n)] + spread * rng.normal(size=(n, d))).astype(np.float32)


def keys_for(n, tasks):
  return [(f"t{i % tasks}", f"c{i}") for i in range(n)]


def test_exact_search_matches_numpy_float64():
  rng = np.random.default_rng(0)
  cfg = M.memory_defaults()
  v = clustered(rng, 600, 24)
  keys = keys_for(600, 50)
  idx = M.SemanticIndex(24, cfg)
  idx.upsert(keys, [f"text {i}" for i in range(600)], v)
  assert idx.kind == "flat" and len(idx) == 600
  for qi in range(0, 600, 37):
    for eta in (-1.0, 0.5, 0.9):
      want, sims = brute_force(v, keys, np.ones(600, bool), v[qi], k=4, eta=eta,
                               exclude=keys[qi][0])
      got = idx.search(v[qi], k=4, eta=eta, exclude_task=keys[qi][0])
      assert [(h.task_id, h.criterion_id) for h in got] == want
      for h in got:
        assert abs(h.cosine - sims[keys.index((h.task_id, h.criterion_id))]) < 1e-5
        assert h.task_id != keys[qi][0] and h.cosine >= eta


def test_exclusion_widens_the_search():
  # 30 near-identical criteria of the querying task rank first; the other task's must
  # still come back.
  rng = np.random.default_rng(1)
  base = rng.normal(size=8).astype(np.float32)
  v = np.stack([base + 0.01 * rng.normal(size=8) for _ in range(30)] +
               [base + 0.2 * rng.normal(size=8) for _ in range(3)]).astype(np.float32)
  keys = [("self", f"s{i}") for i in range(30)] + [("other", f"o{i}") for i in range(3)]
  idx = M.SemanticIndex(8, M.memory_defaults())
  idx.upsert(keys, ["x"] * 33, v)
  got = idx.search(base, k=4, eta=0.0, exclude_task="self")
  assert sorted(h.criterion_id for h in got) == ["o0", "o1", "o2"]


@pytest.mark.parametrize("kind", ["hnsw", "ivf"])
def test_approximate_index_above_the_threshold(kind):
  rng = np.random.default_rng(2)
  cfg = M.memory_defaults()
  cfg.exact_max_size = 1000
  cfg.approx_kind = kind
  n, d = 3000, 32
  v = clustered(rng, n, d)
  keys = keys_for(n, 300)
  idx = M.SemanticIndex(d, cfg)
  idx.upsert(keys[:800], ["x"] * 800, v[:800])
  assert idx.kind == "flat"
  idx.upsert(keys[800:], ["x"] * (n - 800), v[800:])
  assert idx.kind == kind
  recall = []
  for qi in rng.choice(n, 100, replace=False):
    want, _ = brute_force(v, keys, np.ones(n, bool), v[qi], k=4, eta=-1.0,
                          exclude=keys[qi][0])
    got = idx.search(v[qi], k=4, eta=-1.0, exclude_task=keys[qi][0])
    recall.append(len(set(want) & {(h.task_id, h.criterion_id) for h in got}) / 4)
  assert np.mean(recall) >= 0.9


def test_updates_remove_and_compaction():
  rng = np.random.default_rng(3)
  cfg = M.memory_defaults()
  cfg.rebuild_dead_fraction = 0.2
  v = clustered(rng, 200, 16)
  keys = keys_for(200, 20)
  idx = M.SemanticIndex(16, cfg)
  idx.upsert(keys, [f"x{i}" for i in range(200)], v)
  q = v[0]
  target = idx.search(q, k=1, eta=-1.0, exclude_task="t0")[0]
  # Rewriting that criterion to a far-away vector moves it out of the top hit.
  idx.upsert([(target.task_id, target.criterion_id)], ["rewritten"], -q[None])
  assert idx.text(target.task_id, target.criterion_id) == "rewritten"
  assert idx.search(q, k=1, eta=-1.0, exclude_task="t0")[0] != target
  idx.remove(keys[100:160])
  assert len(idx) == 140 and len(idx.entries) == 140  # compacted: 61 dead > 20%
  live = np.array([k not in set(keys[100:160]) for k in keys])
  v2 = v.copy()
  v2[keys.index((target.task_id, target.criterion_id))] = -q
  for qi in (1, 50, 170):
    want, _ = brute_force(v2, keys, live, v[qi], k=4, eta=-1.0, exclude=keys[qi][0])
    got = idx.search(v[qi], k=4, eta=-1.0, exclude_task=keys[qi][0])
    assert [(h.task_id, h.criterion_id) for h in got] == want
  with pytest.raises(HarnessError, match="expected"):
    idx.upsert([("t", "c")], ["x"], np.ones((1, 5), np.float32))
  with pytest.raises(HarnessError, match="twice"):
    idx.upsert([("t", "c"), ("t", "c")], ["x", "y"], np.ones((2, 16), np.float32))


@pytest.mark.parametrize("kind", ["flat", "hnsw", "ivf"])
def test_save_and_load_give_identical_answers(tmp_path, kind):
  rng = np.random.default_rng(4)
  cfg = M.memory_defaults()
  cfg.exact_max_size = 10**9 if kind == "flat" else 500
  cfg.approx_kind = "ivf" if kind == "ivf" else "hnsw"
  n = 1500
  v = clustered(rng, n, 16)
  keys = keys_for(n, 100)
  idx = M.SemanticIndex(16, cfg)
  idx.upsert(keys, [f"text {i} é" for i in range(n)], v)
  idx.remove(keys[:50])
  assert idx.kind == kind
  idx.save(str(tmp_path))
  back = M.SemanticIndex.load(str(tmp_path), cfg)
  assert back.kind == kind and back.keys() == idx.keys()
  queries = clustered(rng, 60, 16)
  for q in queries:
    assert back.search(q, k=4, eta=0.3, exclude_task="t1") == \
        idx.search(q, k=4, eta=0.3, exclude_task="t1")


def fake_embedder(dim=64):
  """Deterministic bag-of-words hashing (sha256, not Python's seeded hash)."""
  def embed(texts):
    out = np.zeros((len(texts), dim), np.float32)
    for i, t in enumerate(texts):
      for w in t.lower().split():
        h = int.from_bytes(hashlib.sha256(w.encode()).digest()[:4], "little")
        out[i, h % dim] += 1.0
    return out + 1e-3
  embed.dim = dim
  return embed


def test_real_minilm_finds_paraphrases_of_other_tasks():
  os.environ["HF_HUB_OFFLINE"] = "1"
  sentence_transformers = pytest.importorskip("sentence_transformers")
  emb = M.embedder_from_config(M.memory_defaults())  # "" -> the MiniLM in the wheel
  assert emb.dim == 384
  tasks = [
      Task("med1", "medical", (Message("user", "q"),),
           (Criterion("a", "The response states the recommended dose in milligrams.", 5.0),
            Criterion("b", "The response recommends seeing a doctor.", 3.0))),
      Task("med2", "medical", (Message("user", "q"),),
           (Criterion("a", "The response states the recommended dosage in milligrams.", 5.0),
            Criterion("b", "Uses a warm and friendly tone.", 2.0))),
      Task("poem", "writing", (Message("user", "q"),),
           (Criterion("r", "The poem has an ABAB rhyme scheme.", 1.0),)),
  ]
  h = H.from_tasks(tasks)
  mem = M.Memory(M.memory_defaults(), emb)
  assert mem.sync_rubrics(h) == 5
  got = mem.similar("med1", "a")
  assert [(n.task_id, n.criterion_id) for n in got] == [("med2", "a")]
  # The reported cosine is the model's own, computed independently in float64.
  model = sentence_transformers.SentenceTransformer(emb.path, device="cpu")
  e = model.encode([tasks[0].criteria[0].text, tasks[1].criteria[0].text]).astype(np.float64)
  cos = e[0] @ e[1] / np.linalg.norm(e[0]) / np.linalg.norm(e[1])
  assert cos >= 0.82 and abs(got[0].cosine - cos) < 1e-4
  assert mem.similar("poem", "r") == ()
  # A rewrite re-embeds only that criterion.
  h2 = H.apply(h, H.RubricCreate("poem", "n", "Rhymes in an ABAB scheme.", 1.0))
  assert mem.sync_rubrics(h2) == 1
  assert mem.similar_to_text("The poem uses ABAB rhymes.", eta=0.5)[0].task_id == "poem"


def test_bad_embedder_path_is_a_config_error():
  os.environ["HF_HUB_OFFLINE"] = "1"
  pytest.importorskip("sentence_transformers")
  cfg = M.memory_defaults()
  cfg.embedder_path = "/nonexistent/bge-base-en-v1.5"
  with pytest.raises(ConfigError, match="embedder_path"):
    M.embedder_from_config(cfg)
  cfg = M.memory_defaults()
  cfg.approx_kind = "lsh"
  with pytest.raises(ConfigError, match="approx_kind"):
    M.SemanticIndex(8, cfg)
