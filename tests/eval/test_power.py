"""eval/power.py: the t quantile, the seed count, the variance split, and the command."""

import math
import subprocess
import sys

import pytest

from harnessrl_jax.eval import power

# Student's t quantiles (standard tables, 4 decimals)
T_TABLE = {(0.975, 3): 3.1824, (0.975, 5): 2.5706, (0.975, 10): 2.2281, (0.975, 30): 2.0423,
           (0.8, 3): 0.9785, (0.8, 5): 0.9195, (0.8, 14): 0.8681}


@pytest.mark.parametrize("key", sorted(T_TABLE))
def test_t_quantile_matches_the_table(key):
  p, df = key
  assert power.t_quantile(p, df) == pytest.approx(T_TABLE[key], abs=0.01)


def test_seeds_needed_is_the_least_n_that_meets_the_condition():
  n = power.seeds_needed(6.3, 5.0)
  ok = lambda k: (power.t_quantile(0.975, k - 1) + power.t_quantile(0.8, k - 1)) * 6.3 \
      / math.sqrt(k) <= 5.0  # noqa: E731
  assert ok(n) and not ok(n - 1)
  # the normal approximation ((1.96 + 0.84) * sd / delta)^2 is a lower bound
  assert n >= math.ceil(((1.96 + 0.8416) * 6.3 / 5.0) ** 2)
  assert power.seeds_needed(3.0, 5.0) < n < power.seeds_needed(9.0, 5.0)


def test_variance_split_and_task_counts():
  v = power.variance([8.7, 4.5, 6.7, 0.7, 1.3, -9.1], task_se=4.5, m=20)
  assert v.sd == pytest.approx(6.30, abs=0.01)
  assert v.tau ** 2 + 4.5 ** 2 == pytest.approx(v.sd ** 2)
  assert v.sd_at(20) == pytest.approx(v.sd)
  rows = power.table(v, delta=5, alpha=0.05, power=0.8, task_counts=(20, 80, None))
  assert [r["seeds"] for r in rows] == sorted([r["seeds"] for r in rows], reverse=True)
  assert rows[-1]["sd"] == pytest.approx(v.tau)
  # a task part larger than the observed spread leaves no trajectory part
  assert power.variance([1.0, 2.0], task_se=5.0, m=20).tau == 0.0


def test_task_se_of_is_the_rms_standard_error():
  assert power.task_se_of([[0.0, 2.0], [0.0, 2.0]]) == pytest.approx(1.0)


def test_command_prints_the_table():
  out = subprocess.run([sys.executable, "-m", "harnessrl_jax.eval.power",
                        "--diffs=8.7,4.5,6.7,0.7,1.3,-9.1", "--task_se=4.5"],
                       capture_output=True, text=True, check=True).stdout
  assert "6 seeds: mean paired difference +2.13" in out
  assert "| 20 | 6.30 |" in out
  bad = subprocess.run([sys.executable, "-m", "harnessrl_jax.eval.power"],
                       capture_output=True, text=True, check=False)
  assert bad.returncode == 2 and "error:" in bad.stderr
