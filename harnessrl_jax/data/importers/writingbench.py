"""WritingBench -> our tasks.

Upstream row: {index, domain1, domain2, query, checklist: [{name, criteria_description,
"1-2", "3-4", "5-6", "7-8", "9-10"}]}: each checklist item is scored 1-10 by a critic
model, with a description per two-point band. Our judge scores 0/1, so each item becomes one
binary criterion of weight 1.0 (WritingBench averages its items with equal weight) that is met
when the response would score at least PASS_SCORE = 7 on that item: the "7-8" band, the
first whose descriptions read as good work rather than adequate. The criterion text is
"<Name>: <criteria_description> Met when ..." with the 7-8 band description spelled out; all
five band descriptions are kept in task meta["writingbench_levels"][criterion_id] (Criterion
has no meta of its own) so the original 1-10 scoring stays reproducible. Domain: "writing".
"""

from __future__ import annotations

from typing import Any

from harnessrl_jax.data.importers.common import Fields, criterion_id, task_id

SOURCE = "writingbench"
DOMAIN = "writing"
LEVELS = ("1-2", "3-4", "5-6", "7-8", "9-10")
PASS_SCORE = 7
PASS_LEVEL = "7-8"


def _title(name: str) -> str:
  """"Content_Relevance_and_Structure" -> "Content relevance and structure"."""
  words = name.replace("_", " ").split()
  return " ".join([words[0]] + [w if w.isupper() else w.lower() for w in words[1:]])


def convert_record(record: dict[str, Any]) -> dict[str, Any]:
  f = Fields(record)
  index = f.get(record, "index", "index", (int, str))
  query = f.text(record, "query", "query")
  criteria, levels = [], {}
  for i, (path, item) in enumerate(f.items(record, "checklist", "checklist")):
    name = f.text(item, "name", path + ".name")
    description = f.text(item, "criteria_description", path + ".criteria_description")
    bands = {level: f.text(item, level, f'{path}["{level}"]') for level in LEVELS}
    if name is None or description is None or None in bands.values():
      continue
    cid = criterion_id(i)
    text = (f"{_title(name)}: {description} Met when the response deserves at least "
            f"{PASS_SCORE} of 10 on this point, that is: {bands[PASS_LEVEL]}")
    criteria.append({"id": cid, "text": text, "weight": 1.0, "tags": [f"writingbench:{name}"]})
    levels[cid] = {"name": name, **bands}
  meta = {"upstream_index": index, "writingbench_levels": levels,
          "writingbench_pass_score": PASS_SCORE}
  for key in ("domain1", "domain2"):
    value = f.get(record, key, key, str, optional=True)
    if value is not None:
      meta[key] = value
  f.done()
  return {"id": task_id(SOURCE, index), "domain": DOMAIN, "source": SOURCE,
          "prompt": [{"role": "user", "content": query}], "criteria": criteria,
          "reference_answer": None, "meta": meta}
