"""Sampling math, prompt bucketing and the decode loop, checked against NumPy references.

No model here: the loop runs on a toy bigram "model" (logits = table[previous token]).
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from harnessrl_jax.errors import ConfigError, HarnessError
from harnessrl_jax.rollout import batching, decode_loop, sampling


def _reference_probs(logits, temperature, top_k, top_p):
  """float64 NumPy: softmax(logits / T) restricted as transformers does (top-k, then top-p)."""
  scaled = np.asarray(logits, np.float64) / temperature
  keep = np.ones_like(scaled, dtype=bool)
  if 0 < top_k < scaled.size:
    keep &= scaled >= np.sort(scaled)[-top_k]
  masked = np.where(keep, scaled, -np.inf)
  if top_p < 1.0:
    order = np.argsort(masked)  # ascending, as transformers' TopPLogitsWarper
    p = np.exp(masked[order] - masked.max())
    p /= p.sum()
    remove = np.cumsum(p) <= 1.0 - top_p
    remove[-1] = False
    keep[order[remove]] = False
  probs = np.where(keep, np.exp(scaled - scaled.max()), 0.0)
  return probs / probs.sum()


@pytest.mark.parametrize("top_k,top_p", [(0, 1.0), (5, 1.0), (0, 0.7), (8, 0.8), (1, 1.0),
                                         (0, 0.05), (100, 1.0)])
def test_filter_logits_keeps_the_reference_support(top_k, top_p):
  rng = np.random.default_rng(0)
  logits = rng.normal(size=(6, 40)).astype(np.float32) * 2
  out = np.asarray(sampling.filter_logits(jnp.asarray(logits), top_k, top_p))
  for row, got in zip(logits, out):
    want = _reference_probs(row, 1.0, top_k, top_p) > 0
    np.testing.assert_array_equal(np.isfinite(got), want)
    np.testing.assert_array_equal(got[want], row[want])


@pytest.mark.parametrize("temperature,top_k,top_p", [(1.0, 0, 1.0), (0.7, 6, 1.0),
                                                     (1.3, 0, 0.8), (1.0, 10, 0.9)])
def test_sampled_frequencies_match_restricted_softmax(temperature, top_k, top_p):
  vocab, draws = 32, 20000
  logits = np.random.default_rng(1).normal(size=vocab).astype(np.float32) * 1.5
  params = sampling.SamplingParams(temperature=temperature, top_k=top_k, top_p=top_p)
  keys = decode_loop.row_keys(jax.random.key(7), draws)
  tokens, logprobs = jax.jit(lambda l, k: sampling.sample_tokens(l, k, params))(
      jnp.broadcast_to(jnp.asarray(logits), (draws, vocab)), keys)
  tokens = np.asarray(tokens)
  want = _reference_probs(logits, temperature, top_k, top_p)
  counts = np.bincount(tokens, minlength=vocab)
  assert counts[want == 0].sum() == 0, "sampled a token outside the top-k/top-p set"
  support = want > 0
  _, pvalue = stats.chisquare(counts[support], want[support] * draws)
  assert pvalue > 1e-3
  tv = 0.5 * np.abs(counts / draws - want).sum()
  assert tv < 0.03
  # Log-probs are of the untruncated tempered softmax.
  full = np.asarray(logits, np.float64) / temperature
  full = full - np.log(np.exp(full - full.max()).sum()) - full.max()
  np.testing.assert_allclose(np.asarray(logprobs), full[tokens], rtol=1e-5, atol=1e-5)


def test_greedy_takes_argmax_with_untempered_logprobs():
  logits = np.random.default_rng(2).normal(size=(4, 50)).astype(np.float32)
  params = sampling.SamplingParams(temperature=0.0, top_k=3, top_p=0.5)
  tokens, logprobs = sampling.sample_tokens(jnp.asarray(logits),
                                            decode_loop.row_keys(jax.random.key(0), 4), params)
  np.testing.assert_array_equal(np.asarray(tokens), logits.argmax(-1))
  ref = logits.astype(np.float64)
  ref = ref - np.log(np.exp(ref).sum(-1, keepdims=True))
  np.testing.assert_allclose(np.asarray(logprobs), ref[np.arange(4), logits.argmax(-1)],
                             rtol=1e-5)


def test_same_key_same_draw_different_key_different_draw():
  logits = jnp.zeros((64, 100))
  params = sampling.SamplingParams()
  draw = lambda seed: np.asarray(sampling.sample_tokens(
      logits, decode_loop.row_keys(jax.random.key(seed), 64), params)[0])
  np.testing.assert_array_equal(draw(3), draw(3))
  assert (draw(3) != draw(4)).any()


@pytest.mark.parametrize("field,value", [("temperature", -1.0), ("top_p", 0.0),
                                         ("top_p", 1.5), ("top_k", -2),
                                         ("max_new_tokens", 0), ("stop_token_ids", (-3,))])
def test_bad_sampling_settings_raise_config_error(field, value):
  with pytest.raises(ConfigError, match=field):
    sampling.SamplingParams(**{field: value})


def test_sampling_params_from_config():
  from harnessrl_jax.config import base_config
  cfg = base_config().rollout
  params = sampling.SamplingParams.from_config(cfg, temperature=0.5)
  assert params == sampling.SamplingParams(temperature=0.5, top_p=cfg.top_p, top_k=cfg.top_k,
                                           max_new_tokens=cfg.max_new_tokens)
  cfg.top_p, cfg.max_new_tokens = 0.9, 7
  assert sampling.SamplingParams.from_config(cfg, greedy=True) == sampling.SamplingParams(
      temperature=0.0, max_new_tokens=7)   # one greedy law whatever top-p / top-k say
  cfg.top_p, cfg.num_samples, cfg.prompt_buckets = 1.5, 0, ()
  with pytest.raises(ConfigError) as e:
    sampling.SamplingParams.from_config(cfg)
  assert [line.split(" = ")[0] for line in str(e.value).splitlines()] == [
      "config.rollout.top_p", "config.rollout.num_samples", "config.rollout.prompt_buckets"]


def test_pad_prompts_left_pads_to_bucket_and_batch_multiple():
  padded = batching.pad_prompts([[5, 6, 7], [9]], buckets=(2, 4, 8), pad_id=0,
                                batch_multiple=4)
  np.testing.assert_array_equal(padded.tokens, [[0, 5, 6, 7], [0, 0, 0, 9], [0, 0, 0, 0],
                                                [0, 0, 0, 0]])
  np.testing.assert_array_equal(padded.mask, [[0, 1, 1, 1], [0, 0, 0, 1], [0, 0, 0, 1],
                                              [0, 0, 0, 1]])
  assert padded.num_prompts == 2
  assert batching.bucket_length(4, (8, 4)) == 4
  assert batching.bucket_length(5, (8, 4)) == 8


def test_pad_prompts_errors_name_the_fix():
  with pytest.raises(HarnessError, match="prompt_buckets"):
    batching.pad_prompts([[1] * 9], buckets=(4, 8), pad_id=0)
  with pytest.raises(HarnessError, match="prompt 1 is empty"):
    batching.pad_prompts([[1], []], buckets=(4,), pad_id=0)


# --- decode loop on a toy bigram model -------------------------------------------------

VOCAB, PAD, EOS = 12, 0, 11


def _bigram_table(seed=0):
  table = np.random.default_rng(seed).normal(size=(VOCAB, VOCAB)).astype(np.float32)
  table[:, PAD] = -30.0  # never sample the pad token
  table[:, EOS] -= 2.0    # so that some rows reach max_new_tokens
  return table


def _toy_apply(table):
  """A bigram model; its 'cache' records the positions it was fed, to check the bookkeeping."""
  def apply_fn(tokens, positions, mask, cache):
    del mask
    seen = jax.lax.dynamic_update_slice(cache["positions"], positions, (0, cache["index"]))
    return jnp.asarray(table)[tokens], {"positions": seen, "index": cache["index"] + 1}
  return apply_fn


def _run_toy(table, params, first_tokens, key, first_row=0):
  batch = len(first_tokens)

  @jax.jit
  def run(first, key):
    cache = {"positions": jnp.full((batch, params.max_new_tokens), -1, jnp.int32),
             "index": jnp.int32(0)}
    keys = decode_loop.row_keys(key, batch, first_row)
    return decode_loop.decode(_toy_apply(table), cache, first, jnp.full((batch,), 4),
                              keys, params, (EOS,), PAD)[0]

  return jax.tree.map(np.asarray, run(jnp.asarray(first_tokens, jnp.int32), key))


def test_decode_loop_stop_handling_and_logprobs():
  table = _bigram_table()
  params = sampling.SamplingParams(temperature=1.0, max_new_tokens=16)
  first = np.arange(32) % (VOCAB - 2) + 1
  out = _run_toy(table, params, first, jax.random.key(0))
  n = params.max_new_tokens
  for b in range(len(first)):
    length = out.lengths[b]
    resp = out.tokens[b, :length]
    assert 1 <= length <= n
    if out.finish_reason[b] == decode_loop.FINISH_STOP:
      assert resp[-1] == EOS and EOS not in resp[:-1]
    else:
      assert length == n and EOS not in resp
    assert (out.tokens[b, length:] == PAD).all() and (out.logprobs[b, length:] == 0).all()
    # Teacher-forced log-probs of the bigram model, float64.
    prev = np.concatenate([[first[b]], resp[:-1]])
    ref = table[prev].astype(np.float64)
    ref = ref - np.log(np.exp(ref).sum(-1, keepdims=True))
    np.testing.assert_allclose(out.logprobs[b, :length], ref[np.arange(length), resp],
                               rtol=1e-5, atol=1e-5)
  assert (out.finish_reason == decode_loop.FINISH_STOP).any()
  assert (out.finish_reason == decode_loop.FINISH_LENGTH).any()


def test_decode_loop_feeds_consecutive_positions_and_exits_early():
  table = np.full((VOCAB, VOCAB), -20.0, np.float32)
  table[:, EOS] = 0.0
  table[1, 5] = 9.0
  table[5, 7] = 9.0  # greedy: row starting at 1 -> 5 -> 7 -> EOS; row starting at 2 -> EOS
  params = sampling.SamplingParams(temperature=0.0, max_new_tokens=6)

  @jax.jit
  def run():
    cache = {"positions": jnp.full((2, 6), -1, jnp.int32), "index": jnp.int32(0)}
    return decode_loop.decode(_toy_apply(table), cache, jnp.array([1, 2]), jnp.array([3, 8]),
                              decode_loop.row_keys(jax.random.key(0), 2), params, (EOS,), PAD)

  out, cache = jax.tree.map(np.asarray, run())
  np.testing.assert_array_equal(out.tokens, [[5, 7, EOS, PAD, PAD, PAD],
                                             [EOS, PAD, PAD, PAD, PAD, PAD]])
  np.testing.assert_array_equal(out.lengths, [3, 1])
  np.testing.assert_array_equal(out.finish_reason, [decode_loop.FINISH_STOP] * 2)
  # Three steps ran (then every row had stopped), at consecutive positions from the start.
  assert cache["index"] == 3
  np.testing.assert_array_equal(cache["positions"], [[3, 4, 5, -1, -1, -1],
                                                     [8, 9, 10, -1, -1, -1]])


def test_decode_loop_is_deterministic_and_rows_do_not_depend_on_the_batch():
  table = _bigram_table(3)
  params = sampling.SamplingParams(temperature=0.9, top_k=6, max_new_tokens=12)
  first = np.array([1, 2, 3, 4, 5, 6])
  a = _run_toy(table, params, first, jax.random.key(11))
  b = _run_toy(table, params, first, jax.random.key(11))
  for x, y in zip(a, b):
    np.testing.assert_array_equal(x, y)
  # Rows 2..5 computed alone (with their global row index) match the full batch.
  c = _run_toy(table, params, first[2:], jax.random.key(11), first_row=2)
  np.testing.assert_array_equal(c.tokens, a.tokens[2:])
  np.testing.assert_array_equal(c.logprobs, a.logprobs[2:])
  d = _run_toy(table, params, first, jax.random.key(12))
  assert (d.tokens != a.tokens).any()


def test_decode_phases_run_in_order_and_equal_one_loop():
  """Phases split the steps into loops with their own step function; together they sample
  what one loop samples. Each phase's function is seen to run for its own steps only."""
  table = _bigram_table()
  params = sampling.SamplingParams(temperature=1.0, max_new_tokens=7)
  batch = 6
  first = jnp.arange(batch, dtype=jnp.int32) % (VOCAB - 2) + 1

  def tagged(tag):  # writes `tag` into the cache at each step it runs
    inner = _toy_apply(table)
    def apply_fn(tokens, positions, mask, cache):
      logits, new = inner(tokens, positions, mask, cache)
      tags = cache["tags"].at[cache["index"]].set(tag)
      return logits, {**new, "tags": tags}
    return apply_fn

  @functools.partial(jax.jit, static_argnums=1)
  def run(key, split):
    cache = {"positions": jnp.full((batch, 7), -1, jnp.int32), "index": jnp.int32(0),
             "tags": jnp.zeros((7,), jnp.int32)}
    keys = decode_loop.row_keys(key, batch)
    if split:
      fns = [decode_loop.Phase(3, tagged(1)), decode_loop.Phase(0, tagged(9)),
             decode_loop.Phase(4, tagged(2))]
    else:
      fns = tagged(1)
    return decode_loop.decode(fns, cache, first, jnp.full((batch,), 4), keys, params, (), PAD)

  (one, _), (phased, cache) = [jax.tree.map(np.asarray, run(jax.random.key(5), s))
                               for s in (False, True)]
  np.testing.assert_array_equal(phased.tokens, one.tokens)
  np.testing.assert_array_equal(phased.logprobs, one.logprobs)
  np.testing.assert_array_equal(cache["tags"], [1, 1, 1, 2, 2, 2, 2])
  with pytest.raises(ValueError, match="cover 5 steps"):
    decode_loop.decode([decode_loop.Phase(5, tagged(1))], {}, first, first,
                       decode_loop.row_keys(jax.random.key(0), batch), params, (), PAD)


def test_argmax_last_and_gumbel_draw_equal_jax_reference():
  """The sampler's argmax and Gumbel-max draw are jnp.argmax / jax.random.categorical."""
  rng = np.random.default_rng(0)
  x = rng.normal(size=(6, 50)).astype(np.float32)
  x[1, [3, 7, 20]] = 9.0                       # ties: the first index
  x[2] = -np.inf                                # all cut: index 0
  x[3, [11, 30]] = np.nan                       # NaN: the first NaN
  x[4, 5] = np.inf
  np.testing.assert_array_equal(sampling.argmax_last(jnp.asarray(x)),
                                jnp.argmax(jnp.asarray(x), axis=-1))
  logits = jnp.asarray(rng.normal(size=(64, 300)).astype(np.float32))
  keys = decode_loop.row_keys(jax.random.key(4), 64)
  params = sampling.SamplingParams(temperature=1.0, max_new_tokens=1)
  got, _ = sampling.sample_tokens(logits, keys, params)
  np.testing.assert_array_equal(got, jax.vmap(jax.random.categorical)(keys, logits))
