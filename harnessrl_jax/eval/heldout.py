"""The held-out score: one definition, used by the training log, the report and `evaluate`.

Each held-out task gets one greedy response to its prompt WITHOUT guidance, graded by the
judge under the task's UNCHANGED seed rubric (the task file's criteria, never the harness's
evolved ones). Its item score is 100 x its rubric reward, in points (the scale of the
harness's Lambda = 100 and of the paper's in-domain numbers). A task whose response got no
verdict on any positive-weight criterion has no reward: it is left out and counted in
"invalid".

  score = the mean over domains of each domain's mean item score (a macro average).

Why the macro average: the paper's in-domain number is the average over its five domains,
and a domain should weigh the same whether the held-out file (or `train.eval_tasks`'s subset,
or an imported benchmark) holds 10 of its tasks or 100. On a split with the same number of
valid tasks per domain (the bundled one: 10 each) it equals the mean over tasks.

The result also carries its judged cells that got no verdict (run_files.UNSCORED: count,
share, cells, cause), so that a score over fewer verdicts than asked is visible as such.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from harnessrl_jax import run_files as rf
from harnessrl_jax.data.schema import Task
from harnessrl_jax.judges.grading import Judged, grade
from harnessrl_jax.judges.judge import JudgeError
from harnessrl_jax.rollout.texts import Generate

BENCHMARK = "heldout"
METRIC = "seed-rubric reward, points (0-100), mean over domains"


def score(tasks: Sequence[Task], judged: Judged, responses: Sequence[str]) -> dict[str, Any]:
  """The held-out result of one response per task (`judged` of shape [T, K, 1])."""
  reward, valid = judged.rewards[:, 0], judged.valid[:, 0]
  items = {t.id: 100.0 * float(r) for t, r, v in zip(tasks, reward, valid) if v}
  by_domain: dict[str, float | None] = {}
  for d in sorted({t.domain for t in tasks}):
    vals = [items[t.id] for t in tasks if t.domain == d and t.id in items]
    by_domain[d] = float(np.mean(vals)) if vals else None
  means = [v for v in by_domain.values() if v is not None]
  return {"benchmark": BENCHMARK, "metric": METRIC,
          "score": float(np.mean(means)) if means else None,
          "by_domain": by_domain, "num_items": len(items), "items": items,
          "invalid": int((~valid).sum()), rf.UNSCORED: judged.unscored.to_json(),
          "example": {"task": tasks[0].id, "response": responses[0]} if tasks else None,
          rf.RESPONSES: {t.id: r for t, r in zip(tasks, responses)}}


def evaluate(tasks: Sequence[Task], generate: Generate, judge, *,
             where: str = "held-out evaluation") -> dict[str, Any]:
  """Greedy responses to `tasks` (no guidance) scored under their seed rubrics; a JudgeError
  (too many cells without a verdict) names `where` it happened."""
  responses = generate([t.prompt for t in tasks])
  try:
    judged = grade(judge, tasks, [[r] for r in responses])
  except JudgeError as e:
    raise JudgeError(f"{where}: {e}", e.unscored) from None
  return score(tasks, judged, responses)
