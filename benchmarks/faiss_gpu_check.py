"""Checks that the memory's exact index gives the CPU index's answers on a GPU.

Builds one random corpus of 384-d unit vectors (MiniLM's width, at the default
`exact_max_size` rows) twice: in a plain faiss `IndexFlatIP` on the CPU, and in a
`SemanticIndex` whose flat index `index_placement` puts on the GPU. Then:
  - top-k ids equal and scores within 1e-5, for a batch of queries (ids may swap only
    between scores within 1e-5 of each other: float rounding orders near-ties);
  - a search wider than the GPU's k limit (2048) answers, on a CPU copy;
  - a saved index is a plain CPU `IndexFlatIP` file, and loads back onto the GPU with the
    same answers.
Prints one line. Where faiss has no GPU support or sees no GPU it prints that it skipped
and why, and exits 0; a failed check exits 1.

Usage: python benchmarks/faiss_gpu_check.py [--n 20000] [--queries 200] [--k 16]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np


import faiss  # noqa: E402

from harnessrl_jax.memory import MemoryConfig, SemanticIndex, memory_defaults  # noqa: E402
from harnessrl_jax.memory.semantic_index import index_placement  # noqa: E402

TOL = 1e-5
DIM = 384


def agree(ids_cpu, s_cpu, ids_gpu, s_gpu) -> str | None:
  """None when the GPU's top-k is the CPU's up to the order of near-equal scores, else
  what differs. The CPU lists are longer than the GPU's, so that an id the GPU ranks last
  through a near-tie is still found in them."""
  k = ids_gpu.shape[1]
  for q in range(len(ids_gpu)):
    cpu_score = dict(zip(ids_cpu[q].tolist(), s_cpu[q].tolist()))
    for j in range(k):
      g, s = int(ids_gpu[q, j]), float(s_gpu[q, j])
      if g not in cpu_score or abs(cpu_score[g] - s) > TOL or abs(s_cpu[q, j] - s) > TOL:
        return (f"query {q} rank {j}: GPU id {g} score {s:.7f}, CPU id {ids_cpu[q, j]} "
                f"score {s_cpu[q, j]:.7f}")
  return None


def main() -> int:
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--n", type=int, default=20000, help="corpus rows")
  p.add_argument("--queries", type=int, default=200)
  p.add_argument("--k", type=int, default=16)
  a = p.parse_args()
  config = memory_defaults()
  config.exact_max_size = max(config.exact_max_size, a.n)   # stay exact (flat)
  if index_placement(faiss, MemoryConfig.from_config(config)) == "cpu":
    why = ("has no GPU support (faiss-cpu; ACCEL=cuda bash launch/setup_venv.sh installs "
           "faiss-gpu)" if not hasattr(faiss, "StandardGpuResources")
           else "sees no GPU (faiss.get_num_gpus() == 0)")
    print(f"faiss_gpu_check: skipped: faiss {faiss.__version__} {why}")
    return 0

  rng = np.random.default_rng(0)
  corpus = rng.normal(size=(a.n, DIM)).astype(np.float32)
  corpus /= np.linalg.norm(corpus, axis=1, keepdims=True)
  queries = rng.normal(size=(a.queries, DIM)).astype(np.float32)
  queries /= np.linalg.norm(queries, axis=1, keepdims=True)

  cpu = faiss.IndexFlatIP(DIM)
  cpu.add(corpus)
  ours = SemanticIndex(DIM, config)
  ours.upsert([(f"t{i % 100}", f"c{i}") for i in range(a.n)], [""] * a.n, corpus)
  if ours.placement != "gpu" or ours.kind != "flat":
    return fail(f"the index is {ours.kind} on the {ours.placement}; expected flat on the gpu")

  t0 = time.perf_counter()
  s_cpu, ids_cpu = cpu.search(queries, a.k + 8)
  t1 = time.perf_counter()
  s_gpu, ids_gpu = ours.index.search(queries, a.k)
  t2 = time.perf_counter()
  if (diff := agree(ids_cpu, s_cpu, ids_gpu, s_gpu)) is not None:
    return fail(diff)
  same = float(np.mean(ids_cpu[:, :a.k] == ids_gpu))
  worst = float(np.max(np.abs(s_cpu[:, :a.k] - s_gpu)))

  wide = ours.search(queries[0], k=600, eta=-1.0, exclude_task="t0")   # fetches 2416 > 2048
  if len(wide) != 600:
    return fail(f"a search wider than the GPU's k limit returned {len(wide)} of 600 hits")

  with tempfile.TemporaryDirectory() as d:
    ours.save(d)
    saved = faiss.read_index(os.path.join(d, "semantic.faiss"))
    if type(saved) is not faiss.IndexFlatIP:
      return fail(f"the saved index is a {type(saved).__name__}, not a CPU IndexFlatIP")
    back = SemanticIndex.load(d, config)
    s_back, ids_back = back.index.search(queries, a.k)
    if back.placement != "gpu" or not np.array_equal(ids_back, ids_gpu):
      return fail(f"the loaded index ({back.placement}) answers differently from the saved one")

  print(f"faiss_gpu_check: ok: faiss {faiss.__version__}, {faiss.get_num_gpus()} GPU(s); "
        f"{a.n} x {DIM} flat IP, {a.queries} queries top-{a.k}: ids as on the CPU "
        f"({same:.2%} same rank, the rest near-ties), max score difference {worst:.1e}; "
        f"batch search GPU {1e3 * (t2 - t1):.1f} ms vs CPU {1e3 * (t1 - t0):.1f} ms; "
        "search past k=2048 answered; saved file is a CPU IndexFlatIP and loads back")
  return 0


def fail(what: str) -> int:
  print(f"faiss_gpu_check: FAILED: {what}")
  return 1


if __name__ == "__main__":
  sys.exit(main())
