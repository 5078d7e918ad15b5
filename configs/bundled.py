"""The CPU default's arms on the bundled data, several seeds: does the full method beat
static GRPO on the seed-rubric held-out score, and does the default learn across seeds?
(`python -m harnessrl_jax.experiment --config=configs/bundled.py --workdir=DIR`)

  --config=configs/bundled.py:ARM   one arm's training config: configs/default.py with the
                                    arm's fields (configs/testbed.py ARMS)
  --config=configs/bundled.py       the full method plus the `experiment` section

No truth file: the bundled data plants nothing, so the report has the seed-rubric scores,
their paired differences and the costs, and no oracle, hack rate or attributor grades.
Each run is the default's 24 steps (9-13 min on a 2-core AMD EPYC, load 2-5): the 2 x 3
grid takes about 1-1.5 hours there (docs/testbed.md has its result).
"""

import ml_collections

from configs import default, testbed


def training_config(arm):
  c = default.get_config()
  c.update_from_flattened_dict(testbed.ARMS[arm])
  return c


def get_config(arg=""):
  if arg:
    if arg not in testbed.ARMS:
      raise ValueError(f"unknown arm {arg!r}; the arms are {', '.join(testbed.ARMS)}")
    return training_config(arg)
  c = training_config("harnessrl")
  e = ml_collections.ConfigDict()
  e.arms = ("harnessrl", "grpo_static")
  e.seeds = (0, 1, 2)
  e.reference = "grpo_static"
  e.truth = ""
  e.overrides = ()
  e.run_config = "configs/bundled.py"
  with c.unlocked():
    c.experiment = e
  return c
