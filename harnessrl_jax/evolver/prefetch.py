"""The critic's guidance re-samples of a step, drawn ahead in one sampler call.

The critic measures candidates one at a time, each against the harness its predecessors
left, and a guidance candidate costs a J-answer re-sample of the frozen policy. A decode is
bound by reading the weights once per token whatever the batch, so a step's 3-4 re-samples
cost about what one does when drawn together. `Prefetched` wraps the step's `Resample`:
it draws the requests it is given (the evolver's guess at each task's first guidance
candidate, made on H_t) in one call, one key per conversation, and answers a later
single-conversation call from there only when the call asks for exactly that conversation,
key and J; any other call goes to the sampler as before. A request is answered at most
once.

What a prefetched answer equals: the sampler gives conversation p of a batch what it gives
that conversation alone with the same key (`rollout/sampler.py`: per-prompt keys), up to the
float rounding of another batch shape (log-probs within ~2e-5 on SmolLM2-135M; the tokens
of a sample flip only where a draw falls that close to a boundary). So the step's
decisions are the sequential ones up to that rounding, and a wrong guess costs only the
wasted rows of the shared call.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from harnessrl_jax.rollout.texts import Chat, Resample


def _typed(key: jax.Array) -> jax.Array:
  return key if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) else jax.random.wrap_key_data(key)


def request_id(chat: Chat, key: jax.Array, num_samples: int) -> tuple:
  """What a re-sample request is, to compare: its messages, its key's bits and J."""
  bits = np.asarray(jax.random.key_data(_typed(key))).reshape(-1)
  return tuple((m.role, m.content) for m in chat), tuple(bits.tolist()), int(num_samples)


class Prefetched:
  """A `Resample` answering the requests drawn ahead from one sampler call (see module).

  Attributes:
    requested / used: how many conversations were drawn ahead, and how many of them a
      later call took.
  """

  def __init__(self, resample: Resample, chats: Sequence[Chat], keys: Sequence[jax.Array],
               num_samples: int, *, pad_to: int = 0):
    """`pad_to`: draw at least this many conversations, repeating the last request (a
    fixed batch compiles once per run; a decode costs little more for a few more rows)."""
    self._resample = resample
    self._answers: dict[tuple, list[str]] = {}
    self.requested = len(chats)
    self.used = 0
    if chats:
      chats, keys = list(chats), [_typed(k) for k in keys]
      filler = max(0, int(pad_to) - len(chats))
      answers = resample(chats + chats[-1:] * filler, jnp.stack(keys + keys[-1:] * filler),
                         int(num_samples))
      for chat, key, answer in zip(chats, keys, answers):
        self._answers.setdefault(request_id(chat, key, num_samples), list(answer))

  def __call__(self, chats: Sequence[Chat], key: jax.Array, num_samples: int
               ) -> list[list[str]]:
    if len(chats) == 1 and not _typed(key).shape:
      answer = self._answers.pop(request_id(chats[0], key, num_samples), None)
      if answer is not None:
        self.used += 1
        return [answer]
    return self._resample(chats, key, num_samples)
