"""The critic's accept decision as a test with a stated false-accept rate (issue 46; beyond
the paper, whose bands are empirical).

H0: the candidate changes nothing the rubric rewards (Delta's expectation is 0). The test
is one-sided at level `alpha` (evolver.accept_alpha): it accepts only where a Delta at least
this large would arise under H0 with probability at most alpha. It replaces the lower bound
of the route's band (condition (ii)); the upper bound, the sign (i), structure (iii) and
reversal (iv) stay as they are.

  guidance  a two-sample t test: the recorded group's J rewards against the J' re-sampled
            ones (pooled variance, J + J' - 2 degrees of freedom). Under H0 both groups
            come from the same policy and prompt distribution, so their difference has
            variance s^2 (1/J + 1/J').
  rubric    a paired t test over the recorded group's J responses: d_j = reward_j under
            the old rubric minus under the new (J - 1 degrees of freedom). A shift that
            every response gets alike (sd 0) is exact: accepted when positive.

With the CPU default's groups (J = 4, J' = 2) the t quantile is large (alpha 0.05: 2.13
at 4 degrees of freedom, 2.35 at 3): the test asks for much more than the paper's band
where the group's rewards spread. That is the point of stating an error rate: at this
size a noisy measurement cannot pass it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from harnessrl_jax.eval.power import t_quantile

TESTS = ("band", "ttest")


@dataclasses.dataclass(frozen=True)
class TestResult:
  """One test of one candidate: its statistic's threshold in points and the verdict."""

  delta: float        # points
  threshold: float    # the smallest Delta (points) the test accepts (inf: none)
  df: int
  accepted: bool

  def reason(self, alpha: float) -> str:
    return (f"(ii) test: Delta={self.delta:.4g} points is not above {self.threshold:.4g}, "
            f"the one-sided t test's bound at alpha={alpha:g} ({self.df} df)")


def _finite(x: Sequence[float]) -> np.ndarray:
  a = np.asarray(x, np.float64)
  return a[np.isfinite(a)]


def two_sample(old: Sequence[float], new: Sequence[float], alpha: float,
               scale: float = 100.0) -> TestResult:
  """Guidance: does mean(new) exceed mean(old) (rewards 0-1, `scale` to points)?"""
  a, b = _finite(old), _finite(new)
  delta = (b.mean() - a.mean()) * scale if len(a) and len(b) else float("nan")
  df = len(a) + len(b) - 2
  if df < 1 or not math.isfinite(delta):
    return TestResult(delta, math.inf, max(df, 0), False)
  ss = ((a - a.mean()) ** 2).sum() + ((b - b.mean()) ** 2).sum()
  se = math.sqrt(ss / df * (1 / len(a) + 1 / len(b))) * scale
  threshold = t_quantile(1 - alpha, df) * se
  return TestResult(delta, threshold, df, delta > threshold and delta > 0)


def paired(old: Sequence[float], new: Sequence[float], alpha: float,
           scale: float = 100.0) -> TestResult:
  """Rubric: does the old reward exceed the new one, response by response?"""
  o, n = np.asarray(old, np.float64), np.asarray(new, np.float64)
  d = (o - n)[np.isfinite(o) & np.isfinite(n)] * scale
  if not len(d):
    return TestResult(float("nan"), math.inf, 0, False)
  delta, df = float(d.mean()), len(d) - 1
  sd = float(d.std(ddof=1)) if len(d) > 1 else math.nan
  if sd == 0 or (len(d) > 1 and sd < 1e-9):
    return TestResult(delta, 0.0, df, delta > 0)   # every response shifted alike: exact
  if df < 1:
    return TestResult(delta, math.inf, df, False)
  threshold = t_quantile(1 - alpha, df) * sd / math.sqrt(len(d))
  return TestResult(delta, threshold, df, delta > threshold)
