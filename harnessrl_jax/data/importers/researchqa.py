"""ResearchQA -> our tasks.

Upstream row: {id, general_domain, subdomain, field, query, date, rubric: [{rubric_item,
type}]}. ResearchQA rubric items are unweighted desiderata of a scholarly answer, so each
becomes a criterion of weight 1.0 tagged `researchqa:<type>`; the taxonomy fields and date go
to meta. Domain: "science" (scholarly question answering).
"""

from __future__ import annotations

from typing import Any

from harnessrl_jax.data.importers.common import Fields, criterion_id, task_id

SOURCE = "researchqa"
DOMAIN = "science"


def convert_record(record: dict[str, Any]) -> dict[str, Any]:
  f = Fields(record)
  rid = f.get(record, "id", "id", (str, int))
  query = f.text(record, "query", "query")
  criteria = []
  for i, (path, r) in enumerate(f.items(record, "rubric", "rubric")):
    text = f.text(r, "rubric_item", path + ".rubric_item")
    kind = f.text(r, "type", path + ".type", optional=True)
    criteria.append({"id": criterion_id(i), "text": text, "weight": 1.0,
                     "tags": [f"researchqa:{kind}"] if kind else []})
  meta = {"upstream_id": rid}
  for key in ("general_domain", "subdomain", "field", "date"):
    value = f.get(record, key, key, str, optional=True)
    if value is not None:
      meta[key] = value
  f.done()
  return {"id": task_id(SOURCE, rid), "domain": DOMAIN, "source": SOURCE,
          "prompt": [{"role": "user", "content": query}], "criteria": criteria,
          "reference_answer": None, "meta": meta}
