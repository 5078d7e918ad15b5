"""Cold start: the null measurement that sets the critic's bands and the sampling ladder.

  python -m harnessrl_jax.calibrate --config=configs/tiny.py --workdir=/tmp/run [--tasks=N]

Loads the training pool (config.data), the initial policy (config.model) and the judge
(config.judge); samples config.rollout.num_samples responses per task, then as many again
as the critic's guidance re-sample draws (evolver.resample_j), and regrades the first group
once without changes (evolver/calibration.py); writes <workdir>/calibration.json, which
training reads through evolver.calibration_path. --tasks (or evolver.calibrate_tasks)
measures only the first N tasks of the pool; 0 measures all of them.
"""

from __future__ import annotations

import logging

import jax
from absl import flags
from ml_collections import config_flags

from harnessrl_jax import cli


def define_flags():
  """Flags exist only when this module runs as the program, so importing it next to
  train.py (which defines --config too) never clashes."""
  config = config_flags.DEFINE_config_file(
      "config", None, "The experiment's config file, e.g. configs/tiny.py.")
  flags.mark_flag_as_required("config")
  return (config,
          flags.DEFINE_string("workdir", None, "run directory for calibration.json",
                              required=True),
          flags.DEFINE_integer("tasks", -1, "tasks to measure (-1: evolver.calibrate_tasks, "
                               "0: the whole pool)"))


def run_calibration(config, workdir: str, tasks: int = -1, *, judge=None, resample=None):
  """The cold start; returns (Calibration, path written). judge/resample override the
  ones the config names (tests, or a driver that already holds them)."""
  # pylint: disable=g-import-not-at-top
  from flax import nnx
  from harnessrl_jax.data.splits import load_split
  from harnessrl_jax.evolver import calibration
  from harnessrl_jax.harness.state import from_tasks
  from harnessrl_jax.judges.factory import make_judge
  from harnessrl_jax.models.loading import load_model
  from harnessrl_jax.rollout import SamplingParams
  from harnessrl_jax.rollout.texts import TextSampler
  # pylint: enable=g-import-not-at-top
  ev = config.evolver
  pool = load_split(config.data.train, tuple(config.data.domains), field="train")
  n = int(ev.calibrate_tasks) if tasks < 0 else int(tasks)
  if n:
    pool = pool[:n]
  h = from_tasks(pool, config.harness)
  if resample is None:
    loaded = load_model(config.model)
    graphdef, params = nnx.split(loaded.model)
    texts = TextSampler.from_config(graphdef, loaded.prompt_builder, config.rollout)
    resample = texts.resample_fn(params, SamplingParams.from_config(config.rollout))
  if judge is None:
    judge = make_judge(config.judge)
  cal = calibration.null_measurement(
      pool, h, resample, judge, jax.random.fold_in(jax.random.key(config.seed), 1),
      int(config.rollout.num_samples), min_band=float(ev.calibrate_min_band),
      default_ladder=tuple(config.harness.ladder), resample_samples=int(ev.resample_j))
  return cal, calibration.write_calibration(cal, workdir)


def main(argv) -> None:
  """The cold start of --config into --workdir; cli.run makes a HarnessError one line."""
  del argv
  from harnessrl_jax.config import validate  # pylint: disable=g-import-not-at-top
  validate(_FLAGS[0].value)   # every field's type and value, before a model loads
  cal, path = run_calibration(_FLAGS[0].value, _FLAGS[1].value, _FLAGS[2].value)
  logging.warning("calibrate: bands %s, ladder %s (%s); wrote %s", cal.bands, cal.ladder,
                  cal.ladder_source, path)
  print(path)


if __name__ == "__main__":
  _FLAGS = define_flags()
  cli.run(main)
