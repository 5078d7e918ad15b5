"""The JetStream engine (serving/engine.py) at two commits, back to back on this machine: a
generate step with every slot holding an L-token prompt, and the prefill of such a prompt.

Each commit is checked out in a temporary git worktree and measured in its own process with
this checkout's Python (the same packages), through JetStream's Engine API alone (prefill,
insert, generate), which every version of our engine implements. Rounds alternate between
the commits, so drift of the machine's speed touches both.

Workload: SmolLM2-135M-Instruct, float32; the server's settings of the LLM roles' end-to-end
test (tests/evolver/test_evolver_llm_jetstream.py): max_prefill_length 2048, max_decode_length 256,
schema tables of 2048 states x 512 classes. Prompts: words of data/train.jsonl, L tokens
(1200: about an attributor's or proposer's request; 450: a judge's). Per (slots, L): every
slot gets a prompt, 5 untimed generate steps, then `--steps` timed (blocked on at the end);
then 3 prefills of different L-token prompts, the first untimed (it compiles). Medians over
rounds.

  python benchmarks/serving_decode.py --commits BEFORE AFTER [--slots 2 8]
      [--lengths 450 1200] [--steps 20] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_PREFILL, MAX_DECODE = 2048, 256


def worker(tree: str, slots: int, length: int, steps: int) -> dict:
  """Times the engine of the code at `tree` (run in a process of its own, with `tree` first
  on its PYTHONPATH: `measure`)."""
  # pylint: disable=g-import-not-at-top
  from harnessrl_jax.serving import engine as engine_lib  # installs JetStream's shims first
  import jax
  import numpy as np
  from jetstream.engine import token_utils
  from harnessrl_jax.models.loading import load_model
  # pylint: enable=g-import-not-at-top
  loaded = load_model({"source": "smollm2"})
  pb = loaded.prompt_builder
  engine = engine_lib.DecoderEngine(loaded.model, pb, max_concurrent_decodes=slots,
                                    max_prefill_length=MAX_PREFILL,
                                    max_decode_length=MAX_DECODE, schema_table=(2048, 512),
                                    prefix_cache_entries=0)
  tok = engine.build_tokenizer(engine.get_tokenizer())
  with open(os.path.join(REPO, "data", "train.jsonl"), encoding="utf-8") as f:
    words = f.read().split()

  def prompt(i: int):
    ids = pb.encode(" ".join(words[i * length:(i + 1) * length]))[:length - 1]
    return token_utils.pad_tokens(np.asarray(ids, np.int32), tok.bos_id, tok.pad_id,
                                  is_bos=True, max_prefill_length=MAX_PREFILL,
                                  jax_padding=True)

  params = engine.load_params()
  state = engine.init_decode_state()
  for slot in range(slots):
    padded, true_len = prompt(slot)
    prefix = engine.prefill(params=params, padded_tokens=padded, true_length=true_len)
    state = engine.insert(prefix, state, slot)
    jax.tree.map(lambda x: x.delete() if isinstance(x, jax.Array) else None, prefix)
  for _ in range(5):
    state, result = engine.generate(params, state)
  jax.block_until_ready(result.data)
  start = time.perf_counter()
  for _ in range(steps):
    state, result = engine.generate(params, state)
  jax.block_until_ready(result.data)
  step_ms = (time.perf_counter() - start) / steps * 1000
  prefill_s = []
  for i in range(3):
    padded, true_len = prompt(slots + i)
    start = time.perf_counter()
    prefix = engine.prefill(params=params, padded_tokens=padded, true_length=true_len)
    jax.block_until_ready(prefix["k"])
    if i:
      prefill_s.append(time.perf_counter() - start)
  return {"step_ms": step_ms, "prefill_s": statistics.median(prefill_s)}


def measure(tree: str, slots: int, length: int, steps: int) -> dict:
  out = subprocess.run(
      [sys.executable, os.path.abspath(__file__), "--worker", tree, "--slots", str(slots),
       "--lengths", str(length), "--steps", str(steps)],
      cwd=tree, env=dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=tree), check=True,
      capture_output=True,
      text=True).stdout
  return json.loads(out.strip().splitlines()[-1])


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--commits", nargs=2)
  parser.add_argument("--slots", type=int, nargs="+", default=[2, 8])
  parser.add_argument("--lengths", type=int, nargs="+", default=[450, 1200])
  parser.add_argument("--steps", type=int, default=20)
  parser.add_argument("--rounds", type=int, default=2)
  parser.add_argument("--worker", help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.worker:
    print(json.dumps(worker(args.worker, args.slots[0], args.lengths[0], args.steps)))
    return
  if not args.commits:
    parser.error("--commits BEFORE AFTER")
  from harnessrl_jax.experiment import machine  # pylint: disable=g-import-not-at-top
  print("machine before:", machine(), flush=True)
  with tempfile.TemporaryDirectory(prefix="serving-decode-") as tmp:
    trees = {}
    for commit in args.commits:
      rev = subprocess.run(["git", "rev-parse", "--short", commit], cwd=REPO, check=True,
                           capture_output=True, text=True).stdout.strip()
      trees[rev] = os.path.join(tmp, rev)
      subprocess.run(["git", "worktree", "add", "--detach", trees[rev], rev], cwd=REPO,
                     check=True, capture_output=True)
    try:
      runs: dict[tuple, dict[str, list[dict]]] = {}
      for slots in args.slots:
        for length in args.lengths:
          cell = runs.setdefault((slots, length), {rev: [] for rev in trees})
          for _ in range(args.rounds):
            for rev, tree in trees.items():
              cell[rev].append(measure(tree, slots, length, args.steps))
              print(slots, length, rev, cell[rev][-1], flush=True)
    finally:
      for tree in trees.values():
        subprocess.run(["git", "worktree", "remove", "--force", tree], cwd=REPO,
                       check=False, capture_output=True)
  print("machine after:", machine(), flush=True)
  before, after = trees
  print(f"| slots | prompt tokens | step ms {before} | step ms {after} | ratio "
        f"| prefill s {before} | prefill s {after} | ratio |")
  print("|---|---|---|---|---|---|---|---|")
  for (slots, length), cell in runs.items():
    med = {rev: {k: statistics.median(r[k] for r in rs) for k in ("step_ms", "prefill_s")}
           for rev, rs in cell.items()}
    b, a = med[before], med[after]
    print(f"| {slots} | {length} | {b['step_ms']:.1f} | {a['step_ms']:.1f} | "
          f"{b['step_ms'] / a['step_ms']:.2f}x | {b['prefill_s']:.2f} | {a['prefill_s']:.2f} "
          f"| {b['prefill_s'] / a['prefill_s']:.2f}x |")


if __name__ == "__main__":
  main()
