"""A JAX model in this process as a TextClient: greedy decoding through the rollout sampler.

The CPU default judge: no server, no network. Prompts are tokenised with the model's chat
template (`PromptBuilder.encode_chat`), decoded greedily in batches of `batch_size` (batch
and length buckets fixed so one program serves every call), and the answer is the text up to
the first end-of-sequence token. Same tokens in, same text out as `JetStreamClient` against
`python -m harnessrl_jax.serve` with the same weights (tests/serving/test_serving_jetstream.py).

`schema=` is honoured (`takes_schema`): the answer is decoded under the schema's token
automaton (rollout/schema_dfa.py, compiled once per schema and kept) and is complete JSON
within max_tokens; a schema that cannot be completed within max_tokens fails its requests.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import jax
import numpy as np
from flax import nnx

from harnessrl_jax.data.schema import Message
from harnessrl_jax.judges.client import Schema, ServerError, TextClient
from harnessrl_jax.rollout import sampler
from harnessrl_jax.rollout.sampling import SamplingParams
from harnessrl_jax.rollout.schema_dfa import SchemaCompiler, SchemaError


def answer_ids(tokens: Sequence[int], stop_ids: Sequence[int]) -> list[int]:
  """Response tokens before the first stop token (the stop token itself is not text)."""
  out = []
  for tok in tokens:
    if int(tok) in stop_ids:
      break
    out.append(int(tok))
  return out


class LocalClient(TextClient):
  """Greedy answers from a Decoder held in memory."""

  takes_schema = True
  regular_schemas = True

  def __init__(self, model, prompt_builder, *, name: str = "model", batch_size: int = 16,
               prompt_buckets: Sequence[int] = (128, 256, 512, 1024, 2048)):
    self.graphdef, self.params = nnx.split(model)
    self.cfg = model.cfg
    self.prompt_builder = prompt_builder
    self.batch_size = max(1, int(batch_size))
    self.prompt_buckets = tuple(int(b) for b in prompt_buckets)
    self.stop_ids = tuple(dict.fromkeys(self.cfg.eos_token_ids + prompt_builder.eos_token_ids))
    # The weights' digest is part of the identity, so a cache never mixes two models.
    digest = hashlib.sha256()
    for leaf in jax.tree.leaves(self.params):
      digest.update(np.asarray(leaf).tobytes())
    self.identity = f"local:{name}:{digest.hexdigest()[:16]}"
    self._compiler: SchemaCompiler | None = None

  def schema_dfa(self, schema: Schema):
    """The schema's token automaton over this model's vocabulary (compiled once)."""
    if self._compiler is None:
      self._compiler = SchemaCompiler(self.prompt_builder.tokenizer, self.stop_ids,
                                      self.cfg.vocab_size)
    return self._compiler.compile(schema)

  def _complete(self, chats: list[tuple[Message, ...]], max_tokens: int,
                schema: Schema | None = None) -> list[str | ServerError]:
    dfa = None
    if schema is not None:
      try:
        dfa = self.schema_dfa(schema)
      except SchemaError as e:
        return [ServerError(f"{self.identity}: {e}") for _ in chats]
      if dfa.min_tokens > max_tokens:
        return [ServerError(f"{self.identity}: an answer in schema {schema.get('title')!r} "
                            f"needs at least {dfa.min_tokens} tokens; max_tokens is "
                            f"{max_tokens}") for _ in chats]
    prompts = [self.prompt_builder.encode_chat(chat) for chat in chats]
    sampling = SamplingParams(temperature=0.0, max_new_tokens=max_tokens,
                              stop_token_ids=self.stop_ids)
    key = jax.random.key(0)  # unused by greedy decoding, required by the API
    longest = max(self.prompt_buckets)
    answers: list[str | ServerError] = [
        ServerError(f"{self.identity}: the judge prompt has {len(p)} tokens, more than the "
                    f"largest of judge.local.prompt_buckets ({longest})")
        for p in prompts]
    fits = [i for i, p in enumerate(prompts) if len(p) <= longest]
    for start in range(0, len(fits), self.batch_size):
      rows = fits[start:start + self.batch_size]
      out = sampler.generate(self.graphdef, self.params, [prompts[i] for i in rows], sampling,
                            key, pad_id=self.prompt_builder.pad_id,
                            prompt_buckets=self.prompt_buckets,
                            batch_multiple=self.batch_size,
                            schemas=None if dfa is None else [dfa] * len(rows))
      tokens, lengths = np.asarray(out.response_tokens), np.asarray(out.lengths)
      for row, i in enumerate(rows):
        answers[i] = self.prompt_builder.decode(answer_ids(tokens[row, :lengths[row]],
                                                           self.stop_ids))
    return answers
