"""Recorded groups from graded texts: how the driver, the critic and the cold start package
a sampled and graded batch for the evolver (one `Group` per task).

Sampling goes through `rollout.texts` (a `Resample` bound to the frozen policy) and grading
through `judges.grading.grade`; this module only sews their outputs into groups.
Shapes: responses[t][j]; scores/scored [T, K, J]; rewards [T, J].
"""

from __future__ import annotations

from collections.abc import Sequence

import jax

from harnessrl_jax.data.schema import Criterion, Task
from harnessrl_jax.evolver.types import Group
from harnessrl_jax.harness.guidance import render_prompt
from harnessrl_jax.harness.state import Harness
from harnessrl_jax.judges.grading import Judged, grade
from harnessrl_jax.rollout.texts import Resample


def groups_from(tasks: Sequence[Task], criteria: Sequence[Sequence[Criterion]],
                responses: Sequence[Sequence[str]], judged: Judged) -> list[Group]:
  """One recorded Group per task of a graded batch (criterion padding cut off)."""
  out = []
  for t, task in enumerate(tasks):
    k = len(criteria[t])
    out.append(Group(task, tuple(criteria[t]), tuple(responses[t]), judged.scores[t, :k],
                     judged.scored[t, :k], judged.rewards[t]))
  return out


def sample_groups(tasks: Sequence[Task], h: Harness, resample: Resample, judge,
                  key: jax.Array, num_samples: int) -> tuple[list[Group], Judged]:
  """Samples J responses per task under H's guidance, grades them under H's rubric;
  returns the groups and the graded batch (its `unscored`: the judge's failures)."""
  prompts = [render_prompt(t, h, training=True) for t in tasks]
  responses = resample(prompts, key, num_samples)
  criteria = [h.criteria(t.id) for t in tasks]
  judged = grade(judge, tasks, responses, criteria)
  return groups_from(tasks, criteria, responses, judged), judged
