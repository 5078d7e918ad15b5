"""evolver/acceptance.py: the accept decision as a t test with a stated false-accept rate,
and the critic's use of it (evolver.accept_test)."""

import math

import numpy as np
import pytest

from harnessrl_jax.evolver import acceptance


def test_two_sample_accepts_a_clear_rise_and_rejects_noise():
  assert acceptance.two_sample([0.2, 0.3, 0.25, 0.2], [0.8, 0.85], 0.05).accepted
  r = acceptance.two_sample([0.1, 0.9, 0.2, 0.8], [0.9, 0.7], 0.05)
  assert r.delta > 0 and not r.accepted and r.threshold > r.delta
  assert "alpha=0.05" in r.reason(0.05)
  # nan rewards (not valid) are left out; too few left: never accepted
  assert not acceptance.two_sample([0.5, np.nan], [np.nan], 0.05).accepted


def test_paired_exact_shift_and_noisy_shift():
  exact = acceptance.paired([0.6, 0.6, 0.5, 0.4], [0.5, 0.5, 0.4, 0.3], 0.05)
  assert exact.accepted and exact.threshold == 0.0 and exact.delta == pytest.approx(10.0)
  mixed = acceptance.paired([0.6, 0.2, 0.5, 0.4], [0.1, 0.3, 0.5, 0.4], 0.05)
  assert not mixed.accepted
  assert not acceptance.paired([0.4, 0.4], [0.5, 0.5], 0.05).accepted   # a rise: wrong sign


@pytest.mark.parametrize("alpha", [0.05, 0.2])
def test_the_false_accept_rate_under_h0_is_about_alpha(alpha):
  """Rewards of a candidate that changes nothing (both groups from one normal): the share
  accepted is alpha within sampling error (6000 trials, J = 4 and J' = 2 as on CPU)."""
  rng = np.random.default_rng(0)
  n = 6000
  hits = sum(acceptance.two_sample(rng.normal(0.5, 0.1, 4), rng.normal(0.5, 0.1, 2),
                                   alpha).accepted for _ in range(n))
  se = math.sqrt(alpha * (1 - alpha) / n)
  assert abs(hits / n - alpha) < 4 * se + 0.005
  hits = sum(acceptance.paired(rng.normal(0.5, 0.1, 4), rng.normal(0.5, 0.1, 4),
                               alpha).accepted for _ in range(n))
  assert abs(hits / n - alpha) < 4 * se + 0.005


def test_the_critic_uses_the_test_only_when_asked():
  from harnessrl_jax.evolver import Critic  # noqa: PLC0415
  from harnessrl_jax.errors import HarnessError  # noqa: PLC0415
  from tests.evolver import test_evolver_fixtures as fx  # noqa: PLC0415
  assert Critic(fx.judge(), fx.settings()).test == "band"
  c = Critic(fx.judge(), fx.settings(accept_test="ttest", accept_alpha=0.1))
  assert (c.test, c.alpha) == ("ttest", 0.1)
  with pytest.raises(HarnessError, match="accept_test"):
    Critic(fx.judge(), fx.settings(accept_test="sprt"))
  with pytest.raises(HarnessError, match="accept_alpha"):
    Critic(fx.judge(), fx.settings(accept_test="ttest", accept_alpha=1.5))
