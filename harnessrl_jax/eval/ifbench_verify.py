"""IFBench's evaluation, in the shape of its own: verdicts for each row of IN.jsonl into
OUT.jsonl, then prompt- and instruction-level accuracy.

  python -m harnessrl_jax.eval.ifbench_verify --mode=official IN.jsonl OUT.jsonl
  python -m harnessrl_jax.eval.ifbench_verify --mode=strict --loose IN.jsonl OUT.jsonl

Each input row is a test row with its response: {key, prompt, instruction_id_list, kwargs,
response}. Each output row is {key, instruction_id_list, follow_all_instructions,
follow_instruction_list}, as IFBench's eval_results_strict.jsonl (strict mode adds
"official_fallback": the ids our checks leave to the official verdict).
--mode=official reproduces the official verifiers (needs NLTK_DATA, see
harnessrl_jax/eval/ifverify/text.py); --mode=strict uses our corrected checks.
--compare=RESULTS.jsonl (the official eval_results_*.jsonl, matched by prompt) prints the
share of instruction verdicts that agree, per id where they do not.
"""

from __future__ import annotations

import collections
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from absl import flags

from harnessrl_jax import cli
from harnessrl_jax.errors import DataError
from harnessrl_jax.eval.ifverify import registry

_MODE = flags.DEFINE_enum("mode", "official", list(registry.MODES),
                          "official: the official verifiers' verdicts; strict: ours")
_LOOSE = flags.DEFINE_bool("loose", False, "the official loose variants (8 per response)")
_SKIP = flags.DEFINE_bool("skip_unavailable", False,
                          "write null for an instruction whose checker needs data this "
                          "machine lacks (words:start_verb without NLTK's POS tagger) and "
                          "leave it out of the accuracy, instead of stopping")
_COMPARE = flags.DEFINE_string("compare", "", "official eval_results_*.jsonl to compare with")


def read_jsonl(path: str) -> list[tuple[str, dict[str, Any]]]:
  """(where, row) per line; DataError naming the file and line of anything unreadable."""
  out, problems = [], []
  with open(path, encoding="utf-8") as f:
    for n, line in enumerate(f, 1):
      if not line.strip():
        continue
      try:
        row = json.loads(line)
      except json.JSONDecodeError as e:
        problems.append(f"{path}:{n}: not JSON ({e.msg})")
        continue
      if not isinstance(row, dict):
        problems.append(f"{path}:{n}: not a JSON object")
        continue
      out.append((f"{path}:{n}", row))
  if problems:
    raise DataError(problems)
  return out


def verify(rows: Iterable[tuple[str, Mapping[str, Any]]], mode: str, loose: bool,
           skip_unavailable: bool = False) -> list[dict[str, Any]]:
  return [registry.verify_row(row, mode, loose, where=where,
                              skip_unavailable=skip_unavailable) for where, row in rows]


def accuracy(results: Sequence[Mapping[str, Any]]) -> dict[str, float]:
  """Prompt-level and instruction-level accuracy, as IFBench's print_report (verdicts
  that are None, see --skip_unavailable, left out)."""
  prompts = [r["follow_all_instructions"] for r in results
             if r["follow_all_instructions"] is not None]
  follows = [f for r in results for f in r["follow_instruction_list"] if f is not None]
  return {"prompt_level": sum(prompts) / max(len(prompts), 1),
          "instruction_level": sum(follows) / max(len(follows), 1)}


def agreement(results: Sequence[Mapping[str, Any]], prompts: Sequence[str],
              official: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
  """Instruction verdicts of `results` (rows in the order of `prompts`) against official
  result rows (matched by prompt): {"pairs", "agree", "by_id": {id: [agree, pairs]}}."""
  want = {r["prompt"]: r["follow_instruction_list"] for r in official}
  by_id = collections.defaultdict(lambda: [0, 0])
  for res, prompt in zip(results, prompts):
    if prompt not in want:
      continue
    for iid, got, exp in zip(res["instruction_id_list"], res["follow_instruction_list"],
                             want[prompt]):
      if got is None:
        continue
      by_id[iid][0] += int(got == exp)
      by_id[iid][1] += 1
  pairs = sum(v[1] for v in by_id.values())
  return {"pairs": pairs, "agree": sum(v[0] for v in by_id.values()), "by_id": dict(by_id)}


def main(argv: list[str]) -> None:
  if len(argv) != 3:
    raise DataError([f"usage: python -m harnessrl_jax.eval.ifbench_verify [--mode=...] "
                     f"[--loose] IN.jsonl OUT.jsonl (got {len(argv) - 1} paths)"])
  src, dst = argv[1], argv[2]
  rows = read_jsonl(src)
  if not rows:
    raise DataError([f"{src}: no rows"])
  results = verify(rows, _MODE.value, _LOOSE.value, _SKIP.value)
  with open(dst, "w", encoding="utf-8") as f:
    for r in results:
      f.write(json.dumps(r) + "\n")
  acc = accuracy(results)
  print(f"{_MODE.value} {'loose' if _LOOSE.value else 'strict'}: "
        f"prompt-level {acc['prompt_level']:.4f}  instruction-level "
        f"{acc['instruction_level']:.4f}  ({len(results)} rows -> {dst})")
  if _COMPARE.value:
    ag = agreement(results, [row["prompt"] for _, row in rows],
                   [row for _, row in read_jsonl(_COMPARE.value)])
    print(f"agreement with {_COMPARE.value}: {ag['agree']}/{ag['pairs']} instruction "
          f"verdicts ({ag['agree'] / max(ag['pairs'], 1):.2%})")
    for iid, (ok, n) in sorted(ag["by_id"].items()):
      if ok < n:
        print(f"  {iid}: {ok}/{n}")


if __name__ == "__main__":
  cli.run(main, positional=2)
