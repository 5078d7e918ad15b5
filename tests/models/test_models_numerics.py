"""bf16 parameters/activations and rematerialisation against the fp32 / plain model."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from harnessrl_jax.models.architecture import ModelConfig
from harnessrl_jax.models.decoder import Decoder
from harnessrl_jax.models.kv_cache import init_cache
from tests.models.test_models_export import randomised


def _inputs(cfg, b=2, t=12):
  tokens = np.random.default_rng(1).integers(0, cfg.vocab_size, (b, t), dtype=np.int32)
  mask = np.ones((b, t), bool)
  mask[1, :3] = False
  positions = np.clip(np.cumsum(mask, 1) - 1, 0, None).astype(np.int32)
  return tokens, positions, mask


def _with_params_of(src: Decoder, cfg: ModelConfig) -> Decoder:
  """A model of config `cfg` holding `src`'s parameters cast to cfg.param_dtype."""
  dst = Decoder(cfg, rngs=nnx.Rngs(0))
  pdt = jnp.dtype(cfg.param_dtype)
  nnx.update(dst, jax.tree.map(lambda x: x.astype(pdt), nnx.state(src, nnx.Param)))
  return dst


@pytest.mark.parametrize("param_dtype,dtype", [("bfloat16", "bfloat16"),
                                               ("float32", "bfloat16")])
def test_bf16_forward_tracks_fp32(param_dtype, dtype):
  cfg32 = ModelConfig.tiny("qwen3")
  ref = randomised(cfg32, seed=2)
  cfg = cfg32.replace(param_dtype=param_dtype, dtype=dtype)
  model = _with_params_of(ref, cfg)
  leaves = jax.tree.leaves(nnx.state(model, nnx.Param))
  assert {x.dtype for x in leaves} == {jnp.dtype(param_dtype)}
  tokens, positions, mask = _inputs(cfg)
  want = np.asarray(ref(tokens, positions, mask)[0])
  got, _ = model(tokens, positions, mask)
  assert got.dtype == jnp.float32
  assert model.hidden_states(tokens, positions, mask).dtype == jnp.bfloat16
  got = np.asarray(got)
  assert np.isfinite(got).all()
  # bf16 keeps ~3 significant digits; errors compound over 2 layers but stay a few %.
  err = np.abs(got[mask] - want[mask]).max() / np.abs(want[mask]).max()
  assert err < 0.05, err
  # Same argmax on most real positions: the model still says the same thing.
  assert (got[mask].argmax(-1) == want[mask].argmax(-1)).mean() > 0.9

  cache = init_cache(cfg, 2, 16)
  assert cache.k.dtype == jnp.bfloat16
  cached, cache = model(tokens, positions, mask, cache)
  np.testing.assert_allclose(np.asarray(cached)[mask], got[mask], atol=0.05 * np.abs(got).max())


@pytest.mark.parametrize("scan_layers", [True, pytest.param(False, marks=pytest.mark.slow)])
def test_remat_gives_identical_loss_and_grads(scan_layers):
  cfg = ModelConfig.tiny("llama", scan_layers=scan_layers)
  plain = randomised(cfg, seed=4)
  remat = _with_params_of(plain, cfg.replace(remat=True))
  tokens, positions, mask = _inputs(cfg)

  def loss_fn(model):
    logits = model(tokens, positions, mask)[0]
    logp = jax.nn.log_softmax(logits[:, :-1])
    tgt = jnp.take_along_axis(logp, tokens[:, 1:, None], axis=-1)[..., 0]
    return -(tgt * mask[:, 1:]).sum() / mask[:, 1:].sum()

  grad = nnx.value_and_grad(loss_fn)
  loss_a, grads_a = nnx.jit(grad)(plain)
  loss_b, grads_b = nnx.jit(grad)(remat)
  assert np.isfinite(float(loss_a))
  np.testing.assert_allclose(float(loss_b), float(loss_a), rtol=1e-6)
  for a, b in zip(jax.tree.leaves(grads_a), jax.tree.leaves(grads_b)):
    np.testing.assert_allclose(np.asarray(b), np.asarray(a), atol=1e-6, rtol=1e-5)
  # The remat model really checkpoints: its jaxpr holds a remat region, the plain one none.
  graphdef, state = nnx.split(remat)
  jaxpr = str(jax.make_jaxpr(lambda s: loss_fn(nnx.merge(graphdef, s)))(state))
  assert "checkpoint" in jaxpr or "remat" in jaxpr
  graphdef, state = nnx.split(plain)
  jaxpr = str(jax.make_jaxpr(lambda s: loss_fn(nnx.merge(graphdef, s)))(state))
  assert "checkpoint" not in jaxpr and "remat" not in jaxpr
