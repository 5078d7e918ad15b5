"""GRPO loss pieces against float64 NumPy references: advantages, u, ratio/clip, KL, modes."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from harnessrl_jax.errors import ConfigError
from harnessrl_jax.rl import advantages as adv_lib
from harnessrl_jax.rl import losses
from harnessrl_jax.rl.config import rl_defaults


def _np_loss_and_grad(logp, old, ref, a, u, mask, mode, eps_low, eps_high, beta, kl, max_len):
  """Float64 reference: loss value and d loss / d logp, written from the formulas."""
  logp, old, ref, a, u, mask = (np.asarray(x, np.float64) for x in (logp, old, ref, a, u, mask))
  bsz, n = logp.shape
  r = np.exp(logp - old)
  aa = a[:, None]
  unclipped = r * aa
  clipped = np.clip(r, 1 - eps_low, 1 + eps_high) * aa
  pg = -np.minimum(unclipped, clipped)
  # Gradient of -min(.): the unclipped branch is active unless the clipped one is smaller,
  # and the clipped branch is flat outside [1 - eps_low, 1 + eps_high].
  inside = (r >= 1 - eps_low) & (r <= 1 + eps_high)
  dpg = np.where((unclipped <= clipped) | inside, -aa * r, 0.0)
  d = ref - logp
  if kl == "k1":
    k, dk = -d, np.ones_like(d)
  elif kl == "k2":
    k, dk = 0.5 * d * d, -d
  else:
    k, dk = np.exp(d) - d - 1, 1 - np.exp(d)
  tok = u[:, None] * (pg + beta * k)
  dtok = u[:, None] * (dpg + beta * dk)
  if mode == "token_mean":
    w = mask / mask.sum()
  elif mode == "seq_mean_token_mean":
    w = mask / np.maximum(mask.sum(1, keepdims=True), 1) / bsz
  else:
    w = mask / (bsz * (max_len or n))
  return float((w * tok).sum()), w * dtok


def _random_inputs(seed, bsz=6, n=7):
  rng = np.random.default_rng(seed)
  old = rng.normal(-2.0, 1.0, (bsz, n))
  logp = old + rng.normal(0, 0.5, (bsz, n))  # wide enough that both clip bounds bite
  ref = old + rng.normal(0, 0.3, (bsz, n))
  a = rng.normal(0, 1, bsz)
  u = rng.uniform(0.3, 3.0, bsz)
  mask = (rng.uniform(size=(bsz, n)) < 0.7).astype(np.float64)
  mask[0] = 0.0  # an empty response
  mask[1, :] = 1.0
  return logp, old, ref, a, u, mask


@pytest.mark.parametrize("mode", sorted(losses.LOSS_AGGREGATIONS))
@pytest.mark.parametrize("kl", sorted(losses.KL_ESTIMATORS))
def test_loss_value_and_grad_match_numpy(mode, kl):
  seed = 10 * sorted(losses.LOSS_AGGREGATIONS).index(mode) + sorted(losses.KL_ESTIMATORS).index(kl)
  logp, old, ref, a, u, mask = _random_inputs(seed, bsz=8, n=12)
  cfg = losses.LossConfig(clip_eps_low=0.2, clip_eps_high=0.28, beta=0.3, kl_estimator=kl,
                          loss_aggregation=mode, max_response_len=11 if mode == "constant" else 0)
  want, want_grad = _np_loss_and_grad(logp, old, ref, a, u, mask, mode, 0.2, 0.28, 0.3, kl,
                                      cfg.max_response_len)
  f32 = lambda x: jnp.asarray(x, jnp.float32)

  def f(lp):
    return losses.grpo_loss(lp, f32(old), f32(ref), f32(a), f32(u), f32(mask), cfg)[0]

  got, got_grad = jax.value_and_grad(f)(f32(logp))
  np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-7)
  np.testing.assert_allclose(got_grad, want_grad, rtol=2e-5, atol=1e-7)
  # Both clip bounds were exercised by these inputs, so the clip branch was tested.
  _, _, low, high = losses.clipped_surrogate(f32(logp), f32(old), f32(a), 0.2, 0.28)
  assert bool(jnp.any(low)) and bool(jnp.any(high))


def test_clip_flags_and_sums_match_numpy():
  logp, old, ref, a, u, mask = _random_inputs(3)
  cfg = losses.LossConfig(kl_estimator="k3", beta=0.001)
  _, sums = losses.grpo_loss(*(jnp.asarray(x, jnp.float32) for x in (logp, old, ref, a, u, mask)),
                             cfg)
  r = np.exp(logp - old)
  low = (a[:, None] < 0) & (r < 0.8)
  high = (a[:, None] > 0) & (r > 1.28)
  assert float(sums["clipped_low"]) == (low * mask).sum()
  assert float(sums["clipped_high"]) == (high * mask).sum()
  assert float(sums["tokens"]) == mask.sum()
  np.testing.assert_allclose(sums["kl"], ((np.exp(ref - logp) - (ref - logp) - 1) * mask).sum(),
                             rtol=1e-5)


@pytest.mark.parametrize("kl", sorted(losses.KL_ESTIMATORS))
def test_kl_zero_and_ratio_one_when_policies_equal(kl):
  logp, _, _, a, u, mask = (jnp.asarray(x, jnp.float32) for x in _random_inputs(5))
  cfg = losses.LossConfig(kl_estimator=kl, beta=1.0, loss_aggregation="token_mean")
  np.testing.assert_array_equal(losses.KL_ESTIMATORS[kl](logp, logp), 0.0)
  _, ratio, low, high = losses.clipped_surrogate(logp, logp, a, 0.2, 0.28)
  np.testing.assert_array_equal(ratio, 1.0)
  assert not bool(jnp.any(low | high))
  # At pi == ref the k2 and k3 terms have zero gradient, so the gradient is the pure policy
  # term -u A / (token count) per scored token; k1 = log pi - log ref adds beta per token.
  g = jax.grad(lambda lp: losses.grpo_loss(lp, logp, logp, a, u, mask, cfg)[0])(logp)
  dkl = 1.0 if kl == "k1" else 0.0
  want = (np.asarray(u)[:, None] * (dkl - np.asarray(a)[:, None]) * np.asarray(mask)
          / float(mask.sum()))
  np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-8)


def test_kl_estimators_against_exact_kl():
  # E_pi[k1] = E_pi[k3] = KL(pi || ref) for a categorical; k3 >= 0 pointwise.
  rng = np.random.default_rng(0)
  p = rng.dirichlet(np.ones(5))
  q = rng.dirichlet(np.ones(5))
  exact = float(np.sum(p * np.log(p / q)))
  lp, lq = jnp.log(jnp.asarray(p, jnp.float32)), jnp.log(jnp.asarray(q, jnp.float32))
  for name in ("k1", "k3"):
    np.testing.assert_allclose(float(jnp.sum(jnp.asarray(p) * losses.KL_ESTIMATORS[name](lp, lq))),
                               exact, rtol=1e-5)
  assert bool(jnp.all(losses.kl_k3(lp, lq) >= 0))


def _np_group_adv(r, gid, eps, scale):
  out = np.zeros_like(r, dtype=np.float64)
  for g in np.unique(gid):
    rr = r[gid == g].astype(np.float64)
    if rr.max() == rr.min():
      continue
    out[gid == g] = (rr - rr.mean()) / ((rr.std() + eps) if scale else 1.0)
  return out


def test_group_advantages_match_numpy():
  rng = np.random.default_rng(1)
  gid = np.repeat(np.arange(5), 8)
  rng.shuffle(gid)
  r = rng.uniform(size=40).astype(np.float32)
  r[gid == 2] = 0.1  # a flat group; the float32 mean of eight 0.1 is not exactly 0.1
  for name, scale in (("grpo", True), ("mean_only", False)):
    got = adv_lib.advantage_fn(name)(jnp.asarray(r), jnp.asarray(gid), 5, 1e-6)
    np.testing.assert_allclose(got, _np_group_adv(r, gid, 1e-6, scale), rtol=1e-5, atol=1e-6)
    assert np.all(np.asarray(got)[gid == 2] == 0.0)
  frac = adv_lib.zero_signal_fraction(
      adv_lib.grpo_advantages(jnp.asarray(r), jnp.asarray(gid), 5), jnp.asarray(gid), 5)
  assert float(frac) == pytest.approx(0.2)
  with pytest.raises(ConfigError, match="config.rl.advantage"):
    adv_lib.advantage_fn("ppo")


def test_flat_groups_give_no_policy_gradient():
  rng = np.random.default_rng(2)
  gid = np.repeat(np.arange(4), 4)
  r = rng.uniform(size=16).astype(np.float32)
  r[gid == 1] = 1.0
  r[gid == 3] = 0.0
  a = adv_lib.grpo_advantages(jnp.asarray(r), jnp.asarray(gid), 4)
  logp, _, ref, _, u, mask = (jnp.asarray(x, jnp.float32) for x in _random_inputs(4, 16, 5))
  old = logp  # ratio 1: nothing clipped, so every non-flat scored token has a gradient
  for beta in (0.0, 0.1):
    cfg = losses.LossConfig(beta=beta)
    g = np.asarray(jax.grad(lambda lp: losses.grpo_loss(lp, old, ref, a, u, mask, cfg)[0])(logp))
    flat = np.isin(gid, [1, 3])
    if beta == 0:
      assert np.all(g[flat] == 0.0)
    assert np.all(np.any(g[~flat] != 0.0, axis=1) | (np.asarray(mask)[~flat].sum(1) == 0))


def test_importance_weights_unbiased_monte_carlo():
  """E_{x ~ p}[u-weighted batch gradient] equals the gradient with uniform weighting."""
  n_tasks, j, n, k, draws = 6, 4, 5, 3, 20000
  rng = np.random.default_rng(7)
  vocab = 4
  tokens = rng.integers(0, vocab, (n_tasks, j, n))
  mask = (rng.uniform(size=(n_tasks, j, n)) < 0.8).astype(np.float32)
  rewards = rng.uniform(size=(n_tasks, j)).astype(np.float32)
  a_all = np.asarray(adv_lib.grpo_advantages(
      jnp.asarray(rewards.ravel()), jnp.asarray(np.repeat(np.arange(n_tasks), j)), n_tasks))
  a_all = a_all.reshape(n_tasks, j)
  theta0 = jnp.asarray(rng.normal(size=(n_tasks, vocab)), jnp.float32)  # per-task policy
  p = np.array([0.4, 0.25, 0.15, 0.1, 0.06, 0.04])
  cfg = losses.LossConfig(beta=0.0, loss_aggregation="seq_mean_token_mean")

  def batch_loss(theta, task_idx, u):
    lp_table = jax.nn.log_softmax(theta, axis=-1)[task_idx]           # [K, V]
    tok = jnp.asarray(tokens)[task_idx]                                # [K, J, N]
    logp = jnp.take_along_axis(lp_table, tok.reshape(len(task_idx), -1), axis=-1).reshape(-1, n)
    old = jax.lax.stop_gradient(logp) - 0.05  # ratio ~1.05: inside the clip range
    a = jnp.asarray(a_all)[task_idx].reshape(-1)
    uu = jnp.repeat(u, j)
    return losses.grpo_loss(logp, old, None, a, uu, jnp.asarray(mask)[task_idx].reshape(-1, n),
                            cfg)[0]

  uniform = jax.grad(batch_loss)(theta0, jnp.arange(n_tasks), jnp.ones(n_tasks))
  idx = jax.random.categorical(jax.random.key(0), jnp.log(jnp.asarray(p)), shape=(draws, k))
  u = adv_lib.importance_weights(jnp.asarray(p, jnp.float32)[idx], n_tasks)
  grads = jax.vmap(jax.grad(batch_loss), in_axes=(None, 0, 0))(theta0, idx, u)
  mean = np.asarray(grads.mean(0))
  se = np.asarray(grads.std(0)) / np.sqrt(draws)
  assert np.all(np.abs(mean - np.asarray(uniform)) <= 4.5 * se + 1e-6)
  # Control: without the correction the estimate is visibly biased toward likely tasks.
  biased = jax.vmap(jax.grad(batch_loss), in_axes=(None, 0, 0))(theta0, idx, jnp.ones_like(u))
  z = np.abs(np.asarray(biased.mean(0)) - np.asarray(uniform)) / (
      np.asarray(biased.std(0)) / np.sqrt(draws) + 1e-12)
  assert z.max() > 10


def test_defaults_build_a_valid_loss_config():
  cfg = losses.LossConfig.from_config(rl_defaults())
  assert (cfg.beta, cfg.kl_estimator) == (0.001, "k3")
  with pytest.raises(ConfigError, match="kl_estimator"):
    losses.LossConfig(kl_estimator="k4")
  with pytest.raises(ConfigError, match="loss_aggregation"):
    losses.aggregation_weights(jnp.ones((2, 2)), "sum")
