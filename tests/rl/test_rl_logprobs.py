"""Chunked per-token log-probs: values, entropy and gradients vs float64 NumPy, and memory."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from harnessrl_jax.models.architecture import ModelConfig
from harnessrl_jax.models.decoder import Decoder
from harnessrl_jax.rl.batch import RLBatch
from harnessrl_jax.rl.logprobs import token_logprobs
from harnessrl_jax.rl.train_step import decoder_forward, response_logprobs


def _np_reference(h, w, tgt, temp):
  h, w = np.asarray(h, np.float64), np.asarray(w, np.float64)
  logits = h @ w / temp
  logits -= logits.max(-1, keepdims=True)
  logz = np.log(np.exp(logits).sum(-1, keepdims=True))
  logsm = logits - logz
  probs = np.exp(logsm)
  logp = np.take_along_axis(logsm, tgt[..., None], -1)[..., 0]
  ent = -(probs * logsm).sum(-1)
  return logp, ent, probs


@pytest.mark.parametrize("chunk,temp", [(3, 1.0), (4, 0.7), (64, 1.3)])
def test_chunked_logprobs_match_numpy(chunk, temp):
  rng = np.random.default_rng(chunk)
  b, t, d, v = 3, 10, 8, 37  # t not a multiple of chunk 3 or 4: exercises the padding
  h = rng.normal(size=(b, t, d)).astype(np.float32)
  w = rng.normal(size=(d, v)).astype(np.float32)
  tgt = rng.integers(0, v, (b, t))
  g_out = rng.normal(size=(b, t))
  want_lp, want_ent, probs = _np_reference(h, w, tgt, temp)
  lp, ent = token_logprobs(jnp.asarray(h), jnp.asarray(w), jnp.asarray(tgt), chunk=chunk,
                           temperature=temp)
  np.testing.assert_allclose(lp, want_lp, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(ent, want_ent, rtol=1e-5, atol=1e-5)
  # d/dlogits of sum(g * logp) = g * (onehot - softmax) / temp.
  onehot = np.eye(v)[tgt]
  dlogits = g_out[..., None] * (onehot - probs) / temp
  want_dh = dlogits @ np.asarray(w, np.float64).T
  want_dw = np.einsum("btd,btv->dv", np.asarray(h, np.float64), dlogits)
  f = lambda hh, ww: jnp.sum(jnp.asarray(g_out, jnp.float32) * token_logprobs(
      hh, ww, jnp.asarray(tgt), chunk=chunk, temperature=temp)[0])
  dh, dw = jax.grad(f, argnums=(0, 1))(jnp.asarray(h), jnp.asarray(w))
  np.testing.assert_allclose(dh, want_dh, rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(dw, want_dw, rtol=1e-4, atol=1e-5)


def test_memory_stays_below_full_logits():
  """Forward + backward peak temp memory is far below one copy of the [B, T, V] logits."""
  b, t, d, v, chunk = 4, 256, 64, 8192, 16
  h = jax.ShapeDtypeStruct((b, t, d), jnp.float32)
  w = jax.ShapeDtypeStruct((d, v), jnp.float32)
  tgt = jax.ShapeDtypeStruct((b, t), jnp.int32)
  f = lambda hh, ww, tt: jnp.sum(token_logprobs(hh, ww, tt, chunk=chunk)[0])
  mem = jax.jit(jax.grad(f, argnums=(0, 1))).lower(h, w, tgt).compile().memory_analysis()
  full_logits = b * t * v * 4
  assert mem.temp_size_in_bytes < full_logits / 4, (mem.temp_size_in_bytes, full_logits)


def test_response_logprobs_match_decoder_logits():
  """The learner's response slice and shift agree with log_softmax of the Decoder's logits."""
  cfg = ModelConfig.tiny(vocab_size=50, num_layers=1)
  model = Decoder(cfg, rngs=nnx.Rngs(3))
  graphdef, params = nnx.split(model)
  rng = np.random.default_rng(0)
  b, p, n = 3, 4, 5
  tokens = rng.integers(0, 50, (b, p + n)).astype(np.int32)
  mask = np.ones((b, p + n), bool)
  mask[0, :2] = False  # left-padded prompt
  mask[1, -2:] = False  # response ended early
  pos = np.maximum(np.cumsum(mask, 1) - 1, 0).astype(np.int32)
  batch = RLBatch(tokens=jnp.asarray(tokens), positions=jnp.asarray(pos),
                  attention_mask=jnp.asarray(mask), loss_mask=jnp.asarray(mask[:, p:], jnp.float32),
                  old_logprobs=None, ref_logprobs=None, advantages=jnp.zeros(b),
                  task_weight=jnp.ones(b), group_id=jnp.zeros(b, jnp.int32))
  lp, _ = response_logprobs(decoder_forward(graphdef), params, batch, chunk=2, temperature=1.0)
  logits, _ = model(tokens, pos, mask)
  logsm = np.asarray(jax.nn.log_softmax(logits, axis=-1))
  want = np.stack([[logsm[i, p + j - 1, tokens[i, p + j]] for j in range(n)] for i in range(b)])
  np.testing.assert_allclose(lp, want, rtol=1e-5, atol=1e-5)
