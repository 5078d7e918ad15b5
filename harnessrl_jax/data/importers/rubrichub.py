"""RubricHub export -> our tasks.

Upstream row: {question, id, rubrics: [{criterion, points}]} with integer points 0..10.
Points become weights unchanged (a negative value, should one occur, keeps the HealthBench
meaning: a penalty when met). The format has no domain: tasks default to "science"
(override with `convert --domain=...`).
"""

from __future__ import annotations

from typing import Any

from harnessrl_jax.data.importers.common import Fields, criterion_id, task_id

SOURCE = "rubrichub"
DEFAULT_DOMAIN = "science"


def convert_record(record: dict[str, Any]) -> dict[str, Any]:
  f = Fields(record)
  rid = f.get(record, "id", "id", (str, int))
  question = f.text(record, "question", "question")
  criteria = []
  for i, (path, r) in enumerate(f.items(record, "rubrics", "rubrics")):
    text = f.text(r, "criterion", path + ".criterion")
    points = f.number(r, "points", path + ".points")
    criteria.append({"id": criterion_id(i), "text": text, "weight": points, "tags": []})
  f.done()
  return {"id": task_id(SOURCE, rid), "domain": DEFAULT_DOMAIN, "source": SOURCE,
          "prompt": [{"role": "user", "content": question}], "criteria": criteria,
          "reference_answer": None, "meta": {"upstream_id": rid}}
