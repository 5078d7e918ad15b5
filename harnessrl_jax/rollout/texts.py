"""Prompts in, texts out: the one path from chat prompts to response texts.

`TextSampler` binds the run's `Sampler` (its mesh, prompt buckets and decode phases) to the
model's prompt builder: conversations -> chat-template token ids -> J rollouts each ->
response texts, with trailing stop tokens dropped. The training step, the held-out
evaluation, the critic's re-samples and the cold start all sample through it, so a change of
sampler settings reaches every one of them.

Rows are task-major: rollout row p * J + j is sample j of prompt p.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from harnessrl_jax.models import sharding
from harnessrl_jax.data.schema import Message
from harnessrl_jax.rollout.sampler import RolloutBatch, Sampler
from harnessrl_jax.rollout.sampling import SamplingParams

Chat = Sequence[Message]
# generate(conversations) -> one response each (greedy held-out and OOD evaluation)
Generate = Callable[[Sequence[Chat]], list[str]]
# resample(conversations, key, num_samples) -> responses[p][j] (the critic, the cold start);
# `key` is one key, or one per conversation (rollout/sampler.py: then conversation p gets
# what it would get alone with key[p])
Resample = Callable[[Sequence[Chat], jax.Array, int], list[list[str]]]


@dataclasses.dataclass(frozen=True)
class Texts:
  """responses[p][j] and the rollout they were decoded from (NumPy on every process)."""

  responses: tuple[tuple[str, ...], ...]
  rollout: RolloutBatch


def decode_texts(prompt_builder, rollout: RolloutBatch, num_prompts: int,
                 num_samples: int) -> tuple[tuple[str, ...], ...]:
  """responses[p][j] of a task-major rollout; trailing stop tokens are dropped."""
  tokens = np.asarray(rollout.response_tokens)
  lengths = np.asarray(rollout.lengths)
  stops = set(prompt_builder.eos_token_ids)
  texts = []
  for row in range(tokens.shape[0]):
    toks = [int(t) for t in tokens[row, :lengths[row]]]
    while toks and toks[-1] in stops:
      toks.pop()
    texts.append(prompt_builder.decode(toks))
  return tuple(tuple(texts[p * num_samples:(p + 1) * num_samples])
               for p in range(num_prompts))


@dataclasses.dataclass(frozen=True)
class TextSampler:
  """The run's sampler with the model's prompt builder; see the module docstring."""

  sampler: Sampler
  prompt_builder: Any

  @classmethod
  def from_config(cls, graphdef, prompt_builder, rollout_cfg, *, mesh=None) -> TextSampler:
    """A Sampler of config.rollout (buckets, phases, J) over `graphdef` on `mesh`."""
    pb = prompt_builder
    return cls(Sampler.from_config(graphdef, rollout_cfg, pad_id=pb.pad_id,
                                   eos_token_ids=pb.eos_token_ids, mesh=mesh), pb)

  def __call__(self, params, chats: Sequence[Chat], sampling: SamplingParams, key: jax.Array,
               num_samples: int | None = None, pad_multiple: int = 0) -> Texts:
    """`num_samples` (default: the sampler's J) responses to each conversation;
    `pad_multiple`: see `engine.generate`."""
    j = self.sampler.num_samples if num_samples is None else int(num_samples)
    ids = [self.prompt_builder.encode_chat(c) for c in chats]
    # NumPy on every process: on a mesh over several processes the rows live on all of them.
    rollout = sharding.to_host(self.sampler(params, ids, sampling, key, num_samples=j,
                                               pad_multiple=pad_multiple))
    return Texts(decode_texts(self.prompt_builder, rollout, len(chats), j), rollout)

  def resample_fn(self, params, sampling: SamplingParams) -> Resample:
    """The frozen policy `params` as a `Resample` (the critic measures guidance with it)."""

    def resample(chats, key, num_samples):
      return [list(r) for r in self(params, chats, sampling, key, num_samples).responses]

    return resample

  def generate_fn(self, params, sampling: SamplingParams, key: jax.Array, *,
                  batch_size: int = 0, pad_multiple: int = 0) -> Generate:
    """One response per conversation, `batch_size` conversations per sampler call (0: all
    in one call); every call uses `key` (greedy evaluation does not read it).
    `pad_multiple`: see `engine.generate` (config.rollout.eval_pad_multiple)."""

    def generate(chats):
      chats, out = list(chats), []
      step = batch_size or max(len(chats), 1)
      for i in range(0, len(chats), step):
        out += [r[0] for r in self(params, chats[i:i + step], sampling, key, 1,
                                   pad_multiple).responses]
      return out

    return generate
