"""The guidance dial g_t: privileged fields mounted after a training prompt.

Fields (at most one of each per task): `<criterion>` (a paraphrase of the target
criterion), `<reference>` (positive and negative example responses), `<critique>` (the
previous group's shortfall). A task may have at most `guidance_cap` fields mounted; the
cap follows `guidance_caps[quarter]` and is 0 at the last training step, so the final
harness carries none. Evaluation prompts never carry guidance.

Rendering (training only): the mounted fields, in FIELDS order, are appended to the last
user message after a blank line, each as a tagged block

    <criterion>
    ...content...
    </criterion>

separated by newlines. A task without a user message gets one user message holding the
blocks. A field's content may not contain its own closing tag, so blocks parse back
unambiguously.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from harnessrl_jax.data.schema import Message, Task
from harnessrl_jax.errors import HarnessError
from harnessrl_jax.harness.state import FIELDS, Harness, TaskState


def cap_for_step(caps, step: int, total_steps: int) -> int:
  """The guidance cap at `step` (0-based) of a run of `total_steps` steps."""
  if total_steps < 1 or step < 0:
    raise HarnessError(f"guidance schedule: step={step}, total_steps={total_steps}: need "
                       "total_steps >= 1 and step >= 0")
  if step >= total_steps - 1:
    return 0  # the schedule removes every remaining field by the end of training
  return int(caps[min(3, (4 * step) // total_steps)])


def _with_guidance(h: Harness, i: int, guidance: tuple[tuple[str, str], ...]) -> Harness:
  tasks = list(h.tasks)
  tasks[i] = dataclasses.replace(tasks[i], guidance=guidance)
  gmask = np.array(h.guidance_mask)
  gmask[i] = [f in dict(guidance) for f in FIELDS]
  gmask.flags.writeable = False
  return h.replace(tasks=tuple(tasks), guidance_mask=gmask)


def _check_field(field: str) -> None:
  if field not in FIELDS:
    raise HarnessError(f"guidance field {field!r} is unknown; use one of {FIELDS}")


def add_guidance(h: Harness, task_id: str, field: str, content: str) -> Harness:
  """Mounts `field` with `content` on the task."""
  _check_field(field)
  if not isinstance(content, str) or not content.strip():
    raise HarnessError(f"guidance <{field}> content must be a non-empty string")
  if f"</{field}>" in content:
    raise HarnessError(f"guidance <{field}> content contains its own closing tag "
                       f"</{field}>; the rendered block would not parse back")
  i = h.index(task_id)
  t = h.tasks[i]
  if field in dict(t.guidance):
    raise HarnessError(f"task {task_id!r} already has <{field}> mounted; drop it first")
  cap = int(np.asarray(h.guidance_cap))
  if len(t.guidance) + 1 > cap:
    raise HarnessError(f"task {task_id!r} has {len(t.guidance)} guidance fields mounted "
                       f"and the cap is now {cap}")
  return _with_guidance(h, i, t.guidance + ((field, content),))


def drop_guidance(h: Harness, task_id: str, field: str) -> Harness:
  """Unmounts `field` from the task."""
  _check_field(field)
  i = h.index(task_id)
  t = h.tasks[i]
  if field not in dict(t.guidance):
    raise HarnessError(f"task {task_id!r} has no <{field}> mounted (mounted: "
                       f"{[f for f, _ in t.guidance]})")
  return _with_guidance(h, i, tuple(g for g in t.guidance if g[0] != field))


def enforce_schedule(h: Harness, step: int, total_steps: int) -> Harness:
  """Sets the cap for `step` and drops each task's oldest fields until it fits.

  The cap never rises: calling this with an earlier step than before is refused.
  """
  cap = cap_for_step(h.guidance_caps, step, total_steps)
  old = int(np.asarray(h.guidance_cap))
  if cap > old:
    raise HarnessError(f"guidance schedule at step {step}/{total_steps} gives cap {cap}, "
                       f"above the current cap {old}; the cap never increases")
  out = h.replace(guidance_cap=_scalar(cap))
  for i, t in enumerate(h.tasks):
    if len(t.guidance) > cap:
      out = _with_guidance(out, i, t.guidance[len(t.guidance) - cap:])
  return out


def _scalar(v: int) -> np.ndarray:
  a = np.asarray(v, np.int32)
  a.flags.writeable = False
  return a


def render_block(field: str, content: str) -> str:
  return f"<{field}>\n{content}\n</{field}>"


def render_prompt(task: Task, h: Harness, *, training: bool) -> tuple[Message, ...]:
  """The policy input for `task`: its prompt, plus mounted guidance when training."""
  if not training:
    return task.prompt
  state: TaskState = h.task(task.id)
  if not state.guidance:
    return task.prompt
  mounted = dict(state.guidance)
  blocks = "\n".join(render_block(f, mounted[f]) for f in FIELDS if f in mounted)
  prompt = list(task.prompt)
  for j in range(len(prompt) - 1, -1, -1):
    if prompt[j].role == "user":
      prompt[j] = Message("user", f"{prompt[j].content}\n\n{blocks}")
      return tuple(prompt)
  return tuple(prompt) + (Message("user", blocks),)
