"""The learning-rate schedule: the first update counts (no step at learning rate 0), the
warm-up reaches the peak on its last update, and the decay after it is the usual one."""

import numpy as np
import pytest

from harnessrl_jax.config import base_config
from harnessrl_jax.rl.train_state import lr_schedule


def rl(**fields):
  c = base_config().rl
  for k, v in fields.items():
    c[k] = v
  return c


@pytest.mark.parametrize("warmup", [1, 2, 5])
def test_warmup_starts_above_zero_and_reaches_the_peak(warmup):
  s = lr_schedule(rl(learning_rate=1e-3, warmup_steps=warmup, lr_schedule="constant"))
  got = [float(s(i)) for i in range(warmup + 3)]
  want = [1e-3 * min(1.0, (i + 1) / warmup) for i in range(warmup + 3)]
  np.testing.assert_allclose(got, want, rtol=1e-6)
  assert got[0] > 0


def test_no_warmup_is_constant():
  s = lr_schedule(rl(learning_rate=3e-4, warmup_steps=0, lr_schedule="constant"))
  np.testing.assert_allclose([float(s(i)) for i in (0, 1, 100)], [3e-4] * 3, rtol=1e-6)


def test_cosine_decays_from_the_peak_after_the_warmup():
  s = lr_schedule(rl(learning_rate=1e-3, warmup_steps=4, lr_schedule="cosine",
                     total_steps=20))
  assert float(s(0)) == pytest.approx(2.5e-4)
  assert float(s(3)) == pytest.approx(1e-3)
  assert float(s(4)) == pytest.approx(1e-3)
  mid = 4 + 8   # halfway through the 16 decay steps
  assert float(s(mid)) == pytest.approx(0.5e-3, rel=1e-5)
  assert float(s(20)) == pytest.approx(0.0, abs=1e-9)
  assert all(float(s(i)) > float(s(i + 1)) for i in range(4, 19))
