"""Semantics index: exact search against float64 NumPy, approximate recall, updates,
persistence with identical answers, the GPU path (on a fake faiss that reports a GPU), and
one test with the real MiniLM embedder."""

import hashlib
import importlib.util
import os
import sys

import faiss
import numpy as np
import pytest

import harnessrl_jax.harness as H
import harnessrl_jax.memory as M
from harnessrl_jax.memory import semantic_index
from harnessrl_jax.data.schema import Criterion, Message, Task
from harnessrl_jax.errors import ConfigError, HarnessError
from repo_paths import REPO



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


class GpuFlat:
  """What the fake's index_cpu_to_gpu returns: a CPU flat index behind the GPU index's
  limits (k <= 2048), so that the GPU path runs on a CPU machine."""

  def __init__(self, cpu):
    self.cpu = cpu

  ntotal = property(lambda self: self.cpu.ntotal)
  d = property(lambda self: self.cpu.d)

  def add(self, x):
    self.cpu.add(x)

  def search(self, q, k):
    assert k <= semantic_index.GPU_MAX_K, "a GPU flat index refuses k > 2048"
    return self.cpu.search(q, k)


class GpuFaiss:
  """faiss-cpu dressed as a faiss-gpu build that sees `gpus` GPUs; records each move of an
  index between CPU and "GPU"."""

  def __init__(self, gpus=1):
    self.gpus, self.moves, self.resources = gpus, [], []

  def __getattr__(self, name):      # everything else is the real faiss
    return getattr(faiss, name)

  def get_num_gpus(self):
    return self.gpus

  def StandardGpuResources(self):   # noqa: N802 (faiss's name)
    res = type("Resources", (), {"setTempMemory": lambda r, n: setattr(r, "temp", n)})()
    self.resources.append(res)
    return res

  def index_cpu_to_gpu(self, res, device, index):
    assert res in self.resources and device == 0
    assert type(index) is faiss.IndexFlatIP, "only the flat index goes to the GPU"
    self.moves.append("to_gpu")
    return GpuFlat(faiss.clone_index(index))

  def index_gpu_to_cpu(self, index):
    assert isinstance(index, GpuFlat)
    self.moves.append("to_cpu")
    return faiss.clone_index(index.cpu)


def test_index_placement():
  auto, off = M.memory_defaults(), M.memory_defaults()
  off.faiss_gpu = "off"
  auto, off = M.MemoryConfig.from_config(auto), M.MemoryConfig.from_config(off)
  assert semantic_index.index_placement(GpuFaiss(gpus=2), auto) == "gpu"
  assert semantic_index.index_placement(GpuFaiss(gpus=2), off) == "cpu"
  assert semantic_index.index_placement(GpuFaiss(gpus=0), auto) == "cpu"
  # faiss-cpu reports 0 GPUs and lacks the GPU classes; a build that lacks them stays on
  # the CPU whatever it reports.
  no_gpu_classes = type("CpuBuild", (), {"get_num_gpus": staticmethod(lambda: 8)})()
  assert semantic_index.index_placement(no_gpu_classes, auto) == "cpu"
  if hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0:
    pytest.skip("this faiss sees a GPU: benchmarks/faiss_gpu_check.py checks that case")
  assert semantic_index.index_placement(faiss, auto) == "cpu"
  assert M.SemanticIndex(8, auto).placement == "cpu"
  bad = M.memory_defaults()
  bad.faiss_gpu = "on"
  with pytest.raises(ConfigError, match="memory.faiss_gpu"):
    M.SemanticIndex(8, bad)


def test_gpu_path_answers_like_the_cpu_index(monkeypatch, tmp_path):
  rng = np.random.default_rng(5)
  cfg = M.memory_defaults()
  cfg.rebuild_dead_fraction = 0.3
  n, d = 4000, 24
  v = clustered(rng, n, d)
  keys = keys_for(n, 4)            # 1000 criteria per task: wide searches after exclusion
  texts = [f"text {i}" for i in range(n)]
  cpu = M.SemanticIndex(d, cfg)
  fake = GpuFaiss()
  monkeypatch.setattr(semantic_index, "faiss", fake)
  gpu = M.SemanticIndex(d, cfg)
  assert gpu.placement == "gpu" and isinstance(gpu.index, GpuFlat)
  assert fake.resources[0].temp == semantic_index.GPU_TEMP_BYTES
  for idx in (cpu, gpu):
    idx.upsert(keys, texts, v)
    idx.remove(keys[:1300])        # compacts: a rebuild, on the GPU again
  assert isinstance(gpu.index, GpuFlat) and len(gpu.entries) == 2700

  def same(a, b, q, **kw):
    x, y = a.search(q, **kw), b.search(q, **kw)
    assert [(h.task_id, h.criterion_id) for h in x] == [(h.task_id, h.criterion_id) for h in y]
    np.testing.assert_allclose([h.cosine for h in x], [h.cosine for h in y], atol=1e-5)
    return x

  for qi in range(1300, n, 97):
    same(cpu, gpu, v[qi], k=4, eta=0.3, exclude_task=keys[qi][0])
  # k = 600 fetches 4k + 16 = 2416 rows, past the GPU's k limit: a search on a CPU copy.
  moves = len(fake.moves)
  assert len(same(cpu, gpu, v[1301], k=600, eta=-1.0, exclude_task="t1")) == 600
  assert fake.moves[moves:] == ["to_cpu"]
  # Saved from the GPU, the file is a plain CPU index; loaded, it goes to the GPU again.
  gpu.save(str(tmp_path))
  assert type(faiss.read_index(str(tmp_path / "semantic.faiss"))) is faiss.IndexFlatIP
  back = M.SemanticIndex.load(str(tmp_path), cfg)
  assert back.placement == "gpu" and isinstance(back.index, GpuFlat)
  for qi in range(1300, n, 211):
    same(cpu, back, v[qi], k=4, eta=0.3, exclude_task=keys[qi][0])
  # HNSW and IVF stay on the CPU (and save as they are).
  cfg.exact_max_size = 1000
  ivf = M.SemanticIndex(d, cfg)
  ivf.upsert(keys, texts, v)
  assert ivf.kind == "ivf" and not isinstance(ivf.index, GpuFlat)
  ivf.save(str(tmp_path))


def test_faiss_gpu_check_script(monkeypatch, capsys):
  # benchmarks/faiss_gpu_check.py, which the GPU machine runs, passes on the fake GPU and
  # skips (exit 0) on this machine's faiss.
  spec = importlib.util.spec_from_file_location(
      "faiss_gpu_check", os.path.join(REPO, "benchmarks", "faiss_gpu_check.py"))
  check = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(check)
  monkeypatch.setattr(sys, "argv", ["faiss_gpu_check.py", "--n", "3000", "--queries", "20"])
  if not (hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0):
    assert check.main() == 0
    assert capsys.readouterr().out.startswith("faiss_gpu_check: skipped: faiss ")
  fake = GpuFaiss()
  monkeypatch.setattr(semantic_index, "faiss", fake)
  monkeypatch.setattr(check, "faiss", fake)
  assert check.main() == 0, capsys.readouterr().out
  out = capsys.readouterr().out
  assert out.startswith("faiss_gpu_check: ok: ") and out.count("\n") == 1
  # A GPU index whose scores are off by 1e-4 fails the check.
  search = GpuFlat.search
  monkeypatch.setattr(GpuFlat, "search", lambda self, q, k: (lambda s, i: (s + 1e-4, i))(
      *search(self, q, k)))
  assert check.main() == 1
  assert capsys.readouterr().out.startswith("faiss_gpu_check: FAILED: query 0 rank 0")


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
