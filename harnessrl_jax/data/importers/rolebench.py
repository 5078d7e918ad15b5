"""RoleBench -> our tasks.

Upstream row: {role, question, generated: [reference answers], type?} and no rubric at all.
Everything rubric-like here is OUR wording, not RoleBench's:
  - prompt: a system message casting the model as the role (SYSTEM_TEMPLATE), then the
    question as the user message;
  - criteria (weight 1.0 each): c0 stays in character as ROLE, c1 responds to the question or
    instruction, c2 agrees in substance with the reference answer;
  - reference_answer: the first generated answer; all of them stay in
    meta["rolebench_references"] for RoleBench's ROUGE-L evaluation.
Domain: "roleplay". RoleBench has no ids, so the task id hashes (role, question).
"""

from __future__ import annotations

from typing import Any

from harnessrl_jax.data.importers.common import Fields, content_id, criterion_id

SOURCE = "rolebench"
DOMAIN = "roleplay"
SYSTEM_TEMPLATE = (
    "You are {role}. Stay in character as {role} for the whole conversation: answer in "
    "{role}'s voice, with their personality, knowledge and manner of speaking, and never "
    "say that you are an AI or a language model.")
CRITERIA = (
    "Stays in character as {role} throughout: speaks in {role}'s voice, personality and manner "
    "of speaking, and never breaks character (for example by calling itself an AI, a language "
    "model or an assistant).",
    "Responds directly to the user's question or instruction and gets its substance right.",
    "Is consistent in substance with the reference answer (the same facts, answer and stance); "
    "the wording may differ.",
)


def convert_record(record: dict[str, Any]) -> dict[str, Any]:
  f = Fields(record)
  role = f.text(record, "role", "role")
  question = f.text(record, "question", "question")
  generated = f.get(record, "generated", "generated", list)
  references = []
  if generated is not None:
    if not generated:
      f.add("generated", "must hold at least one reference answer")
    for i, answer in enumerate(generated):
      if not isinstance(answer, str) or not answer.strip():
        f.add(f"generated[{i}]", "must be a non-empty string")
      else:
        references.append(answer.strip())
  kind = f.get(record, "type", "type", (str, list), optional=True)
  if isinstance(kind, str):
    kind = [kind]
  if kind is not None and not all(isinstance(k, str) for k in kind):
    f.add("type", "must be a string or a list of strings")
  f.done()
  meta = {"role": role, "rolebench_references": references}
  if kind:
    meta["rolebench_type"] = list(kind)
  if isinstance(record.get("_file"), str):
    meta["rolebench_file"] = record["_file"]
  return {"id": content_id(SOURCE, role, question), "domain": DOMAIN, "source": SOURCE,
          "prompt": [{"role": "system", "content": SYSTEM_TEMPLATE.format(role=role)},
                     {"role": "user", "content": question}],
          "criteria": [{"id": criterion_id(i), "text": t.format(role=role), "weight": 1.0,
                        "tags": ["rolebench:ours"]}
                       for i, t in enumerate(CRITERIA)],
          "reference_answer": references[0], "meta": meta}
