"""Evaluation protocols: the six OOD benchmarks (the held-out score is eval/heldout.py).

Every protocol takes a `generate(conversations) -> responses` callable (one greedy response
each, no guidance fields) and returns a JSON-ready dict
  {"benchmark", "metric", "score" (0-100), "num_items", "items": {item id: 0-100}, ...}
whose per-item scores let `stats.compare` pair two runs or checkpoints item by item.

  - held-out: eval/heldout.py (the one definition, shared with the training driver).
  - MedQA / GPQA-Diamond: accuracy; the answer letter is read by `mcq.extract_choice`.
  - RoleBench: ROUGE-L F (rouge.py) against the item's references, best over references.
  - IFBench: the importer's programmatic checks (checks.py, our strict semantics), no LLM;
    "score" is prompt-level strict accuracy (all checked instructions of the prompt pass),
    "instruction_accuracy" the share of checked instructions passing. Instructions without
    a faithful check ("unverified") are left out and counted; prompts with none checked are
    left out. "official" is IFBench's own evaluation (eval/ifverify, official mode: every
    id, the official verifiers' quirks included): the numbers to put beside published ones.
  - IFEval: the same protocol through the IFEval importer (its 25 ids, all checked; official
    mode: eval/ifverify/official_ifeval.py).
  - WritingBench: the importer turns each 1-10 checklist item into a binary criterion met at
    >= 7/10; the judge scores them; item = 100 * share of its checklist items met (equal
    weights, as WritingBench averages its items). This "score" is a pass rate at the 7/10
    bar, NOT WritingBench's mean 1-10 score. When the judge has an LLM client, WritingBench's
    own protocol runs too (eval/writingbench.py): "score_1_10", the number to put beside
    published ones (same critic model needed), and "pass_rate_at_7" from those same 1-10
    scores, which shows what the binary conversion does to identical judgments.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from harnessrl_jax.data import checks
from harnessrl_jax.data.importers import IMPORTERS
from harnessrl_jax.data.loader import parse_task
from harnessrl_jax.data.schema import Task
from harnessrl_jax.errors import ConfigError, DataError
from harnessrl_jax.eval import mcq
from harnessrl_jax.eval import writingbench as wb_scoring
from harnessrl_jax.eval.common import Generate, json_rows, require_file
from harnessrl_jax.eval.ifverify import registry
from harnessrl_jax.eval.rouge import rouge_l_multi
from harnessrl_jax.judges.client import TextClient
from harnessrl_jax.judges.grading import grade


def _result(benchmark: str, metric: str, items: dict[str, float], **extra) -> dict:
  values = list(items.values())
  return {"benchmark": benchmark, "metric": metric,
          "score": float(np.mean(values)) if values else float("nan"),
          "num_items": len(values), "items": items, **extra}


def multiple_choice(benchmark: str, items: Sequence[mcq.ChoiceItem], generate: Generate) -> dict:
  responses = generate([item.prompt() for item in items])
  picks = [mcq.extract_choice(r, item.options) for r, item in zip(responses, items)]
  scores = {item.id: 100.0 * (pick == item.answer) for item, pick in zip(items, picks)}
  # The same responses read by simple-evals' rule, so scores compare with published ones.
  simple = [mcq.extract_choice_simple_evals(r, item.options)
            for r, item in zip(responses, items)]
  hits = [100.0 * (pick == item.answer) for item, pick in zip(items, simple)]
  return _result(benchmark, "accuracy", scores, unparsed=sum(p is None for p in picks),
                 score_simple_evals=float(np.mean(hits)) if hits else float("nan"),
                 unparsed_simple_evals=sum(p is None for p in simple))


def medqa(path: str, generate: Generate) -> dict:
  return multiple_choice("MedQA", mcq.load_medqa(path), generate)


def gpqa(path: str, generate: Generate, *, seed: int = 0) -> dict:
  return multiple_choice("GPQA-Diamond", mcq.load_gpqa(path, seed=seed), generate)


def import_tasks(benchmark: str, path: str, fmt: str) -> tuple[Task, ...]:
  """Upstream JSONL -> tasks through the named importer; bad lines are FILE:LINE problems."""
  require_file(benchmark, path)
  convert, tasks, problems = IMPORTERS[fmt], [], []
  for _, where, row in json_rows(path, problems):
    try:
      tasks.append(parse_task(convert(row), where=where))
    except DataError as e:
      problems.extend(p if p.startswith(path) else f"{where}: {p}" for p in e.problems)
  if problems:
    raise DataError(problems)
  return tuple(tasks)


def rolebench(path: str, generate: Generate) -> dict:
  tasks = import_tasks("RoleBench", path, "rolebench")
  responses = generate([t.prompt for t in tasks])
  items = {}
  for i, (task, response) in enumerate(zip(tasks, responses)):
    # RoleBench repeats questions across files; the line number keeps ids unique.
    items[f"{task.id}#{i}"] = 100.0 * rouge_l_multi(response,
                                                    task.meta["rolebench_references"])
  return _result("RoleBench", "ROUGE-L F x100", items)


def ifbench(path: str, generate: Generate) -> dict:
  return instruction_following("IFBench", path, "ifbench", generate)


def ifeval(path: str, generate: Generate) -> dict:
  return instruction_following("IFEval", path, "ifeval", generate)


def instruction_following(benchmark: str, path: str, fmt: str, generate: Generate) -> dict:
  """IFBench's and IFEval's protocol (module docstring): the `fmt` importer's checks, plus
  the benchmark's official evaluation under "official"."""
  tasks = import_tasks(benchmark, path, fmt)
  responses = generate([t.prompt for t in tasks])
  items, passed, checked, unverified = {}, 0, 0, 0
  for task, response in zip(tasks, responses):
    verdicts = [checks.run_check(c.check, response, prompt=task.user_text)
                for c in task.criteria if c.check is not None]
    unverified += sum(c.check is None for c in task.criteria)
    if verdicts:
      items[task.id] = 100.0 * all(verdicts)
      passed, checked = passed + sum(verdicts), checked + len(verdicts)
  rows = [row for _, _, row in json_rows(path, [])]   # import_tasks read them all cleanly
  return _result(benchmark, "prompt-level strict accuracy", items,
                 instruction_accuracy=100.0 * passed / checked if checked else float("nan"),
                 unverified_instructions=unverified, prompts_without_checks=len(tasks) - len(items),
                 official=official_scores(rows, responses))


def official_scores(rows: Sequence[dict], responses: Sequence[str]) -> dict:
  """IFBench's (or IFEval's) own evaluation of `responses` (ifverify, official mode): prompt-
  and instruction-level accuracy (0-100), strict and loose, as published numbers are.
  Instructions whose checker needs data this machine lacks are left out and named under
  "unscored" ({id: count}, with "why"), their prompts too; {"unavailable": why} where it
  cannot run at all (NLTK's data missing, an unknown id)."""
  out = {}
  try:
    for loose in (False, True):
      results = [registry.verify_row({**row, "response": r}, "official", loose,
                                     skip_unavailable=True)
                 for row, r in zip(rows, responses)]
      prompts = [res["follow_all_instructions"] for res in results
                 if res["follow_all_instructions"] is not None]
      follows = [f for res in results for f in res["follow_instruction_list"]
                 if f is not None]
      out["loose" if loose else "strict"] = {
          "prompt_level": 100.0 * float(np.mean(prompts)) if prompts else float("nan"),
          "instruction_level": 100.0 * float(np.mean(follows)) if follows else float("nan"),
          "prompts": len(prompts), "instructions": len(follows)}
      skipped = [res["unscored"] for res in results if "unscored" in res]
  except (ConfigError, DataError) as e:
    return {"unavailable": str(e)}
  if skipped:
    ids = [iid for u in skipped for iid in u]
    out["unscored"] = {iid: ids.count(iid) for iid in sorted(set(ids))}
    out["unscored_why"] = sorted({why for u in skipped for why in u.values()})
  return out


def writingbench(path: str, generate: Generate, judge) -> dict:
  tasks = import_tasks("WritingBench", path, "writingbench")
  responses = generate([t.prompt for t in tasks])
  judged = grade(judge, tasks, [[r] for r in responses])
  items = {}
  for t, task in enumerate(tasks):
    k = len(task.criteria)
    scored = judged.scored[t, :k, 0]
    if scored.any():
      items[task.id] = 100.0 * float(judged.scores[t, :k, 0][scored].mean())
  extra = {"unscored_items": len(tasks) - len(items)}
  client = getattr(judge, "client", None)
  if isinstance(client, TextClient):   # WritingBench's own 1-10 protocol (eval/writingbench.py)
    rated = wb_scoring.score_items(client, tasks, responses,
                                   parse_retries=judge.settings.parse_retries)
    extra.update(wb_scoring.summary(tasks, rated))
  else:
    extra.update(score_1_10=None, protocol_1_10="not run: the judge has no LLM client (program "
                 "backend), so only the binary pass rate at >= 7/10 is reported")
  return _result("WritingBench", "checklist items at >= 7/10, % (judge)", items, **extra)


def run_ood(paths: dict[str, str], generate: Generate, judge=None, *, seed: int = 0) -> dict:
  """Runs each benchmark whose path is given (keys: the flag names in common.FLAGS)."""
  out = {}
  if paths.get("medqa"):
    out["MedQA"] = medqa(paths["medqa"], generate)
  if paths.get("gpqa"):
    out["GPQA-Diamond"] = gpqa(paths["gpqa"], generate, seed=seed)
  if paths.get("rolebench"):
    out["RoleBench"] = rolebench(paths["rolebench"], generate)
  if paths.get("ifbench"):
    out["IFBench"] = ifbench(paths["ifbench"], generate)
  if paths.get("ifeval"):
    out["IFEval"] = ifeval(paths["ifeval"], generate)
  if paths.get("writingbench"):
    if judge is None:
      raise DataError(["WritingBench: needs a judge with an LLM backend (config.judge)"])
    out["WritingBench"] = writingbench(paths["writingbench"], generate, judge)
  if out:
    scores = [r["score"] for r in out.values() if np.isfinite(r["score"])]
    out["ood_mean"] = float(np.mean(scores)) if scores else float("nan")
  return out
