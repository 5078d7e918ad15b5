"""Schema-constrained decoding in the in-process sampler (rollout/schema_dfa.py,
rollout/token_mask.py): every sample of a random tiny model, at temperature 1 and greedy,
is complete JSON that our strict readers accept, under each of our answer schemas (verdict,
attribution, proposal), even when max_new_tokens barely fits; rows without a schema are bit
for bit what the unconstrained sampler gives."""

import json

import jax
import numpy as np
import pytest
from flax import nnx

from harnessrl_jax.data.schema import Message
from harnessrl_jax.errors import HarnessError
from harnessrl_jax.evolver.attributor import attribution_schema, parse_attribution
from harnessrl_jax.evolver.proposer import ProposalRequest, parse_proposal, proposal_schema
from harnessrl_jax.evolver.types import CriterionLabel
from harnessrl_jax.judges.local_client import LocalClient
from harnessrl_jax.judges.parsing import parse_verdict
from harnessrl_jax.judges.prompt import VERDICT_SCHEMA
from harnessrl_jax.models.architecture import ModelConfig
from harnessrl_jax.models.decoder import Decoder
from harnessrl_jax.models.tokenizer import tiny_prompt_builder
from harnessrl_jax.rollout import sampler as rollout_sampler, schema_dfa, token_mask
from harnessrl_jax.rollout.sampling import SamplingParams
from tests.evolver.test_evolver_llm import spurious_group

PROMPTS = ("Grade it.", "Label the criteria please.", "x")


def tiny_model(seed=1, scale=3.0):
  graphdef, params = nnx.split(Decoder(ModelConfig.tiny(), rngs=nnx.Rngs(seed)))
  return nnx.merge(graphdef, jax.tree.map(lambda x: x * scale, params))


@pytest.fixture(scope="module")
def setup():
  model, pb = tiny_model(), tiny_prompt_builder()
  stop = tuple(dict.fromkeys(model.cfg.eos_token_ids + pb.eos_token_ids))
  compiler = schema_dfa.SchemaCompiler(pb.tokenizer, stop, model.cfg.vocab_size)
  return model, pb, stop, compiler


def read_verdict(text: str) -> None:
  assert parse_verdict(text) is not None, text
  assert set(json.loads(text)) == {"explanation", "criteria_met"}, text


def schemas_and_readers():
  """(name, schema, reader) for each answer schema; reader raises on a bad answer."""
  h, g = spurious_group()
  out = [("verdict", VERDICT_SCHEMA, read_verdict),
         ("attribution", attribution_schema(g), lambda t: parse_attribution(t, g))]
  # The label decides the route: saturated -> sampling, blind -> guidance, spurious -> rubric.
  for name in ("saturated", "blind", "spurious"):
    label = CriterionLabel("c2", name, 0.9, ("All requirements met.",), "")
    req = ProposalRequest(h, g, label, None, None, 0, 0)
    out.append((f"proposal:{req.route}", proposal_schema(req, with_checks=False),
                lambda t, req=req: parse_proposal(t, req)))
  return out


def decode_all(model, pb, out):
  tokens, lengths = np.asarray(out.response_tokens), np.asarray(out.lengths)
  stop = set(pb.eos_token_ids) | set(model.cfg.eos_token_ids)
  texts = []
  for row, n in zip(tokens, lengths):
    ids = [int(t) for t in row[:n]]
    assert ids and ids[-1] in stop, "a constrained answer must end with its stop token"
    texts.append(pb.decode(ids[:-1]))
  return texts


def test_schema_automaton_accepts_a_valid_answer_and_rejects_a_broken_one(setup):
  _, pb, stop, compiler = setup
  dfa = compiler.compile(VERDICT_SCHEMA)

  def walk(text):
    s = dfa.initial
    for t in pb.encode(text):
      s = int(dfa.next_state[s, dfa.token_class[t]])
      if s < 0:
        return None
    return s

  end = walk('{"explanation":"ok \\"quoted\\"","criteria_met":true}')
  assert end is not None and dfa.cost[end] == 1   # only the stop token is left
  assert int(dfa.next_state[end, dfa.token_class[stop[0]]]) == schema_dfa.END
  assert walk('{"explanation":"ok","criteria_met":maybe}') is None
  assert walk('{"criteria_met":true}') is None    # required key order: explanation first
  assert dfa.min_tokens == len('{"explanation":"","criteria_met":true}') + 1
  assert compiler.compile(dict(VERDICT_SCHEMA)) is dfa   # cached by canonical JSON


@pytest.mark.parametrize("temperature", [1.0, 0.0])
def test_every_constrained_sample_parses(setup, temperature):
  """All five schemas in one batch, one per prompt (per-row constraints), with a budget
  that forces the longest answer (attribution) to close within 24 tokens of its minimum."""
  model, pb, stop, compiler = setup
  graphdef, params = nnx.split(model)
  cases = schemas_and_readers()
  dfas = [compiler.compile(schema) for _, schema, _ in cases]
  prompts = [pb.encode_chat([Message("user", PROMPTS[i % len(PROMPTS)])])
             for i in range(len(cases))]
  budget = max(d.min_tokens for d in dfas) + 24
  j = 4 if temperature else 1
  out = rollout_sampler.generate(graphdef, params, prompts,
                        SamplingParams(temperature=temperature, max_new_tokens=budget),
                        jax.random.key(7), num_samples=j, pad_id=pb.pad_id,
                        eos_token_ids=stop, prompt_buckets=(64,), schemas=dfas)
  texts = decode_all(model, pb, out)
  for row, text in enumerate(texts):
    name, _, read = cases[row // j]
    read(text)   # raises on anything our strict readers refuse
  assert (np.asarray(out.finish_reason) == 0).all()
  if temperature:
    assert len(set(texts)) > len(cases)   # samples differ: the mask leaves room to choose


def test_unconstrained_rows_are_bit_identical(setup):
  model, pb, stop, compiler = setup
  graphdef, params = nnx.split(model)
  prompts = [pb.encode_chat([Message("user", p)]) for p in PROMPTS]
  law = SamplingParams(temperature=1.0, top_p=0.9, max_new_tokens=40)
  kwargs = dict(num_samples=2, pad_id=pb.pad_id, eos_token_ids=stop, prompt_buckets=(64,))
  plain = rollout_sampler.generate(graphdef, params, prompts, law, jax.random.key(3), **kwargs)
  dfa = compiler.compile(VERDICT_SCHEMA)
  mixed = rollout_sampler.generate(graphdef, params, prompts, law, jax.random.key(3),
                          schemas=[None, dfa, None], **kwargs)
  free = [0, 1, 4, 5]   # rows of prompts 0 and 2 (J = 2)
  for field in ("response_tokens", "logprobs", "lengths", "finish_reason"):
    a, b = np.asarray(getattr(plain, field)), np.asarray(getattr(mixed, field))
    np.testing.assert_array_equal(a[free], b[free], err_msg=field)
  texts = decode_all(model, pb, jax.tree.map(lambda x: x[2:4], mixed))
  assert all(parse_verdict(t) is not None for t in texts)


def test_join_shares_states_and_buckets_shapes(setup):
  _, _, _, compiler = setup
  v = compiler.compile(VERDICT_SCHEMA)
  a = compiler.compile(schemas_and_readers()[1][1])
  c, initial = token_mask.join([v, None, a, v])
  assert c.next_state.shape[0] == token_mask.bucket(1 + v.num_states + a.num_states)
  assert initial[1] == 0 and initial[0] == initial[3] != initial[2]
  assert (c.next_state[0, :] == 0).all() and c.cost[0] == 0   # the free state
  with pytest.raises(ValueError):
    token_mask.join([None])


def test_a_schema_that_cannot_fit_is_refused(setup):
  model, pb, stop, compiler = setup
  graphdef, params = nnx.split(model)
  dfa = compiler.compile(VERDICT_SCHEMA)
  with pytest.raises(HarnessError, match="needs at least"):
    rollout_sampler.generate(graphdef, params, [pb.encode("hi")],
                    SamplingParams(temperature=0.0, max_new_tokens=dfa.min_tokens - 1),
                    jax.random.key(0), pad_id=pb.pad_id, eos_token_ids=stop,
                    prompt_buckets=(64,), schemas=[dfa])
  client = LocalClient(model, pb, batch_size=2, prompt_buckets=(64,))
  (err,) = client.complete_or_errors([[Message("user", "hi")]], max_tokens=8,
                                     schema=VERDICT_SCHEMA)
  assert "needs at least" in str(err)


def test_local_client_answers_in_the_schema(setup):
  model, pb, _, _ = setup
  client = LocalClient(model, pb, batch_size=2, prompt_buckets=(64,))
  assert client.takes_schema
  chats = [[Message("user", p)] for p in PROMPTS]
  free = client.complete(chats, max_tokens=60)
  assert not any(parse_verdict(t) is not None for t in free)   # the model alone: gibberish
  answers = client.complete(chats, max_tokens=60, schema=VERDICT_SCHEMA)
  assert all(parse_verdict(t) is not None for t in answers)
  assert client.complete(chats, max_tokens=60) == free   # the unconstrained program again


def test_byte_level_token_bytes(setup):
  _, pb, _, _ = setup
  got = schema_dfa.token_bytes(pb.tokenizer)
  assert got[ord("a")] == b"a" and got[0] == b"\x00" and got[258] is None   # special
