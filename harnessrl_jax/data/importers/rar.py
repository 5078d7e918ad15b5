"""RaR (Rubrics as Rewards, RaR-Medicine / RaR-Science) -> our tasks.

Upstream row: {question, reference_answer, question_source, rubric: [{title, description,
weight: int}], rubric_list, rubric_count}. Each rubric item has a category, named either by
its title ("Essential Criteria") or by a prefix of its description ("Pitfall Criteria: ...").
Mapping of an item:
  - text: the description, with a leading "<Category> Criteria:" prefix removed;
  - tags: ["rar:essential"] etc. when the category is known;
  - weight: Essential / Important / Optional keep +|weight|. A Pitfall item describes a
    mistake ("Does not mention that ..."); our judge marks a criterion met when its text is
    true of the response, so a met pitfall means the mistake happened and must cost points:
    weight = -|weight|, whether upstream stored the magnitude or the negative value. A negative
    weight on a non-pitfall category contradicts the category and is rejected rather than
    guessed. Items with no recognisable category keep their weight as given.
`rubric_list` and `rubric_count` repeat `rubric` and are not used. RaR has no ids, so the task
id hashes the question; it has no domain field: tasks default to "science" (convert with
`--domain=medical` for RaR-Medicine).
"""

from __future__ import annotations

import re
from typing import Any

from harnessrl_jax.data.importers.common import Fields, content_id, criterion_id

SOURCE = "rar"
DEFAULT_DOMAIN = "science"
CATEGORIES = ("essential", "important", "optional", "pitfall")
_PREFIX = re.compile(r"^\s*(essential|important|optional|pitfall)\s+criteri(?:a|on)\s*:?\s*",
                     re.IGNORECASE)


def _category(title: str | None, description: str) -> tuple[str | None, str]:
  """(category or None, description without its category prefix)."""
  m = _PREFIX.match(description)
  if m:
    return m.group(1).lower(), description[m.end():].strip()
  if title:
    m = _PREFIX.match(title)
    if m and not title[m.end():].strip():
      return m.group(1).lower(), description
  return None, description


def convert_record(record: dict[str, Any]) -> dict[str, Any]:
  f = Fields(record)
  question = f.text(record, "question", "question")
  reference = f.text(record, "reference_answer", "reference_answer", optional=True)
  qsource = f.get(record, "question_source", "question_source", str, optional=True)
  criteria, titles = [], []
  for i, (path, r) in enumerate(f.items(record, "rubric", "rubric")):
    title = f.text(r, "title", path + ".title", optional=True)
    description = f.text(r, "description", path + ".description")
    weight = f.number(r, "weight", path + ".weight")
    if description is None or weight is None:
      continue
    category, text = _category(title, description)
    if not text:
      f.add(path + ".description", "holds only a category prefix, no criterion")
      continue
    if category == "pitfall":
      weight = -abs(weight)
    elif category is not None and weight < 0:
      f.add(path + ".weight", f"negative weight {weight:g} on a '{category}' item (only "
                              "pitfall items penalise)")
    titles.append(title)
    criteria.append({"id": criterion_id(i), "text": text, "weight": weight,
                     "tags": [f"rar:{category}"] if category else []})
  f.done()
  meta = {"rubric_titles": titles}
  if qsource:
    meta["question_source"] = qsource
  return {"id": content_id(SOURCE, question), "domain": DEFAULT_DOMAIN, "source": SOURCE,
          "prompt": [{"role": "user", "content": question}], "criteria": criteria,
          "reference_answer": reference, "meta": meta}
