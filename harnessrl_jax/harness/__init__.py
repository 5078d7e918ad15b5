"""The training harness H_t = (sampling, guidance, rubric): an immutable pytree and its
pure operations, prompt rendering, digest and history log. Uses only numpy/jax and the
data schema."""

from harnessrl_jax.harness.digest import canonical, digest
from harnessrl_jax.harness.guidance import cap_for_step, enforce_schedule, render_prompt
from harnessrl_jax.harness.history import (HistoryLog, HistoryRecord, apply_logged,
                                           read_history, replay)
from harnessrl_jax.harness.ops import (AddGuidance, DropGuidance, EnforceSchedule, Op,
                                       RubricCreate, RubricDelete, RubricMerge,
                                       RubricReweight, RubricRewrite, RubricSplit,
                                       SamplingLevelDown, SamplingLevelUp, SetLadder, apply,
                                       apply_all, op_from_json, op_to_json)
from harnessrl_jax.harness.sampling import draw, importance_weights, probabilities
from harnessrl_jax.harness.state import FIELDS, Harness, from_tasks, invariant_problems
