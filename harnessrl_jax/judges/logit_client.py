"""The local backend's logit verdict mode: one forward pass per cell, always a verdict.

The judge request (the same fenced messages as every backend, judges/prompt.py) is rendered
with the chat template's generation prompt, and the assistant turn is forced to begin with
`prompt.VERDICT_PREFIX` ('{"criteria_met":'):

  ids = encode_chat(messages, add_generation_prompt=True) + encode(VERDICT_PREFIX)

The verdict is the model's next token after `ids`: true iff
logsumexp(logits[TRUE]) > logsumexp(logits[FALSE]), and p_true = sigmoid of that
difference (probability mass renormalised over the verdict tokens).

Verdict tokens (`verdict_token_ids`), fixed once per tokenizer: for each spelling of a
boolean, " true" and "true" (and " false", "false"), the first token of that continuation
as the tokenizer splits `VERDICT_PREFIX + continuation`, i.e. encode(prefix + c)[n] with
n = len(encode(prefix)). A spelling whose tokenisation changes the prefix's own tokens (a
merge across the boundary) is skipped: the model, fed the prefix tokens, never sees that
split. A first token shared by a true and a false spelling (a byte tokenizer's " ") says
nothing about the verdict and is dropped from both sets. No token left on either side is a
ConfigError.

Batches: prompts are sorted by length, cut into batches of `batch_size`, left-padded to a
prompt bucket and a batch multiple (rollout/batching.py), and one jitted program computes
the final-norm hidden states, keeps the last column (the last real token under left
padding) and multiplies only that by the unembedding: [B, D] @ [D, V], never [B, T, V].
A prompt longer than the largest bucket is the only request without a verdict.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from harnessrl_jax.data.schema import Message
from harnessrl_jax.errors import ConfigError
from harnessrl_jax.judges import prompt as prompt_lib
from harnessrl_jax.judges.client import ServerError, Verdict, VerdictClient
from harnessrl_jax.judges.local_client import LocalClient
from harnessrl_jax.rollout import batching

_SPELLINGS = {True: (" true", "true"), False: (" false", "false")}


def verdict_token_ids(prompt_builder,
                      prefix: str = prompt_lib.VERDICT_PREFIX) -> tuple[tuple[int, ...],
                                                                         tuple[int, ...]]:
  """(true ids, false ids): first tokens of the boolean's spellings after `prefix` (see
  the module docstring for the rule)."""
  head = prompt_builder.encode(prefix)
  firsts: dict[bool, list[int]] = {True: [], False: []}
  for value, spellings in _SPELLINGS.items():
    for spelling in spellings:
      ids = prompt_builder.encode(prefix + spelling)
      if ids[:len(head)] == head and len(ids) > len(head):
        firsts[value].append(int(ids[len(head)]))
  shared = set(firsts[True]) & set(firsts[False])
  true_ids, false_ids = (tuple(dict.fromkeys(i for i in firsts[v] if i not in shared))
                         for v in (True, False))
  if not true_ids or not false_ids:
    raise ConfigError(f"judge.local.verdict='logits': the judge tokenizer has no token that "
                      f"starts 'true' but not 'false' (or the reverse) after {prefix!r} "
                      f"(true: {firsts[True]}, false: {firsts[False]}); use "
                      "judge.local.verdict='generate' with this model")
  return true_ids, false_ids


def _verdict_logits(graphdef, params, tokens, mask, *, true_ids: tuple[int, ...],
                    false_ids: tuple[int, ...]) -> tuple[jax.Array, jax.Array]:
  """logsumexp of the next-token logits over the true ids and the false ids, each [B]."""
  model = nnx.merge(graphdef, params)
  positions = jnp.maximum(jnp.cumsum(mask.astype(jnp.int32), axis=1) - 1, 0)
  logits = model.logits_from_hidden(model.hidden_states(tokens, positions, mask)[:, -1])
  pick = lambda ids: jax.nn.logsumexp(logits[:, jnp.asarray(ids)], axis=-1)
  return pick(true_ids), pick(false_ids)


_verdict_jit = jax.jit(_verdict_logits, static_argnames=("graphdef", "true_ids", "false_ids"))


class LogitVerdictClient(LocalClient, VerdictClient):
  """A LocalClient that also decides verdicts from next-token logits.

  As a TextClient it still generates (the evolver's text roles); the judge uses
  `verdicts`.
  """

  def __init__(self, model, prompt_builder, *, name: str = "model", batch_size: int = 16,
               prompt_buckets: Sequence[int] = (128, 256, 512, 1024, 2048)):
    super().__init__(model, prompt_builder, name=name, batch_size=batch_size,
                     prompt_buckets=prompt_buckets)
    self.prefix_ids = tuple(prompt_builder.encode(prompt_lib.VERDICT_PREFIX))
    self.true_ids, self.false_ids = verdict_token_ids(prompt_builder)
    self.identity = (f"{self.identity}:logits:{prompt_lib.VERDICT_PREFIX}:"
                     f"{self.true_ids}/{self.false_ids}")

  def verdict_ids(self, chat: Sequence[Message]) -> list[int]:
    """The token ids whose next-token logits decide the verdict of one request."""
    return self.prompt_builder.encode_chat(chat) + list(self.prefix_ids)

  def _verdicts(self, chats: list[tuple[Message, ...]]) -> list[Verdict | ServerError]:
    prompts = [self.verdict_ids(chat) for chat in chats]
    longest = max(self.prompt_buckets)
    out: list[Verdict | ServerError] = [
        ServerError(f"{self.identity}: the judge prompt has {len(p)} tokens, more than the "
                    f"largest of judge.local.prompt_buckets ({longest})")
        for p in prompts]
    # Similar lengths share a batch, so fewer rows pad up to a larger bucket.
    fits = sorted((i for i, p in enumerate(prompts) if len(p) <= longest),
                  key=lambda i: len(prompts[i]))
    for start in range(0, len(fits), self.batch_size):
      rows = fits[start:start + self.batch_size]
      padded = batching.pad_prompts([prompts[i] for i in rows], self.prompt_buckets,
                                    self.prompt_builder.pad_id, self.batch_size)
      lt, lf = _verdict_jit(self.graphdef, self.params, padded.tokens, padded.mask,
                            true_ids=self.true_ids, false_ids=self.false_ids)
      margin = np.asarray(lt, np.float64) - np.asarray(lf, np.float64)
      for row, i in enumerate(rows):
        out[i] = Verdict(met=bool(margin[row] > 0),
                         p_true=float(1.0 / (1.0 + np.exp(-margin[row]))))
    return out
