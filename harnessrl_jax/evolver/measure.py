"""The small pipeline the evolver and the cold start measure with, reusable by a driver:
load the pool, sample J responses per prompt with the rollout engine, judge, reward, and
package each task's result as a recorded `Group`.

Shapes: responses[t][j]; scores/scored [T, K, J]; rewards [T, J].
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence

import jax
import numpy as np
from flax import nnx

from harnessrl_jax.data.loader import load_tasks
from harnessrl_jax.data.reward import rubric_reward
from harnessrl_jax.data.schema import Message, Task
from harnessrl_jax.errors import ConfigError
from harnessrl_jax.evolver.types import Group
from harnessrl_jax.harness.guidance import render_prompt
from harnessrl_jax.harness.state import Harness
from harnessrl_jax.rollout import engine
from harnessrl_jax.rollout.sampling import SamplingParams

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def resolve(path: str) -> str:
  """A config path: absolute as given, relative ones against the repository root."""
  path = os.path.expanduser(path)
  return path if os.path.isabs(path) else os.path.join(REPO_ROOT, path)


def load_pool(config) -> tuple[Task, ...]:
  """The training pool `config.data.train`, restricted to `config.data.domains` if set."""
  path = resolve(config.data.train)
  if not os.path.isfile(path):
    raise ConfigError(f"config.data.train: {path} does not exist")
  tasks = load_tasks(path)
  domains = tuple(config.data.domains)
  if domains:
    tasks = tuple(t for t in tasks if t.domain in domains)
  if not tasks:
    raise ConfigError(f"config.data.train={path} with data.domains={domains}: no tasks")
  return tasks


@dataclasses.dataclass
class PolicySampler:
  """The frozen policy as `resample(prompts, key, num_samples) -> responses[p][j]`.

  Holds the parameters it was built with; build a new one (cheap: no copy) for new
  parameters. Prompts are chat messages; they are tokenised with the model's template.
  """

  graphdef: object
  params: object
  prompt_builder: object
  sampling: SamplingParams
  prompt_buckets: tuple[int, ...]

  def __call__(self, prompts: Sequence[Sequence[Message]], key: jax.Array,
               num_samples: int) -> list[list[str]]:
    ids = [self.prompt_builder.encode_chat(p) for p in prompts]
    out = engine.generate(self.graphdef, self.params, ids, self.sampling, key,
                          num_samples=num_samples, pad_id=self.prompt_builder.pad_id,
                          eos_token_ids=self.prompt_builder.eos_token_ids,
                          prompt_buckets=self.prompt_buckets)
    tokens, lengths = np.asarray(out.response_tokens), np.asarray(out.lengths)
    stops = set(self.prompt_builder.eos_token_ids)
    texts = []
    for row in range(tokens.shape[0]):
      toks = [int(t) for t in tokens[row, :lengths[row]]]
      while toks and toks[-1] in stops:
        toks.pop()
      texts.append(self.prompt_builder.decode(toks))
    return [texts[i * num_samples:(i + 1) * num_samples] for i in range(len(prompts))]


def policy_sampler(loaded, rollout_cfg, params=None) -> PolicySampler:
  """A PolicySampler over `loaded.model` (or `params` for it) with config.rollout's law."""
  graphdef, own = nnx.split(loaded.model)
  sampling = SamplingParams(temperature=float(rollout_cfg.temperature),
                            top_p=float(rollout_cfg.top_p), top_k=int(rollout_cfg.top_k),
                            max_new_tokens=int(rollout_cfg.max_new_tokens))
  return PolicySampler(graphdef, own if params is None else params, loaded.prompt_builder,
                       sampling, tuple(int(b) for b in rollout_cfg.prompt_buckets))


def grade(judge, tasks: Sequence[Task], responses: Sequence[Sequence[str]],
          criteria) -> tuple[object, np.ndarray, np.ndarray]:
  """(ScoreMatrix, rewards [T, J] float64, valid [T, J]) of the responses."""
  m = judge.score(list(tasks), [list(r) for r in responses], [tuple(c) for c in criteria])
  r = rubric_reward(m.scores, m.scored, m.weights, m.criterion_mask)
  return m, np.asarray(r.reward, np.float64), np.asarray(r.valid)


def groups_from(tasks: Sequence[Task], criteria, responses, matrix, rewards) -> list[Group]:
  """One recorded Group per task from a graded batch."""
  out = []
  for t, task in enumerate(tasks):
    k = len(criteria[t])
    out.append(Group(task, tuple(criteria[t]), tuple(responses[t]),
                     matrix.scores[t, :k], matrix.scored[t, :k], rewards[t]))
  return out


def sample_groups(tasks: Sequence[Task], h: Harness, resample, judge, key: jax.Array,
                  num_samples: int) -> list[Group]:
  """Samples J responses per task under H's guidance, judges them under H's rubric."""
  prompts = [render_prompt(t, h, training=True) for t in tasks]
  responses = resample(prompts, key, num_samples)
  criteria = [h.criteria(t.id) for t in tasks]
  m, rewards, _ = grade(judge, tasks, responses, criteria)
  return groups_from(tasks, criteria, responses, m, rewards)
