"""evolver/replay.py's pure parts (the command end to end: tests/run/test_experiment.py)."""

import types

import numpy as np

from harnessrl_jax.evolver.replay import Instance, measured_draw, missed_as, unplanted_spurious


def test_a_task_drawn_twice_in_a_step_is_matched_by_the_logged_mean():
  """The candidate log names (step, task), not the draw: with two draws of the task in one
  step, the one whose mean reward before the change equals the logged r_old is the one the
  critic measured (power16 seeds 8 and 10 hold such steps; pairing with the first draw gave
  Deltas of 15.2 for a logged 24.1)."""
  draws = ["first", "second"]
  rewards = {"first": np.array([0.6, 0.1, 0.1, 0.5]), "second": np.array([0.0, 0.6, np.nan, 0.1])}
  assert measured_draw(draws, 0.2333, rewards.get)[0] == "second"
  assert measured_draw(draws, 0.325, rewards.get)[0] == "first"
  assert measured_draw(draws, None, rewards.get)[0] == "first"
  g, r = measured_draw(["only"], 0.9, lambda d: np.array([0.1]))
  assert g == "only" and r.tolist() == [0.1]


def test_unplanted_spurious_counts_only_criteria_without_truth():
  truth = types.SimpleNamespace(planted=[types.SimpleNamespace(task_id="t1", criterion_id="p1")])
  rep = types.SimpleNamespace(labels={(0, "t1", "p1"): ("spurious", "agree"),
                                      (0, "t1", "c1"): ("spurious", "spurious"),
                                      (1, "t1", "c1"): ("agree", "spurious"),
                                      (1, "t2", "c2"): ("spurious", "agree")})
  assert unplanted_spurious([rep], truth) == 2


def test_missed_as_names_the_labels_the_misses_got():
  def inst(surface, actual, used, corr):
    return Instance(0, (0, "t1"), "spurious", surface, actual, used, corr)
  xs = [inst("padding", "spurious", "agree", "blind"),
        inst("padding", "spurious", "saturated", "saturated"),
        inst("padding", "spurious", "agree", "agree"),
        inst("padding", "spurious", "spurious", "agree"),      # found: no miss
        inst("padding", "agree", "agree", "agree"),            # not spurious: no miss
        inst("repetition", "spurious", "blind", "blind")]
  assert missed_as(xs, "used", "padding") == "; missed as agree 2, saturated 1"
  assert missed_as(xs, "correlational", "padding") == \
      "; missed as agree 2, blind 1, saturated 1"
  assert missed_as(xs, "used", "stock_phrase") == ""
