"""Semantic-index benchmark: our index at 100k criteria vs exact faiss vs ChromaDB.

Vectors are shaped like real criterion embeddings: MiniLM (all-MiniLM-L6-v2, 384-d)
embeddings of a few thousand real rubric texts (WritingBench checklist descriptions and
score-level descriptions, split into clauses, plus IFBench instructions, from
../shared/data/upstream/raw), then mixed and perturbed up to 100k:

    x = normalise((1 - a) e_i + a e_j + s * z),  a ~ U(0, 0.5), z ~ N(0, C_real)

with e_i, e_j two real embeddings and z Gaussian noise with the real embeddings'
covariance (so perturbations stay in the directions real criteria vary in, not in random
directions). Queries are 1000 further vectors drawn the same way, not in the index.

Measured, all on CPU in one run: single-query latency p50/p99 (ms), recall@4 against
exact search, time to build at 100k (grown in 10k chunks) and to add 10k more, for
  - ours: `SemanticIndex` with `memory_defaults()` (what the config selects at 100k),
    through its Python `search` (exclusion/eta filtering included) and raw faiss;
  - ours with approx_kind="hnsw";
  - exact faiss IndexFlatIP;
  - ChromaDB (the paper's store), in-memory client, cosine HNSW, default parameters.

Usage: python benchmarks/memory_index.py [--n 100000] [--json out.json]
ChromaDB is a benchmark-only extra (requirements-bench.txt); without it that row is
skipped and the output says so.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import faiss  # pylint: disable=g-import-not-at-top,wrong-import-position

from harnessrl_jax.memory import SemanticIndex, SentenceEmbedder, memory_defaults  # pylint: disable=wrong-import-position

K = 4


def real_texts(upstream: str) -> list[str]:
  """Distinct English rubric texts and clauses from the upstream samples."""
  texts = []
  with open(os.path.join(upstream, "writingbench_length_subset.sample.jsonl"),
            encoding="utf-8") as f:
    for line in f:
      for item in json.loads(line)["checklist"]:
        for key in ("criteria_description", "1-2", "3-4", "5-6", "7-8", "9-10"):
          texts.append(item[key])
          texts.extend(re.split(r"(?<=[.;])\s+", item[key]))
  with open(os.path.join(upstream, "ifbench_test.sample.jsonl"), encoding="utf-8") as f:
    for line in f:
      texts.extend(re.split(r"(?<=[.?!])\s+", json.loads(line)["prompt"])[:2])
  out = sorted({t.strip() for t in texts if len(t.split()) >= 5 and t.isascii()})
  return out


def synthesize(real: np.ndarray, n: int, rng: np.random.Generator,
               scale: float = 0.35) -> np.ndarray:
  cov_root = np.linalg.cholesky(np.cov(real.T) + 1e-6 * np.eye(real.shape[1]))
  i = rng.integers(0, len(real), n)
  j = rng.integers(0, len(real), n)
  a = rng.uniform(0, 0.5, (n, 1))
  z = rng.standard_normal((n, real.shape[1])) @ cov_root.T
  x = (1 - a) * real[i] + a * real[j] + scale * z
  return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def latencies(fn, queries) -> tuple[float, float]:
  for q in queries[:20]:
    fn(q)  # warm-up
  ts = []
  for q in queries:
    t = time.perf_counter()
    fn(q)
    ts.append((time.perf_counter() - t) * 1e3)
  return float(np.percentile(ts, 50)), float(np.percentile(ts, 99))


def recall(found: list[list[int]], truth: np.ndarray) -> float:
  return float(np.mean([len(set(f) & set(t)) / K for f, t in zip(found, truth)]))


def bench_ours(name, cfg, base, extra, queries, truth, keys, extra_keys, rows):
  idx = SemanticIndex(base.shape[1], cfg)
  t = time.perf_counter()
  # Grown in 10k chunks as in training: the index switches from exact to approximate when
  # it passes exact_max_size and then keeps growing (IVF keeps the lists it trained then).
  for s in range(0, len(keys), 10_000):
    idx.upsert(keys[s:s + 10_000], ["x"] * len(keys[s:s + 10_000]), base[s:s + 10_000])
  build = time.perf_counter() - t
  row_of = {k: i for i, k in enumerate(keys)}
  found = [[row_of[(h.task_id, h.criterion_id)] for h in idx.search(q, k=K, eta=-1.0)]
           for q in queries]
  p50, p99 = latencies(lambda q: idx.search(q, k=K, eta=-1.0), queries)
  raw50, raw99 = latencies(lambda q: idx.index.search(q[None], K), queries)
  t = time.perf_counter()
  idx.upsert(extra_keys, ["x"] * len(extra_keys), extra)
  add = time.perf_counter() - t
  rows.append({"index": f"{name} ({idx.kind})", "p50_ms": p50, "p99_ms": p99,
               "raw_faiss_p50_ms": raw50, "raw_faiss_p99_ms": raw99,
               "recall@4": recall(found, truth), "build_s": build, "add_10k_s": add})


def bench_exact(base, extra, queries, truth, rows, threads=0):
  before = faiss.omp_get_max_threads()
  if threads:
    faiss.omp_set_num_threads(threads)
  index = faiss.IndexFlatIP(base.shape[1])
  t = time.perf_counter()
  index.add(base)
  build = time.perf_counter() - t
  found = [index.search(q[None], K)[1][0].tolist() for q in queries]
  p50, p99 = latencies(lambda q: index.search(q[None], K), queries)
  t = time.perf_counter()
  index.add(extra)
  add = time.perf_counter() - t
  faiss.omp_set_num_threads(before)
  n = threads or before
  rows.append({"index": f"exact faiss (IndexFlatIP, {n} thread{'s' if n > 1 else ''})",
               "p50_ms": p50, "p99_ms": p99,
               "recall@4": recall(found, truth), "build_s": build, "add_10k_s": add})


def bench_chroma(base, extra, queries, truth, rows):
  try:
    import chromadb  # pylint: disable=g-import-not-at-top
  except ImportError:
    rows.append({"index": "ChromaDB: not installed (pip install -r requirements-bench.txt)"})
    return
  client = chromadb.EphemeralClient()
  col = client.create_collection("criteria", metadata={"hnsw:space": "cosine"})
  batch = 5000
  t = time.perf_counter()
  for s in range(0, len(base), batch):
    col.add(ids=[str(i) for i in range(s, min(s + batch, len(base)))],
            embeddings=base[s:s + batch])
  build = time.perf_counter() - t
  found = [[int(i) for i in col.query(query_embeddings=q[None], n_results=K)["ids"][0]]
           for q in queries]
  p50, p99 = latencies(lambda q: col.query(query_embeddings=q[None], n_results=K), queries)
  t = time.perf_counter()
  for s in range(0, len(extra), batch):
    col.add(ids=[f"e{i}" for i in range(s, min(s + batch, len(extra)))],
            embeddings=extra[s:s + batch])
  add = time.perf_counter() - t
  rows.append({"index": f"ChromaDB {chromadb.__version__} (HNSW, cosine)", "p50_ms": p50,
               "p99_ms": p99, "recall@4": recall(found, truth), "build_s": build,
               "add_10k_s": add})


def main():
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--n", type=int, default=100_000)
  ap.add_argument("--extra", type=int, default=10_000)
  ap.add_argument("--queries", type=int, default=1000)
  ap.add_argument("--upstream", default=os.path.join(REPO, "..", "shared", "data",
                                                     "upstream", "raw"))
  ap.add_argument("--cache", default=os.path.expanduser(
      "~/.cache/harnessrl_jax/memory_bench_real.npy"),
                  help="where to keep the real-text embeddings between runs")
  ap.add_argument("--json", default="")
  args = ap.parse_args()
  rng = np.random.default_rng(0)
  load_start = os.getloadavg()[0]

  texts = real_texts(args.upstream)
  if os.path.exists(args.cache) and np.load(args.cache).shape[0] == len(texts):
    real = np.load(args.cache)
  else:
    t = time.perf_counter()
    real = SentenceEmbedder()(texts)
    print(f"embedded {len(texts)} real criterion texts in {time.perf_counter() - t:.1f} s")
    os.makedirs(os.path.dirname(args.cache), exist_ok=True)
    np.save(args.cache, real)
  base = synthesize(real, args.n, rng)
  extra = synthesize(real, args.extra, rng)
  queries = synthesize(real, args.queries, rng)
  # How real-like: cosine of each synthetic vector to its nearest real text.
  near = faiss.IndexFlatIP(real.shape[1])
  near.add(real)
  nn_cos = near.search(base[:2000], 1)[0][:, 0]
  exact = faiss.IndexFlatIP(base.shape[1])
  exact.add(base)
  truth = exact.search(queries, K)[1]
  top4 = exact.search(queries, K)[0]
  print(f"{len(texts)} real texts; synthetic->nearest real cosine median "
        f"{np.median(nn_cos):.3f}; query top-1 cosine median {np.median(top4[:, 0]):.3f}, "
        f"top-4 {np.median(top4[:, 3]):.3f}; faiss threads {faiss.omp_get_max_threads()}")

  keys = [(f"t{i // 13}", f"c{i % 13}") for i in range(args.n)]
  extra_keys = [(f"x{i // 13}", f"c{i % 13}") for i in range(args.extra)]
  rows = []
  bench_ours("ours, memory_defaults()", memory_defaults(), base, extra, queries, truth,
             keys, extra_keys, rows)
  cfg = memory_defaults()
  cfg.approx_kind = "hnsw"
  bench_ours("ours, approx_kind=hnsw", cfg, base, extra, queries, truth, keys, extra_keys,
             rows)
  bench_exact(base, extra, queries, truth, rows)
  bench_exact(base, extra, queries, truth, rows, threads=1)
  bench_chroma(base, extra, queries, truth, rows)

  print(f"\n| index at {args.n} x {base.shape[1]} | p50 ms | p99 ms | recall@4 | "
        f"build {args.n // 1000}k s | add {args.extra // 1000}k s |")
  print("|---|---|---|---|---|---|")
  for r in rows:
    if "p50_ms" not in r:
      print(f"| {r['index']} | | | | | |")
      continue
    raw = (f" (raw faiss {r['raw_faiss_p50_ms']:.2f} / {r['raw_faiss_p99_ms']:.2f})"
           if "raw_faiss_p50_ms" in r else "")
    print(f"| {r['index']}{raw} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | "
          f"{r['recall@4']:.3f} | {r['build_s']:.1f} | {r['add_10k_s']:.2f} |")
  print(f"1-min load average: {load_start:.1f} at start, {os.getloadavg()[0]:.1f} at end "
        f"({os.cpu_count()} CPUs)")
  if args.json:
    with open(args.json, "w", encoding="utf-8") as f:
      json.dump({"load_average_start": load_start, "n": args.n, "dim": int(base.shape[1]), "real_texts": len(texts),
                 "rows": rows}, f, indent=1)


if __name__ == "__main__":
  main()
