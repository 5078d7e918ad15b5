"""LocalClient: greedy answers from a JAX model in process, through the rollout sampler,
checked against greedy decoding by full forward passes (no KV cache)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from harnessrl_jax.data.schema import Message
from harnessrl_jax.judges.client import ServerError
from harnessrl_jax.judges.config import judge_defaults
from harnessrl_jax.judges.factory import make_client
from harnessrl_jax.judges.local_client import LocalClient, answer_ids
from harnessrl_jax.models.architecture import ModelConfig
from harnessrl_jax.models.decoder import Decoder
from harnessrl_jax.models.loading import LoadedModel
from harnessrl_jax.models.tokenizer import tiny_prompt_builder

WIDTH = 96


def scaled_model(seed=1):
  graphdef, params = nnx.split(Decoder(ModelConfig.tiny(), rngs=nnx.Rngs(seed)))
  return nnx.merge(graphdef, jax.tree.map(lambda x: x * 3.0, params))


def reference_text(model, pb, chat, max_tokens):
  graphdef, params = nnx.split(model)
  forward = jax.jit(lambda p, t, m: nnx.merge(graphdef, p)(t, jnp.arange(WIDTH)[None], m)[0])
  ids, out = pb.encode_chat(chat), []
  stop = set(pb.eos_token_ids) | set(model.cfg.eos_token_ids)
  for _ in range(max_tokens):
    tokens = np.zeros((1, WIDTH), np.int32)
    tokens[0, :len(ids)] = ids
    logits = forward(params, tokens, np.arange(WIDTH)[None] < len(ids))
    nxt = int(jnp.argmax(logits[0, len(ids) - 1]))
    if nxt in stop:
      break
    out.append(nxt)
    ids.append(nxt)
  return pb.decode(out)


def test_answer_ids_stops_at_first_stop_token():
  assert answer_ids([5, 6, 2, 7, 2], (2,)) == [5, 6]
  assert answer_ids(np.array([5, 6]), (2,)) == [5, 6]


def test_greedy_answers_match_reference_across_batches():
  model, pb = scaled_model(), tiny_prompt_builder()
  client = LocalClient(model, pb, batch_size=2, prompt_buckets=(48,))
  chats = [[Message("user", q)] for q in ("hi", "Name a colour.", "Why is the sky blue?")]
  got = client.complete(chats, max_tokens=12)   # 3 prompts: two batches of 2
  want = [reference_text(model, pb, c, 12) for c in chats]
  assert got == want
  assert len(set(got)) == 3
  # Deterministic, and independent of its batch neighbours.
  assert client.complete(chats[::-1], max_tokens=12) == got[::-1]


def test_overlong_prompt_fails_alone_and_identity_tracks_weights():
  model, pb = scaled_model(), tiny_prompt_builder()
  client = LocalClient(model, pb, batch_size=2, prompt_buckets=(48,))
  out = client.complete_or_errors([[Message("user", "x" * 100)], [Message("user", "hi")]],
                                  max_tokens=4)
  assert isinstance(out[0], ServerError) and "largest of judge.local.prompt_buckets" in str(out[0])
  assert isinstance(out[1], str)
  with pytest.raises(ServerError):
    client.complete([[Message("user", "x" * 100)]], max_tokens=4)
  other = LocalClient(scaled_model(seed=2), pb, batch_size=2, prompt_buckets=(48,))
  assert other.identity != client.identity
  assert LocalClient(scaled_model(), pb).identity == client.identity


def test_factory_builds_local_and_jetstream_clients_from_a_loaded_model():
  model, pb = scaled_model(), tiny_prompt_builder()
  loaded = LoadedModel(model, model.cfg, pb)
  cfg = judge_defaults()
  cfg.local.batch_size = 3
  local = make_client(cfg, "local", loaded=loaded)
  assert isinstance(local, LocalClient) and local.batch_size == 3
  js = make_client(cfg, "jetstream", loaded=loaded)
  assert js.identity == "jetstream:127.0.0.1:9000"
  js.close()
