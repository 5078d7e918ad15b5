"""The training step as small functions: draw, prompts, rollout, judge, reward, batch,
update, held-out evaluation, and the evolver seam. They write no files; wall times travel
beside the results (StepRecord.timings), never into state. train.py owns the side effects
(checkpoints, logs, the terminal); the evolver itself appends to the harness history and
writes memory, as evolver/evolve.py documents.

One step t with harness H_t:
  keys      = step_keys(run_key, t)                 (fold_in: resumable from t alone)
  idx       = draw(H_t, k_draw, n)                  x ~ Cat(p_t)
  prompts   = encode_prompts(pb, tasks, H_t)        mounted guidance rendered in
  rollout   = sampler(params, prompts, law, k_roll) J rollouts per task, task-major rows
  responses = decode_groups(pb, rollout, n, J)
  judged    = judge_groups(judge, tasks, responses, H_t's rubrics)
  batch     = make_batch(rollout, judged, idx, H_t)  advantages, u = 1 / (N p)
  state     = update_on_batch(...)                  GRPO step(s)
then the evolver (`Evolve`) maps (H_t, memory, StepRecord) to H_{t+1}.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from harnessrl_jax import distributed, harness
from harnessrl_jax.data.reward import rubric_reward
from harnessrl_jax.data.schema import Criterion, Task
from harnessrl_jax.harness.state import Harness
from harnessrl_jax.rl.batch import RLBatch, build_batch
from harnessrl_jax.rl.mesh import shard_batch
from harnessrl_jax.rl.train_step import update_on_batch
from harnessrl_jax.rollout import SamplingParams


@dataclasses.dataclass(frozen=True)
class Judged:
  """One graded batch. scores/scored [T, K, J]; rewards/valid [T, J]."""

  scores: np.ndarray
  scored: np.ndarray
  rewards: np.ndarray
  valid: np.ndarray
  unscored: int
  cells: int


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


def sampling_params(rollout_cfg, *, greedy: bool = False) -> SamplingParams:
  if greedy:
    return SamplingParams(temperature=0.0, max_new_tokens=int(rollout_cfg.max_new_tokens))
  return SamplingParams(temperature=float(rollout_cfg.temperature),
                        top_p=float(rollout_cfg.top_p), top_k=int(rollout_cfg.top_k),
                        max_new_tokens=int(rollout_cfg.max_new_tokens))


def draw(h: Harness, key: jax.Array, n: int) -> np.ndarray:
  """n task indices x ~ Cat(p_t), with replacement."""
  return np.asarray(harness.draw(h, key, n))


def encode_prompts(prompt_builder, tasks: Sequence[Task], h: Harness | None, *,
                   training: bool) -> list[list[int]]:
  """Token ids of each task's prompt; guidance mounted in H is rendered when training."""
  if h is None or not training:
    return [prompt_builder.encode_chat(t.prompt) for t in tasks]
  return [prompt_builder.encode_chat(harness.render_prompt(t, h, training=True))
          for t in tasks]


def decode_groups(prompt_builder, rollout, num_prompts: int,
                  num_samples: int) -> tuple[tuple[str, ...], ...]:
  """responses[task][j] (rollout rows are task-major); trailing stop tokens dropped."""
  tokens = np.asarray(rollout.response_tokens)
  lengths = np.asarray(rollout.lengths)
  stops = set(prompt_builder.eos_token_ids)
  texts = []
  for row in range(tokens.shape[0]):
    toks = [int(t) for t in tokens[row, :lengths[row]]]
    while toks and toks[-1] in stops:
      toks.pop()
    texts.append(prompt_builder.decode(toks))
  return tuple(tuple(texts[i * num_samples:(i + 1) * num_samples])
               for i in range(num_prompts))


def judge_groups(judge, tasks: Sequence[Task], responses, criteria=None) -> Judged:
  """Verdicts and rubric rewards; `criteria` None judges by the tasks' seed rubrics."""
  m = judge.score(list(tasks), [list(r) for r in responses],
                  None if criteria is None else [tuple(c) for c in criteria])
  r = rubric_reward(m.scores, m.scored, m.weights, m.criterion_mask)
  return Judged(np.asarray(m.scores), np.asarray(m.scored), np.asarray(r.reward, np.float64),
                np.asarray(r.valid), int(m.num_unscored), int(m.num_cells))


def filled_rewards(judged: Judged) -> np.ndarray:
  """Flat [T * J] rewards; a rollout without any scored positive criterion takes its
  group's mean over valid rollouts, so it shifts neither the group mean nor its sign."""
  r, valid = judged.rewards, judged.valid
  out = r.copy()
  for t in range(r.shape[0]):
    out[t, ~valid[t]] = r[t, valid[t]].mean() if valid[t].any() else 0.0
  return out.reshape(-1)


def make_batch(rollout, judged: Judged, task_indices: np.ndarray, h: Harness,
               num_samples: int, rl_cfg) -> RLBatch:
  """The learner's batch: group advantages and p_i of each row's task."""
  n = len(task_indices)
  probs = np.asarray(harness.probabilities(h))[np.asarray(task_indices)]
  return build_batch(rollout, filled_rewards(judged), np.repeat(np.arange(n), num_samples),
                     np.repeat(probs, num_samples), h.num_tasks, advantage=rl_cfg.advantage,
                     eps_advantage=float(rl_cfg.eps_advantage))


@dataclasses.dataclass(frozen=True)
class Learner:
  """The run's constant pieces of one RL step (built once by the driver)."""

  train_tasks: tuple[Task, ...]
  prompt_builder: Any
  sampler: Any
  judge: Any
  train_step: Callable
  logprob_fn: Callable
  tasks_per_step: int
  num_samples: int
  num_epochs: int
  rollout_cfg: Any
  rl_cfg: Any
  mesh: Any = None   # the learner's mesh (None: one device)


def rl_step(lr: Learner, state, h: Harness, step: int, draw_key: jax.Array,
            roll_key: jax.Array) -> tuple[Any, StepRecord]:
  """Draw -> prompts -> rollouts -> judge -> reward -> batch -> GRPO update(s)."""
  t0 = time.perf_counter()
  idx = draw(h, draw_key, lr.tasks_per_step)
  tasks = tuple(lr.train_tasks[i] for i in idx)
  prompts = encode_prompts(lr.prompt_builder, tasks, h, training=True)
  # NumPy on every process: on a mesh over several processes the rows live on all of them.
  rollout = distributed.to_host(lr.sampler(state.params, prompts,
                                           sampling_params(lr.rollout_cfg), roll_key))
  responses = decode_groups(lr.prompt_builder, rollout, len(tasks), lr.num_samples)
  t1 = time.perf_counter()
  criteria = tuple(h.criteria(t.id) for t in tasks)
  judged = judge_groups(lr.judge, tasks, responses, criteria)
  t2 = time.perf_counter()
  # Every process holds the whole step (same keys, same draws); each contributes only its
  # own rows to the global batch, or a P-process run would train on P copies.
  full = make_batch(rollout, judged, idx, h, lr.num_samples, lr.rl_cfg)
  batch = shard_batch(distributed.local_batch(full, lr.mesh), lr.mesh)
  state, history = update_on_batch(lr.train_step, lr.logprob_fn, state, batch, lr.num_epochs)
  t3 = time.perf_counter()
  rec = StepRecord(step, tuple(int(i) for i in idx), tasks, criteria, responses, judged,
                   float(np.mean(np.asarray(rollout.lengths))), dict(history[-1]),
                   {"rollout_s": t1 - t0, "judge_s": t2 - t1, "update_s": t3 - t2})
  return state, rec


def evaluate(tasks: Sequence[Task], *, sampler, params, prompt_builder, judge, rollout_cfg,
             key: jax.Array) -> dict[str, Any]:
  """Greedy responses to held-out tasks scored under their seed rubrics, no guidance."""
  prompts = encode_prompts(prompt_builder, tasks, None, training=False)
  rollout = distributed.to_host(sampler(params, prompts,
                                        sampling_params(rollout_cfg, greedy=True), key,
                                        num_samples=1))
  responses = decode_groups(prompt_builder, rollout, len(tasks), 1)
  judged = judge_groups(judge, tasks, responses)
  r, valid = judged.rewards[:, 0], judged.valid[:, 0]
  by_domain = {}
  for d in sorted({t.domain for t in tasks}):
    rows = [i for i, t in enumerate(tasks) if t.domain == d and valid[i]]
    by_domain[d] = float(np.mean(r[rows])) if rows else None
  return {"reward": float(np.mean(r[valid])) if valid.any() else None,
          "by_domain": by_domain, "valid_share": float(valid.mean()),
          "example": {"task": tasks[0].id, "response": responses[0][0]}}


# ---- the evolver seam: (H_t, memory, record, params, key) -> (H_{t+1}, EvolveLog)


@dataclasses.dataclass(frozen=True)
class EvolveLog:
  """What one evolver step did, as plain JSON-able counts."""

  digest: str
  verdicts: dict[str, dict[str, int]]       # route -> {"accepted": n, "rejected": n, ...}
  labels: dict[str, int]                    # failure label -> criteria so labelled
  accounting: dict[str, dict[str, float]]   # role -> calls, rollouts, judge_cells, wall_s
  history_records: int                      # harness-history lines this step appended


Evolve = Callable[..., tuple[Harness, EvolveLog]]


def groups_of(rec: StepRecord) -> list:
  """The evolver's recorded groups of a step."""
  from harnessrl_jax.evolver.types import Group  # pylint: disable=g-import-not-at-top
  out = []
  for t, task in enumerate(rec.tasks):
    k = len(rec.criteria[t])
    out.append(Group(task, rec.criteria[t], rec.responses[t], rec.judged.scores[t, :k],
                     rec.judged.scored[t, :k], rec.judged.rewards[t]))
  return out


def make_evolve(evolver, policy_sampler_for: Callable[[Any], Any]) -> Evolve:
  """The evolver step as an `Evolve`; the critic re-samples with the UPDATED, frozen
  policy (`policy_sampler_for(params)` builds its resample function)."""

  def evolve(h: Harness, memory, rec: StepRecord, *, params, key) -> tuple[Harness, EvolveLog]:
    evolver.critic.resample = policy_sampler_for(params)
    res = evolver.step(h, groups_of(rec), step=rec.step, key=key, memory=memory)
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
                                  len(res.history))

  return evolve


def static_evolve(h: Harness, memory, rec: StepRecord, *, params,
                  key) -> tuple[Harness, EvolveLog]:
  """The static-harness baseline: H_{t+1} = H_t."""
  del memory, rec, params, key
  return h, EvolveLog(harness.digest(h), {}, {}, {}, 0)
