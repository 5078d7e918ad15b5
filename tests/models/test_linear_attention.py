"""Gated DeltaNet (models/linear_attention.py): the chunked and recurrent rules against each
other and a float64 NumPy reference, and the layer against transformers' `Qwen3_5GatedDeltaNet`
(fp32, same weights): outputs with and without left padding, prefill + decode with the state
(also against HF's cache), and input/parameter gradients against torch autograd.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from flax import nnx

from harnessrl_jax.models import linear_attention as la

try:
  import transformers
  from transformers.cache_utils import DynamicCache
  from transformers.models.qwen3_5 import modeling_qwen3_5
except ImportError:  # an older transformers: only the HF comparisons are skipped
  modeling_qwen3_5 = None
needs_hf = pytest.mark.skipif(modeling_qwen3_5 is None,
                              reason="this transformers has no qwen3_5 (Qwen3_5GatedDeltaNet)")

TOL = 1e-4     # against torch
EXACT = 1e-5   # two float32 evaluations of the same math
# Hv = 2 Hk (grouped heads) and dk != dv, so a transposed head or state axis cannot pass.
DIMS = dict(hidden_size=32, linear_num_key_heads=2, linear_num_value_heads=4,
            linear_key_head_dim=8, linear_value_head_dim=6, linear_conv_kernel_dim=4,
            rms_norm_eps=1e-6)
CHUNK = 4      # several chunks at the test lengths (HF's layer uses 64: one chunk)


# ---- the rule ---------------------------------------------------------------------------------

def _rule_inputs(seed, b, t, h, dk, dv, with_state):
  """Inputs as the layer makes them: unit-norm k, q scaled by dk^-1/2, g <= 0, beta in (0,1)."""
  rng = np.random.default_rng(seed)
  unit = lambda a: a / np.linalg.norm(a, axis=-1, keepdims=True)
  q = unit(rng.standard_normal((b, t, h, dk))) / np.sqrt(dk)
  k = unit(rng.standard_normal((b, t, h, dk)))
  v = rng.standard_normal((b, t, h, dv))
  g = -rng.uniform(0.0, 1.5, (b, t, h))
  beta = rng.uniform(0.0, 1.0, (b, t, h))
  s0 = rng.standard_normal((b, h, dk, dv)) if with_state else None
  return q, k, v, g, beta, s0


def _reference(q, k, v, g, beta, s0):
  """float64, one token and head at a time: S = exp(g)(I - beta k k^T) S + beta k v^T, o = S^T q."""
  b, t, h, dk = k.shape
  s = np.zeros((b, h, dk, v.shape[-1])) if s0 is None else s0.astype(np.float64).copy()
  out = np.zeros(v.shape)
  for bi in range(b):
    for hi in range(h):
      for ti in range(t):
        kk, bt = k[bi, ti, hi], beta[bi, ti, hi]
        s[bi, hi] = (np.exp(g[bi, ti, hi]) * (np.eye(dk) - bt * np.outer(kk, kk)) @ s[bi, hi]
                     + bt * np.outer(kk, v[bi, ti, hi]))
        out[bi, ti, hi] = s[bi, hi].T @ q[bi, ti, hi]
  return out, s


def _chunked(*args, chunk_size, initial_state):
  return jax.jit(la.chunked_gated_delta_rule, static_argnames="chunk_size")(
      *args, chunk_size=chunk_size, initial_state=initial_state)


def _as32(arrays):
  return [None if a is None else jnp.asarray(a, jnp.float32) for a in arrays]


@pytest.mark.parametrize("with_state", [False, True])
@pytest.mark.parametrize("t", [1, 4, 7, 13])
def test_chunked_matches_recurrent(t, with_state):
  q, k, v, g, beta, s0 = _as32(_rule_inputs(t, 2, t, 3, 5, 4, with_state))
  out_r, s_r = jax.jit(la.recurrent_gated_delta_rule)(q, k, v, g, beta, initial_state=s0)
  out_c, s_c = _chunked(q, k, v, g, beta, chunk_size=CHUNK, initial_state=s0)
  assert out_c.shape == out_r.shape == (2, t, 3, 4) and s_c.shape == s_r.shape == (2, 3, 5, 4)
  assert out_c.dtype == s_c.dtype == jnp.float32
  np.testing.assert_allclose(out_c, out_r, atol=EXACT, rtol=0)
  np.testing.assert_allclose(s_c, s_r, atol=EXACT, rtol=0)


@pytest.mark.parametrize("chunk_size", [3, 16])   # 16 > T: one padded chunk
@pytest.mark.parametrize("with_state", [False, True])
def test_rules_match_float64_reference(chunk_size, with_state):
  inputs = _rule_inputs(7, 2, 10, 2, 4, 3, with_state)
  want_out, want_state = _reference(*inputs)
  q, k, v, g, beta, s0 = _as32(inputs)
  for out, state in (la.recurrent_gated_delta_rule(q, k, v, g, beta, initial_state=s0),
                     _chunked(q, k, v, g, beta, chunk_size=chunk_size, initial_state=s0)):
    np.testing.assert_allclose(out, want_out, atol=EXACT, rtol=0)
    np.testing.assert_allclose(state, want_state, atol=EXACT, rtol=0)


def test_conv_history_continues_the_sequence():
  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.standard_normal((2, 9, 5)), jnp.float32)
  kernel = jnp.asarray(rng.standard_normal((4, 5)), jnp.float32)
  zeros = jnp.zeros((2, 3, 5), jnp.float32)
  whole, history = la.causal_depthwise_conv(x, kernel, zeros, jax.nn.silu)
  xp = np.pad(np.asarray(x), [(0, 0), (3, 0), (0, 0)])
  plain = sum(xp[:, j:j + 9] * np.asarray(kernel)[j] for j in range(4))
  np.testing.assert_allclose(whole, jax.nn.silu(plain), atol=1e-6)
  np.testing.assert_array_equal(history, x[:, -3:])
  head, hist = la.causal_depthwise_conv(x[:, :2], kernel, zeros, jax.nn.silu)
  np.testing.assert_array_equal(hist[:, :1], 0)   # fewer inputs than K-1: zeros stay in front
  rest, _ = la.causal_depthwise_conv(x[:, 2:], kernel, hist, jax.nn.silu)
  np.testing.assert_allclose(jnp.concatenate([head, rest], 1), whole, atol=1e-6)


# ---- the layer against transformers -----------------------------------------------------------

def _hf_layer(seed=0):
  config = transformers.Qwen3_5TextConfig(
      num_hidden_layers=1, layer_types=["linear_attention"], vocab_size=16, intermediate_size=16,
      num_attention_heads=2, num_key_value_heads=1, head_dim=8, hidden_act="silu", **DIMS)
  layer = modeling_qwen3_5.Qwen3_5GatedDeltaNet(config, layer_idx=0).eval()
  gen = torch.Generator().manual_seed(seed)
  with torch.no_grad():
    for name, p in layer.named_parameters():
      noise = torch.randn(p.shape, generator=gen)
      if name == "A_log":        # A in (0.05, 1): per-token decays exp(g) from ~0.3 to ~1
        p.copy_(torch.log(0.05 + 0.95 * torch.rand(p.shape, generator=gen)))
      elif name == "dt_bias" or name == "conv1d.weight":
        p.copy_(0.5 * noise)
      elif name == "norm.weight":
        p.copy_(1.0 + 0.3 * noise)
      else:                      # O(1) activations: the tolerances then mean something
        p.copy_(noise / np.sqrt(p.shape[-1]))
  return config, layer


def _ours_from_hf(hf_layer) -> la.GatedDeltaNet:
  ours = la.GatedDeltaNet(la.GatedDeltaNetConfig(**DIMS), chunk_size=CHUNK, rngs=nnx.Rngs(0))
  sd = {k: v.detach().numpy() for k, v in hf_layer.state_dict().items()}
  # HF key -> our parameter: Linear weights transposed to [in, out], conv [C,1,K] -> [K,C].
  targets = {"in_proj_qkv.weight": (ours.in_proj_qkv.kernel, np.transpose),
             "in_proj_z.weight": (ours.in_proj_z.kernel, np.transpose),
             "in_proj_b.weight": (ours.in_proj_b.kernel, np.transpose),
             "in_proj_a.weight": (ours.in_proj_a.kernel, np.transpose),
             "out_proj.weight": (ours.out_proj.kernel, np.transpose),
             "conv1d.weight": (ours.conv1d.kernel, lambda w: w[:, 0, :].T),
             "dt_bias": (ours.dt_bias, np.asarray),
             "A_log": (ours.A_log, np.asarray),
             "norm.weight": (ours.norm.weight, np.asarray)}
  assert sorted(sd) == sorted(targets)
  for key, (variable, transform) in targets.items():
    value = transform(sd[key])
    assert value.shape == variable[...].shape, key
    variable[...] = jnp.asarray(value)
  return ours


@nnx.jit
def _forward(layer, x, mask, state):
  return layer(x, mask, state)


def _inputs(b=2, t=11, seed=1):
  return np.random.default_rng(seed).standard_normal((b, t, DIMS["hidden_size"])).astype(np.float32)


def _left_padded_mask(b, t, pad):
  mask = np.ones((b, t), bool)
  mask[1, :pad] = False
  return mask


@needs_hf
@pytest.mark.parametrize("padded", [False, True])
def test_layer_matches_transformers(padded):
  _, hf = _hf_layer()
  ours = _ours_from_hf(hf)
  x = _inputs()
  mask = _left_padded_mask(2, 11, 4) if padded else None
  with torch.no_grad():
    want = hf(torch.from_numpy(x),
              attention_mask=None if mask is None else torch.from_numpy(mask.astype(np.int64)))
  want = want.numpy()
  assert np.abs(want).mean() > 0.1          # O(1) outputs
  got, _ = _forward(ours, jnp.asarray(x), None if mask is None else jnp.asarray(mask), None)
  np.testing.assert_allclose(got, want, atol=TOL, rtol=0)
  if padded:
    # Left padding is exact: the real tokens get the unpadded row's outputs; padding gives 0.
    alone, _ = _forward(ours, jnp.asarray(x[1:, 4:]), None, None)
    np.testing.assert_allclose(got[1:, 4:], alone, atol=EXACT, rtol=0)
    np.testing.assert_allclose(got[1, :4], 0, atol=EXACT)


@needs_hf
def test_prefill_then_decode_matches_one_prefill():
  _, hf = _hf_layer()
  ours = _ours_from_hf(hf)
  x, mask = jnp.asarray(_inputs(t=12)), jnp.asarray(_left_padded_mask(2, 12, 3))
  full, full_state = _forward(ours, x, mask, None)
  outs = []
  y, state = _forward(ours, x[:, :5], mask[:, :5], None)               # prefill
  outs.append(y)
  y, state = _forward(ours, x[:, 5:9], mask[:, 5:9], state)            # chunked continuation
  outs.append(y)
  shapes = jax.tree.map(jnp.shape, state)
  for i in range(9, 12):                                               # decode steps
    y, state = _forward(ours, x[:, i:i + 1], mask[:, i:i + 1], state)
    assert jax.tree.map(jnp.shape, state) == shapes                    # constant-size state
    outs.append(y)
  np.testing.assert_allclose(jnp.concatenate(outs, axis=1), full, atol=EXACT, rtol=0)
  np.testing.assert_allclose(state.recurrent, full_state.recurrent, atol=EXACT, rtol=0)
  np.testing.assert_allclose(state.conv, full_state.conv, atol=EXACT, rtol=0)


@needs_hf
def test_state_and_decode_match_transformers_cache():
  config, hf = _hf_layer()
  ours = _ours_from_hf(hf)
  x = _inputs(t=10)
  cache = DynamicCache(config=config)
  with torch.no_grad():
    want = [hf(torch.from_numpy(x[:, :7]), cache=cache).numpy()]
    hf_conv = cache.layers[0].conv_states[0].numpy().copy()            # [B, C, K]
    hf_recurrent = cache.layers[0].recurrent_states[0].numpy().copy()  # [B, Hv, dk, dv]
    want += [hf(torch.from_numpy(x[:, i:i + 1]), cache=cache).numpy() for i in range(7, 10)]
  y, state = _forward(ours, jnp.asarray(x[:, :7]), None, None)
  np.testing.assert_allclose(state.recurrent, hf_recurrent, atol=TOL, rtol=0)
  np.testing.assert_allclose(state.conv, np.transpose(hf_conv[:, :, 1:], (0, 2, 1)),
                             atol=TOL, rtol=0)
  got = [y]
  for i in range(7, 10):
    y, state = _forward(ours, jnp.asarray(x[:, i:i + 1]), None, state)
    got.append(y)
  np.testing.assert_allclose(np.concatenate(got, 1), np.concatenate(want, 1), atol=TOL, rtol=0)


@needs_hf
def test_gradients_match_torch_autograd():
  _, hf = _hf_layer()
  ours = _ours_from_hf(hf)
  x = _inputs()
  weights = np.random.default_rng(2).standard_normal(x.shape).astype(np.float32)
  xt = torch.from_numpy(x).requires_grad_(True)
  (hf(xt) * torch.from_numpy(weights)).sum().backward()

  def loss(layer, x):
    return jnp.sum(layer(x)[0] * weights)

  param_grads, x_grad = nnx.jit(nnx.grad(loss, argnums=(0, 1)))(ours, jnp.asarray(x))
  assert all(bool(jnp.all(jnp.isfinite(g))) for g in jax.tree.leaves(param_grads))
  assert np.abs(xt.grad.numpy()).mean() > 0.1
  np.testing.assert_allclose(x_grad, xt.grad.numpy(), atol=TOL, rtol=0)
  torch_grads = dict(hf.named_parameters())
  for ours_grad, key in ((param_grads["A_log"], "A_log"), (param_grads["dt_bias"], "dt_bias"),
                         (param_grads["conv1d"]["kernel"], "conv1d.weight"),
                         (param_grads["in_proj_a"]["kernel"], "in_proj_a.weight")):
    want = torch_grads[key].grad.numpy()
    want = want[:, 0, :].T if key == "conv1d.weight" else want.T if want.ndim == 2 else want
    np.testing.assert_allclose(ours_grad[...], want, atol=TOL, rtol=1e-4, err_msg=key)
