"""The rollout sampler on tiny random decoders: determinism, log-probs, distribution, compiles,
sharding. References: a teacher-forced forward pass without cache, and float64 NumPy."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from scipy import stats

from harnessrl_jax.errors import HarnessError
from harnessrl_jax.models.architecture import FAMILIES, ModelConfig
from harnessrl_jax.models import sharding
from harnessrl_jax.models.decoder import Decoder
from harnessrl_jax.rollout import sampler as rollout_sampler
from harnessrl_jax.rollout.sampling import SamplingParams

PROMPTS = [[5, 17, 200, 33, 8], [90], [7, 7, 150, 260, 12, 99, 3, 41, 250], [64, 65]]


def _model(family="llama", seed=0, **overrides):
  return Decoder(ModelConfig.tiny(family, **overrides), rngs=nnx.Rngs(seed))


def _np(tree):
  return jax.tree.map(np.asarray, tree)


def _teacher_forced_logprobs(model, batch, temperature):
  """log softmax(logits / T) of each response token, from one forward pass with no cache."""
  tokens, mask, positions = batch.full_sequences()
  logits, _ = model(tokens, positions, mask)
  logp = jax.nn.log_softmax(np.asarray(logits, np.float64) / temperature, axis=-1)
  width = batch.prompt_tokens.shape[1]
  # The logits at position width-1+i predict response token i.
  pred = logp[:, width - 1:-1]
  return np.take_along_axis(pred, np.asarray(batch.response_tokens)[..., None], -1)[..., 0]


@pytest.mark.parametrize("family", ["llama", "qwen2", "qwen3"])
def test_deterministic_and_logprobs_equal_teacher_forcing(family):
  model = _model(family)
  graphdef, params = nnx.split(model)
  stop = tuple(range(100, 112))  # frequent enough that some rows stop early
  sampling = SamplingParams(temperature=0.8, top_k=60, top_p=0.95, max_new_tokens=12,
                            stop_token_ids=stop)
  run = lambda key: _np(rollout_sampler.generate(graphdef, params, PROMPTS, sampling, key,
                                        num_samples=3, prompt_buckets=(16,)))
  a, b = run(jax.random.key(1)), run(jax.random.key(1))
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
    np.testing.assert_array_equal(x, y)
  assert (run(jax.random.key(2)).response_tokens != a.response_tokens).any()

  assert a.response_tokens.shape == (len(PROMPTS) * 3, 12)
  np.testing.assert_array_equal(a.prompt_mask.sum(1), np.repeat([len(p) for p in PROMPTS], 3))
  ref = _teacher_forced_logprobs(model, a, sampling.temperature)
  np.testing.assert_allclose(np.where(a.response_mask, ref, 0.0), a.logprobs, atol=2e-4)
  ends = set(stop) | set(model.cfg.eos_token_ids)
  for row in range(a.lengths.shape[0]):
    resp = a.response_tokens[row, :a.lengths[row]]
    assert a.response_mask[row].sum() == a.lengths[row]
    if a.finish_reason[row] == 0:
      assert resp[-1] in ends and not ends & set(resp[:-1].tolist())
    else:
      assert a.lengths[row] == 12 and not ends & set(resp.tolist())
  assert set(a.finish_reason.tolist()) == {0, 1}


def _reference_probs(logits, temperature, top_k, top_p):
  """float64 softmax(logits / T) restricted to top-k then top-p (transformers' order)."""
  scaled = np.asarray(logits, np.float64) / temperature
  order = np.argsort(-scaled)
  keep = np.zeros(scaled.size, bool)
  keep[order[:top_k or scaled.size]] = True
  p = np.where(keep, np.exp(scaled - scaled.max()), 0.0)
  p /= p.sum()
  mass_before = np.cumsum(p[order]) - p[order]
  keep[order[mass_before >= top_p]] = False
  p = np.where(keep, p, 0.0)
  return p / p.sum()


@pytest.mark.parametrize("temperature,top_k,top_p", [(0.5, 0, 0.9), (0.7, 25, 1.0)])
def test_first_token_frequencies_match_restricted_softmax(temperature, top_k, top_p):
  # An untied head scaled up gives a peaked next-token distribution (std-0.02 init is flat).
  model = _model(seed=3, tie_word_embeddings=False)
  model.lm_head[...] = model.lm_head[...] * 10
  graphdef, params = nnx.split(model)
  prompt = [3, 141, 59, 26]
  draws = 6000
  sampling = SamplingParams(temperature=temperature, top_k=top_k, top_p=top_p,
                            max_new_tokens=1)
  out = _np(rollout_sampler.generate(graphdef, params, [prompt], sampling, jax.random.key(5),
                            num_samples=draws, prompt_buckets=(8,)))
  logits, _ = model(jnp.asarray([prompt]), jnp.arange(4)[None], jnp.ones((1, 4), bool))
  want = _reference_probs(np.asarray(logits[0, -1]), temperature, top_k, top_p)
  counts = np.bincount(out.response_tokens[:, 0], minlength=want.size)
  assert counts[want == 0].sum() == 0
  support = want > 0
  assert 5 <= support.sum() <= 200  # the test distinguishes distributions
  _, pvalue = stats.chisquare(counts[support], want[support] * draws)
  assert pvalue > 1e-3
  assert 0.5 * np.abs(counts / draws - want).sum() < 0.06


def test_same_bucket_and_batch_multiple_do_not_recompile():
  graphdef, params = nnx.split(_model())
  sampling = SamplingParams(temperature=1.0, max_new_tokens=4)
  call = lambda prompts, seed: rollout_sampler.generate(
      graphdef, params, prompts, sampling, jax.random.key(seed), num_samples=2,
      prompt_buckets=(8, 16), batch_multiple=4)
  call([[1, 2, 3], [4, 5]], 0)
  before = rollout_sampler.rollout_jit._cache_size()   # the compiled programs
  out = call([[1, 2, 3, 4, 5, 6, 7], [9], [10, 11, 12]], 1)  # length 7 <= 8, 3 <= 4 prompts
  out2 = call([[8] * 8, [9, 10, 11, 12]], 2)
  assert rollout_sampler.rollout_jit._cache_size() == before
  assert out.response_tokens.shape == (6, 4) and out2.response_tokens.shape == (4, 4)
  call([[1] * 9], 3)  # the next bucket compiles once
  assert rollout_sampler.rollout_jit._cache_size() == before + 1


def test_pad_multiple_trims_the_width_and_keeps_greedy_answers():
  """A held-out evaluation pads to its longest prompt rounded up (rollout.eval_pad_multiple),
  not to the bucket: a narrower program, the same greedy tokens."""
  graphdef, params = nnx.split(_model())
  greedy = SamplingParams(temperature=0.0, max_new_tokens=8)
  run = lambda **kw: _np(rollout_sampler.generate(graphdef, params, PROMPTS, greedy, jax.random.key(0),
                                         prompt_buckets=(32, 64), **kw))
  bucket, trimmed = run(), run(pad_multiple=4)
  assert bucket.prompt_tokens.shape[1] == 32 and trimmed.prompt_tokens.shape[1] == 12
  np.testing.assert_array_equal(trimmed.response_tokens, bucket.response_tokens)
  np.testing.assert_allclose(trimmed.logprobs, bucket.logprobs, atol=1e-5)
  # Never wider than the bucket: a multiple above it keeps the bucket.
  assert run(pad_multiple=48).prompt_tokens.shape[1] == 32


def test_sample_rows_do_not_depend_on_other_prompts():
  graphdef, params = nnx.split(_model("qwen2"))
  sampling = SamplingParams(temperature=1.0, top_p=0.9, max_new_tokens=10)
  full = _np(rollout_sampler.generate(graphdef, params, PROMPTS, sampling, jax.random.key(4),
                             num_samples=2, prompt_buckets=(16,)))
  first = _np(rollout_sampler.generate(graphdef, params, PROMPTS[:1], sampling, jax.random.key(4),
                              num_samples=2, prompt_buckets=(16,)))
  np.testing.assert_array_equal(first.response_tokens, full.response_tokens[:2])
  np.testing.assert_allclose(first.logprobs, full.logprobs[:2], atol=1e-5)


def test_a_key_per_prompt_gives_each_prompt_what_it_gets_alone():
  """The critic's prefetch (evolver/prefetch.py) batches single-prompt calls: prompt p with
  key[p] in a batch equals prompt p alone with key[p], whatever its neighbours, the batch
  padding (batch_multiple's filler rows) or the key form (typed [P], raw [P, 2])."""
  graphdef, params = nnx.split(_model("qwen2"))
  sampling = SamplingParams(temperature=1.0, top_p=0.9, max_new_tokens=10)
  keys = [jax.random.fold_in(jax.random.key(3), i) for i in range(len(PROMPTS))]
  call = lambda prompts, key, multiple=1: _np(rollout_sampler.generate(
      graphdef, params, prompts, sampling, key, num_samples=2, prompt_buckets=(16,),
      batch_multiple=multiple))
  batched = call(PROMPTS, jnp.stack(keys), multiple=8)
  raw = call(PROMPTS, jnp.stack([jax.random.key_data(k) for k in keys]))
  np.testing.assert_array_equal(raw.response_tokens, batched.response_tokens)
  for p, (prompt, key) in enumerate(zip(PROMPTS, keys)):
    alone = call([prompt], key)
    np.testing.assert_array_equal(alone.response_tokens,
                                  batched.response_tokens[2 * p:2 * p + 2])
    np.testing.assert_allclose(alone.logprobs, batched.logprobs[2 * p:2 * p + 2], atol=1e-5)
  # Different keys give different samples (the keys are used, not the first one for all).
  assert not np.array_equal(batched.response_tokens[:2], call(PROMPTS[:1], keys[1]).response_tokens)
  with pytest.raises(HarnessError, match="3 keys for 4 prompts"):
    call(PROMPTS, jnp.stack(keys[:3]))


def test_sharded_rollout_equals_unsharded():
  model = _model("qwen3")
  graphdef, params = nnx.split(model)
  sampling = SamplingParams(temperature=0.9, top_k=40, max_new_tokens=8)
  plain = _np(rollout_sampler.generate(graphdef, params, PROMPTS, sampling, jax.random.key(9),
                              num_samples=2, prompt_buckets=(16,)))
  mesh = sharding.make_mesh({"data": 2, "fsdp": 2, "tensor": 2})
  # Parameters as the learner holds them (FSDP + tensor parallel); the batch split 4 ways.
  params_on_mesh = jax.device_put(params, sharding.param_shardings(params, mesh))
  assert any(len(x.sharding.device_set) == 8 and not x.sharding.is_fully_replicated
             for x in jax.tree.leaves(params_on_mesh))
  sharded = rollout_sampler.generate(graphdef, params_on_mesh, PROMPTS, sampling, jax.random.key(9),
                            num_samples=2, prompt_buckets=(16,), mesh=mesh)
  assert sharded.response_tokens.sharding.spec[0] == ("data", "fsdp")
  sharded = _np(sharded)
  np.testing.assert_array_equal(sharded.response_tokens, plain.response_tokens)
  np.testing.assert_allclose(sharded.logprobs, plain.logprobs, atol=1e-5)
  with pytest.raises(HarnessError, match="multiple of 4"):
    rollout_sampler.generate_padded(graphdef, params_on_mesh, np.ones((2, 4), np.int32),
                           np.ones((2, 4), bool), sampling, jax.random.key(0), mesh=mesh)


@pytest.mark.parametrize("family", FAMILIES)
def test_remat_rollout_equals_plain_rollout(family):
  """config.model.remat (configs/paper.py sets it) once crashed every rollout: the cached
  forward ran its blocks under jax.checkpoint, which traced the cache's Python flags. Remat
  is for the backward pass; a rollout with it must sample exactly what one without does."""
  sampling = SamplingParams(temperature=0.9, top_k=40, max_new_tokens=6)
  graphdef, params = nnx.split(_model(family))
  remat_graphdef, remat_params = nnx.split(_model(family, remat=True))
  for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(remat_params)):
    np.testing.assert_array_equal(a, b)   # same seed, same weights: only remat differs
  plain, remat = (_np(rollout_sampler.generate(g, p, PROMPTS, sampling, jax.random.key(4),
                                      num_samples=2, prompt_buckets=(16,)))
                  for g, p in ((graphdef, params), (remat_graphdef, remat_params)))
  np.testing.assert_array_equal(remat.response_tokens, plain.response_tokens)
  np.testing.assert_array_equal(remat.logprobs, plain.logprobs)
  np.testing.assert_array_equal(remat.lengths, plain.lengths)


@pytest.mark.parametrize("family", ["qwen3", "qwen3_5"])
def test_accelerator_layer_scan_equals_sliced_layers(family, monkeypatch):
  """On accelerators the rollout scans the stacked layer weights in place instead of slicing
  them once per rollout (CPU): the same samples either way."""
  graphdef, params = nnx.split(_model(family))
  sampling = SamplingParams(temperature=0.9, top_k=40, max_new_tokens=6)
  run = lambda: _np(rollout_sampler.generate(graphdef, params, PROMPTS, sampling, jax.random.key(5),
                                    num_samples=2, prompt_buckets=(16,), phase_tokens=4))
  assert rollout_sampler.on_cpu(params)
  sliced = run()
  monkeypatch.setattr(rollout_sampler, "on_cpu", lambda _: False)
  scanned = run()
  np.testing.assert_array_equal(scanned.response_tokens, sliced.response_tokens)
  np.testing.assert_allclose(scanned.logprobs, sliced.logprobs, atol=1e-5)


def test_user_errors_raise_harness_error():
  graphdef, params = nnx.split(_model())
  sampling = SamplingParams(max_new_tokens=2)
  with pytest.raises(HarnessError, match="left-padded"):
    rollout_sampler.generate_padded(graphdef, params, np.ones((1, 4), np.int32),
                           np.array([[True, True, True, False]]), sampling, jax.random.key(0))
  with pytest.raises(HarnessError, match="prompt_buckets"):
    rollout_sampler.generate(graphdef, params, [[1] * 20], sampling, jax.random.key(0),
                    prompt_buckets=(8, 16))


def test_sampler_from_config_with_prompt_builder():
  from harnessrl_jax.config import base_config
  from harnessrl_jax.models import loading
  loaded = loading.load_model({"source": "tiny", "seed": 1})
  builder = loaded.prompt_builder
  graphdef, params = nnx.split(loaded.model)
  rollout_cfg = base_config().rollout
  sampler = rollout_sampler.Sampler.from_config(graphdef, rollout_cfg, pad_id=builder.pad_id,
                                       eos_token_ids=builder.eos_token_ids, batch_multiple=2)
  prompts = [builder.encode_chat([{"role": "user", "content": q}]) for q in ("hi", "2+2?")]
  sampling = SamplingParams.from_config(rollout_cfg, max_new_tokens=5)
  out = _np(sampler(params, prompts, sampling, jax.random.key(0)))
  j = rollout_cfg.num_samples
  assert out.response_tokens.shape == (2 * j, 5)
  for i, prompt in enumerate(prompts):  # rows i*J .. i*J+J-1 belong to prompt i
    rows = out.prompt_tokens[i * j:(i + 1) * j]
    np.testing.assert_array_equal(rows[:, -len(prompt):], np.tile(prompt, (j, 1)))
  assert out.prompt_tokens.shape[1] == rollout_cfg.prompt_buckets[0]
  # A raw uint32[2] key (jax.random.PRNGKey) is the same key as jax.random.key.
  raw = _np(sampler(params, prompts, sampling, jax.random.PRNGKey(0)))
  np.testing.assert_array_equal(raw.response_tokens, out.response_tokens)


@pytest.mark.parametrize("scan_layers", [True, pytest.param(False, marks=pytest.mark.slow)])
def test_decode_phases_do_not_change_outputs(scan_layers):
  """Phases read fewer cache slots and (scanned layers) per-layer weights: same samples."""
  graphdef, params = nnx.split(_model(scan_layers=scan_layers))
  # 6 tokens: one phase, 4 + 2 (a short last phase) and six 1-token phases; each phase
  # compiles its own loop, so more tokens only cost compiles
  sampling = SamplingParams(temperature=0.9, top_k=50, max_new_tokens=6)
  runs = [_np(rollout_sampler.generate(graphdef, params, PROMPTS, sampling, jax.random.key(3),
                              num_samples=2, prompt_buckets=(16,), phase_tokens=n))
          for n in (64, 4, 1)]
  for other in runs[1:]:
    np.testing.assert_array_equal(other.response_tokens, runs[0].response_tokens)
    np.testing.assert_allclose(other.logprobs, runs[0].logprobs, atol=1e-5)
  with pytest.raises(HarnessError, match="decode_phase_tokens"):
    rollout_sampler.generate(graphdef, params, PROMPTS, sampling, jax.random.key(3), phase_tokens=0)
