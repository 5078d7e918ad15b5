"""The training step as small functions: draw, prompts, rollout, grading, batch, update,
held-out evaluation, and the evolver seam. They write no files; wall times travel beside the
results (StepRecord.timings), never into state. train.py owns the side effects
(checkpoints, logs, the terminal); the evolver itself appends to the harness history and
writes memory, as evolver/evolve.py documents.

One step t with harness H_t (`rl_step`):
  keys     = step_keys(run_key, t)                  (fold_in: resumable from t alone)
  idx      = draw(H_t, k_draw, n)                   x ~ Cat(p_t)
  chats    = training_chats(tasks, H_t)             mounted guidance rendered in
  texts    = learner.texts(params, chats, sampling, k)   J rollouts per task (rollout/texts.py)
  judged   = grade(judge, tasks, texts, H_t rubric) rubric rewards (judges/grading.py)
  batch    = make_batch(rollout, judged, idx, H_t)  group advantages, u = 1 / (N p)
  state    = update_on_batch(...)                   GRPO step(s)
then the evolver (`Evolve`) maps (H_t, memory, StepRecord) to H_{t+1}. The held-out score
(`evaluate`) is eval/heldout.py's, the same one `python -m harnessrl_jax.eval` reports.

A judge that leaves too many cells without a verdict stops the run with a JudgeError that
says where: the learner's grading (judge.max_unscored_share), a held-out evaluation (the
same limit) or the critic's measurements (evolver.max_unscored_share). Each comes before
the step's checkpoint, so the last checkpoint stays intact and a rerun resumes from it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from harnessrl_jax import harness, run_files
from harnessrl_jax.models import sharding
from harnessrl_jax.data.schema import Criterion, Message, Task
from harnessrl_jax.eval import heldout
from harnessrl_jax.harness.state import Harness
from harnessrl_jax.judges.grading import Judged, grade
from harnessrl_jax.judges.judge import JudgeError
from harnessrl_jax.judges.score_matrix import Unscored
from harnessrl_jax.rl.batch import (RLBatch, build_batch, check_shared_prompts,
                                    trim_prompt_padding)
from harnessrl_jax.rl.mesh import shard_batch
from harnessrl_jax.rl.train_step import update_on_batch
from harnessrl_jax.rollout import SamplingParams
from harnessrl_jax.rollout.texts import TextSampler


# The end of every stop message: what a stop leaves behind.
STOPPED = ("The run stops before saving this step: its last checkpoint (if any) is intact "
           "and rerunning resumes from it.")


@dataclasses.dataclass(frozen=True)
class StepRecord:
  """What step t drew, wrote and was scored: the evolver's input and the metrics' source."""

  step: int
  task_indices: tuple[int, ...]
  tasks: tuple[Task, ...]
  criteria: tuple[tuple[Criterion, ...], ...]
  responses: tuple[tuple[str, ...], ...]
  judged: Judged
  response_len: float
  metrics: dict[str, float]      # the update's (loss, kl, ...) of its last epoch
  timings: dict[str, float]      # seconds per phase (not part of any state)
  positions: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)
  # run_files.POSITIONS of the step: computed vs real token positions per phase


def rollout_positions(rollout) -> dict[str, int]:
  """Token positions the sampler computed for `rollout` (the prompt bucket's prefill, then
  one position per row per decode step until the longest response ended) and the real ones
  (prompt tokens and response tokens)."""
  lengths = np.asarray(rollout.lengths)
  b, p = np.shape(rollout.prompt_mask)
  return {run_files.COMPUTED: int(b * (p + lengths.max(initial=0))),
          run_files.REAL: int(np.asarray(rollout.prompt_mask).sum() + lengths.sum())}


def update_positions(batch: RLBatch, group: int = 1) -> dict[str, int]:
  """Token positions one forward pass of the update computes on `batch` (packed rows of
  `group` responses on one prompt: rl/train_step.py), and the real ones, each prompt once
  per pack (the reference forward, when beta > 0, and the backward pass compute as many
  again)."""
  p, n = batch.prompt_len, batch.loss_mask.shape[1]
  mask = np.asarray(batch.attention_mask)
  return {run_files.COMPUTED: int(batch.num_rows // group * (p + group * n)),
          run_files.REAL: int(mask[::group, :p].sum() + mask[:, p:].sum())}


def step_keys(run_key: jax.Array, step: int) -> tuple[jax.Array, jax.Array, jax.Array]:
  """(draw, rollout, evolver) keys of step `step`: a function of the run key and t only,
  so a resumed run draws exactly what an uninterrupted one would."""
  k = jax.random.fold_in(run_key, step)
  d, r, e = jax.random.split(k, 3)
  return d, r, e


def schedule_op(h: Harness, step: int, total_steps: int):
  """The guidance-schedule operation step `step` needs, or None when it changes nothing
  (the cap only falls at quarter boundaries; the last step's cap is 0)."""
  op = harness.EnforceSchedule(step, total_steps)
  return op if harness.digest(harness.apply(h, op)) != harness.digest(h) else None


def draw(h: Harness, key: jax.Array, n: int) -> np.ndarray:
  """n task indices x ~ Cat(p_t), with replacement."""
  return np.asarray(harness.draw(h, key, n))


def training_chats(tasks: Sequence[Task], h: Harness) -> list[tuple[Message, ...]]:
  """Each task's prompt with the guidance H mounts on it rendered in."""
  return [harness.render_prompt(t, h, training=True) for t in tasks]


def filled_rewards(judged: Judged) -> np.ndarray:
  """Flat [T * J] rewards; a rollout without any scored positive criterion takes its
  group's mean over valid rollouts, so it shifts neither the group mean nor its sign."""
  r, valid = judged.rewards, judged.valid
  out = r.copy()
  for t in range(r.shape[0]):
    out[t, ~valid[t]] = r[t, valid[t]].mean() if valid[t].any() else 0.0
  return out.reshape(-1)


@dataclasses.dataclass(frozen=True)
class Learner:
  """The run's constant pieces of one RL step (built once by the driver)."""

  train_tasks: tuple[Task, ...]
  texts: TextSampler          # the run's sampler (mesh, buckets, phases) + prompt builder
  judge: Any
  train_step: Callable
  logprob_fn: Callable
  sampling: SamplingParams         # config.rollout's sampling settings
  tasks_per_step: int
  num_samples: int            # J
  num_epochs: int
  advantage: str              # config.rl.advantage
  eps_advantage: float
  mesh: Any = None            # the learner's mesh (None: one device)
  prompt_pad_multiple: int = 0  # config.rl.prompt_pad_multiple (0: the bucket's width)
  prompt_group: int = 1         # rows packed per shared prompt (train_step.prompt_group_size)
  eval_pad_multiple: int = 0    # config.rollout.eval_pad_multiple (0: the bucket's width)


def make_batch(rollout, judged: Judged, task_indices: np.ndarray, h: Harness,
               learner: Learner) -> RLBatch:
  """The learner's batch: group advantages and p_i of each row's task."""
  n, j = len(task_indices), learner.num_samples
  probs = np.asarray(harness.probabilities(h))[np.asarray(task_indices)]
  return build_batch(rollout, filled_rewards(judged), np.repeat(np.arange(n), j),
                     np.repeat(probs, j), h.num_tasks, advantage=learner.advantage,
                     eps_advantage=learner.eps_advantage)


def rl_step(learner: Learner, state, h: Harness, step: int, draw_key: jax.Array,
            roll_key: jax.Array) -> tuple[Any, StepRecord]:
  """Draw -> prompts -> rollouts -> grades -> batch -> GRPO update(s)."""
  t0 = time.perf_counter()
  idx = draw(h, draw_key, learner.tasks_per_step)
  tasks = tuple(learner.train_tasks[i] for i in idx)
  texts = learner.texts(state.params, training_chats(tasks, h), learner.sampling, roll_key, learner.num_samples)
  t1 = time.perf_counter()
  criteria = tuple(h.criteria(t.id) for t in tasks)
  try:
    judged = grade(learner.judge, tasks, texts.responses, criteria)
  except JudgeError as e:
    raise JudgeError(f"learner, step {step + 1}: {e} {STOPPED}", e.unscored) from None
  t2 = time.perf_counter()
  # Every process holds the whole step (same keys, same draws); each contributes only its
  # own rows to the global batch, or a P-process run would train on P copies.
  full = trim_prompt_padding(make_batch(texts.rollout, judged, idx, h, learner),
                             learner.prompt_pad_multiple)
  check_shared_prompts(full, learner.prompt_group)
  batch = shard_batch(sharding.local_batch(full, learner.mesh), learner.mesh)
  state, history = update_on_batch(learner.train_step, learner.logprob_fn, state, batch, learner.num_epochs)
  t3 = time.perf_counter()
  rec = StepRecord(step, tuple(int(i) for i in idx), tasks, criteria, texts.responses, judged,
                   float(np.mean(np.asarray(texts.rollout.lengths))), dict(history[-1]),
                   {run_files.ROLLOUT_S: t1 - t0, run_files.JUDGE_S: t2 - t1,
                    run_files.UPDATE_S: t3 - t2},
                   {run_files.ROLLOUT_S: rollout_positions(texts.rollout),
                    run_files.UPDATE_S: update_positions(full, learner.prompt_group)})
  return state, rec


def evaluate(tasks: Sequence[Task], learner: Learner, params, key: jax.Array, *,
             after: int = 0) -> dict[str, Any]:
  """The held-out score (eval/heldout.py) of `params` after `after` completed steps:
  greedy, no guidance, seed rubrics, every task in one sampler call."""
  greedy = dataclasses.replace(learner.sampling, temperature=0.0)
  where = (f"held-out evaluation after step {after}" if after
           else "held-out evaluation at the start")
  try:
    generate = learner.texts.generate_fn(params, greedy, key, pad_multiple=learner.eval_pad_multiple)
    return heldout.evaluate(tasks, generate, learner.judge, where=where)
  except JudgeError as e:
    raise JudgeError(f"{e} {STOPPED}", e.unscored) from None


# ---- the evolver seam: (H_t, memory, record, params, key) -> (H_{t+1}, EvolveLog)


@dataclasses.dataclass(frozen=True)
class EvolveLog:
  """What one evolver step did, as plain JSON-able counts."""

  digest: str
  verdicts: dict[str, dict[str, int]]       # route -> {"accepted": n, "unmeasurable": n, ...}
  labels: dict[str, int]                    # failure label -> criteria so labelled
  accounting: dict[str, dict[str, Any]]     # role -> calls, rollouts, judge_cells, wall_s,
                                            # unscored (a run_files unscored record)
  history_records: int                      # harness-history lines this step appended
  positions: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)
  # run_files.POSITIONS of the critic's re-samples ({CRITIC: ...}; empty when none ran)

  @property
  def critic_unscored(self) -> dict[str, Any]:
    """The critic's unscored record of the step (an empty one without a critic)."""
    return self.accounting.get("critic", {}).get(run_files.UNSCORED) or \
        Unscored().to_json()


Evolve = Callable[..., tuple[Harness, EvolveLog]]


def groups_of(rec: StepRecord) -> list:
  """The evolver's recorded groups of a step."""
  # pylint: disable-next=g-import-not-at-top
  from harnessrl_jax.evolver.measure import groups_from  # the evolver only when it runs
  return groups_from(rec.tasks, rec.criteria, rec.responses, rec.judged)


def make_evolve(evolver, texts: TextSampler, sampling: SamplingParams) -> Evolve:
  """The evolver step as an `Evolve`; the critic re-samples with the UPDATED, frozen
  policy: the step's params through the run's sampler with the rollout's sampling."""

  def evolve(h: Harness, memory, rec: StepRecord, *, params, key) -> tuple[Harness, EvolveLog]:
    spent = {run_files.COMPUTED: 0, run_files.REAL: 0}

    def resample(chats, key, num_samples):   # texts.resample_fn, counting positions
      out = texts(params, chats, sampling, key, num_samples)
      for k, n in rollout_positions(out.rollout).items():
        spent[k] += n
      return [list(r) for r in out.responses]

    try:
      res = evolver.step(h, groups_of(rec), step=rec.step, key=key, memory=memory,
                         resample=resample)
    except JudgeError as e:   # the critic's lost cells passed evolver.max_unscored_share
      raise type(e)(f"{e} {STOPPED}", e.unscored) from None
    verdicts: dict[str, dict[str, int]] = {}
    for r in res.records:
      route = r.route or "none"
      verdicts.setdefault(route, {}).setdefault(r.verdict, 0)
      verdicts[route][r.verdict] += 1
    labels: dict[str, int] = {}
    for att in res.attributions:
      for lab in att.labels:
        labels[lab.label] = labels.get(lab.label, 0) + 1
    return res.harness, EvolveLog(res.digest, verdicts, labels,
                                  {k: dict(v) for k, v in res.accounting.items()},
                                  len(res.history),
                                  {run_files.CRITIC: spent} if spent[run_files.COMPUTED] else {})

  return evolve


def static_evolve(h: Harness, memory, rec: StepRecord, *, params,
                  key) -> tuple[Harness, EvolveLog]:
  """The static-harness baseline: H_{t+1} = H_t."""
  del memory, rec, params, key
  return h, EvolveLog(harness.digest(h), {}, {}, {}, 0)
