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

Shared prefixes (`share_prefixes`, on for models that attend fully): the cells of one
(task, response) differ only after the conversation and the response, which come first in
the judge prompt. Requests are grouped by their common token prefix (`prefix_groups`); each
group's prefix is prefilled once into a KV cache and its requests' suffixes (rubric item
and forced prefix) run as rows on copies of that cache, each verdict read at the
end of its suffix. The same logits up to float rounding (tested against the per-request
path); the saving is the prefix's share of the prompt.
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
from harnessrl_jax.models.kv_cache import init_cache, map_rows
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

MAX_SHARERS = 16     # requests on one prefix at most
MIN_SHARED = 16      # tokens two requests must share before sharing pays
SUFFIX_ROWS = 4      # a call's suffix rows: up to SUFFIX_ROWS x batch_size (or one group)
# Widths round up to these multiples, not to the prompt buckets: a suffix (the rubric item
# and the forced verdict prefix) is tens of tokens, and a bucket of 128 would triple it.
PREFIX_MULTIPLE = 64
SUFFIX_MULTIPLE = 16


def _prefix_verdict_logits(graphdef, params, p_tokens, p_mask, s_tokens, s_mask, owner, *,
                           true_ids: tuple[int, ...], false_ids: tuple[int, ...]):
  """Prefixes [G, P] (left-padded) prefilled once into a KV cache; each suffix row [R, S]
  (right-padded) runs on a copy of its owner's cache rows; logsumexps [R] at each suffix's
  last real token."""
  model = nnx.merge(graphdef, params)
  g, width = p_tokens.shape
  p_pos = jnp.maximum(jnp.cumsum(p_mask.astype(jnp.int32), axis=1) - 1, 0)
  cache = init_cache(model.cfg, g, width + s_tokens.shape[1])
  _, cache = model(p_tokens, p_pos, p_mask, cache)   # its logits are unused: compiled away
  cache = map_rows(cache, lambda x, axis: jnp.take(x, owner, axis=axis))
  start = jnp.sum(p_mask, axis=1)[owner]
  s_pos = start[:, None] + jnp.arange(s_tokens.shape[1])[None, :]
  hidden, _ = model.hidden_and_cache(s_tokens, s_pos, s_mask, cache)
  last = jnp.sum(s_mask, axis=1) - 1
  logits = model.logits_from_hidden(jnp.take_along_axis(hidden, last[:, None, None], 1)[:, 0])
  pick = lambda ids: jax.nn.logsumexp(logits[:, jnp.asarray(ids)], axis=-1)
  return pick(true_ids), pick(false_ids)


_prefix_jit = jax.jit(_prefix_verdict_logits,
                      static_argnames=("graphdef", "true_ids", "false_ids"))


def _common(a: Sequence[int], b: Sequence[int]) -> int:
  n = 0
  for x, y in zip(a, b):
    if x != y:
      break
    n += 1
  return n


def prefix_groups(prompts: Sequence[Sequence[int]]) -> list[tuple[int, list[int]]]:
  """(shared prefix length, request indices) per group: neighbours in lexicographic order
  that share >= MIN_SHARED tokens and, from the third on, >= 80% of the group's prefix so
  far (so the cells of one response do not join another's on the conversation alone); at
  most MAX_SHARERS per group; every request keeps >= 1 token after the prefix."""
  groups: list[tuple[int, list[int]]] = []
  for i in sorted(range(len(prompts)), key=lambda i: list(prompts[i])):
    p = prompts[i]
    if groups:
      shared, members = groups[-1]
      new = min(shared, _common(prompts[members[0]], p), len(p) - 1)
      if (new >= MIN_SHARED and (len(members) == 1 or new >= 0.8 * shared)
          and len(members) < MAX_SHARERS):
        groups[-1] = (new, members + [i])
        continue
    groups.append((len(p) - 1, [i]))
  return groups


class LogitVerdictClient(LocalClient, VerdictClient):
  """A LocalClient that also decides verdicts from next-token logits.

  As a TextClient it still generates (the evolver's text roles); the judge uses
  `verdicts`.
  """

  def __init__(self, model, prompt_builder, *, name: str = "model", batch_size: int = 16,
               prompt_buckets: Sequence[int] = (128, 256, 512, 1024, 2048),
               share_prefixes: bool = True):
    super().__init__(model, prompt_builder, name=name, batch_size=batch_size,
                     prompt_buckets=prompt_buckets)
    # A cache of the prefix's every slot: sliding windows (ring caches) and linear attention
    # (recurrent state) would need their own handling, so those models judge per request.
    self.share_prefixes = bool(share_prefixes) and model.attends_fully()
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
    fits = [i for i, p in enumerate(prompts) if len(p) <= longest]
    if self.share_prefixes:
      self._prefix_verdicts(prompts, fits, out)
      return out
    # Similar lengths share a batch, so fewer rows pad up to a larger bucket.
    fits.sort(key=lambda i: len(prompts[i]))
    for start in range(0, len(fits), self.batch_size):
      rows = fits[start:start + self.batch_size]
      padded = batching.pad_prompts([prompts[i] for i in rows], self.prompt_buckets,
                                    self.prompt_builder.pad_id, self.batch_size)
      lt, lf = _verdict_jit(self.graphdef, self.params, padded.tokens, padded.mask,
                            true_ids=self.true_ids, false_ids=self.false_ids)
      margin = np.asarray(lt, np.float64) - np.asarray(lf, np.float64)
      for row, i in enumerate(rows):
        out[i] = _verdict(margin[row])
    return out

  def _prefix_verdicts(self, prompts, fits: list[int], out: list) -> None:
    """Verdicts of the requests `fits` into `out`: each group's shared prefix prefilled
    once, its requests' suffixes run on copies of that cache."""
    groups = prefix_groups([prompts[i] for i in fits])
    groups.sort(key=lambda g: g[0])   # similar prefix lengths share a batch
    pad = self.prompt_builder.pad_id
    rows_per_call = SUFFIX_ROWS * self.batch_size
    while groups:
      batch, suffixes = [], 0
      while groups and len(batch) < self.batch_size and (
          not batch or suffixes + len(groups[0][1]) <= rows_per_call):
        batch.append(groups.pop(0))
        suffixes += len(batch[-1][1])
      prefixes = [prompts[fits[m[0]]][:shared] for shared, m in batch]
      tails = [(g, fits[m], prompts[fits[m]][shared:])
               for g, (shared, members) in enumerate(batch) for m in members]
      # Rows round up to small multiples (a few compiled shapes, little filler).
      p_width = batching.round_up(max(len(x) for x in prefixes), PREFIX_MULTIPLE)
      p = batching.pad_prompts(prefixes, (p_width,), pad, 2)
      s_width = batching.round_up(max(len(t) for *_, t in tails), SUFFIX_MULTIPLE)
      rows = batching.round_up(len(tails), self.batch_size)
      s_tokens = np.full((rows, s_width), pad, np.int32)
      s_mask = np.zeros((rows, s_width), bool)
      s_mask[:, 0] = True   # filler rows: one token, read and dropped
      owner = np.zeros(rows, np.int32)
      for r, (g, _, tail) in enumerate(tails):
        s_tokens[r, :len(tail)], s_mask[r, :len(tail)], owner[r] = tail, True, g
      lt, lf = _prefix_jit(self.graphdef, self.params, p.tokens, p.mask, s_tokens, s_mask,
                           owner, true_ids=self.true_ids, false_ids=self.false_ids)
      margin = np.asarray(lt, np.float64) - np.asarray(lf, np.float64)
      for r, (_, i, _) in enumerate(tails):
        out[i] = _verdict(margin[r])


def _verdict(margin: float) -> Verdict:
  return Verdict(met=bool(margin > 0), p_true=float(1.0 / (1.0 + np.exp(-margin))))
