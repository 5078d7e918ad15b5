"""HealthBench -> our tasks (openai/simple-evals healthbench JSONL).

Upstream row: {prompt: [{role, content}], rubrics: [{criterion, points, tags}],
example_tags, prompt_id, ideal_completions_data}. The mapping is 1:1: HealthBench already
uses our sign convention (a negative-points criterion describes bad behaviour and costs its
points when met) and our score (met points over the sum of positive points).
"""

from __future__ import annotations

from typing import Any

from harnessrl_jax.data.importers.common import Fields, criterion_id, task_id

SOURCE = "healthbench"


def convert_record(record: dict[str, Any]) -> dict[str, Any]:
  f = Fields(record)
  pid = f.get(record, "prompt_id", "prompt_id", (str, int))
  prompt = []
  for path, m in f.items(record, "prompt", "prompt"):
    role = f.text(m, "role", path + ".role")
    content = f.get(m, "content", path + ".content", str)
    prompt.append({"role": role, "content": content})
  criteria = []
  for i, (path, r) in enumerate(f.items(record, "rubrics", "rubrics")):
    text = f.text(r, "criterion", path + ".criterion")
    points = f.number(r, "points", path + ".points")
    tags = f.get(r, "tags", path + ".tags", list, optional=True) or []
    if not all(isinstance(t, str) for t in tags):
      f.add(path + ".tags", "must be a list of strings")
    criteria.append({"id": criterion_id(i), "text": text, "weight": points,
                     "tags": list(tags)})
  example_tags = f.get(record, "example_tags", "example_tags", list, optional=True) or []
  ideal = f.get(record, "ideal_completions_data", "ideal_completions_data", dict,
                optional=True) or {}
  reference = f.text(ideal, "ideal_completion", "ideal_completions_data.ideal_completion",
                     optional=True)
  f.done()
  return {"id": task_id(SOURCE, pid), "domain": "medical", "source": SOURCE,
          "prompt": prompt, "criteria": criteria, "reference_answer": reference,
          "meta": {"prompt_id": pid, "example_tags": example_tags}}
