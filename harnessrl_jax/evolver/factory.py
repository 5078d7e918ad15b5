"""Building the evolver a config names: roles, critic bands (cold start or defaults)."""

from __future__ import annotations

from harnessrl_jax.evolver.attributor import make_attributor
from harnessrl_jax.evolver.calibration import Calibration, read_calibration
from harnessrl_jax.evolver.critic import Critic
from harnessrl_jax.evolver.evolve import Evolver
from harnessrl_jax.evolver.measure import resolve
from harnessrl_jax.evolver.proposer import make_proposer


def calibration_of(evolver_cfg) -> Calibration | None:
  """The cold start result `evolver.calibration_path` names, or None when it is empty."""
  path = str(evolver_cfg.calibration_path)
  return read_calibration(resolve(path)) if path else None


def build_evolver(config, *, judge, resample, client=None, history_log=None,
                  candidate_log: str | None = None) -> Evolver:
  """The Evolver of `config` (the whole tree: evolver, judge, rollout, harness sections).

  Args:
    judge: the step's judge (its cache makes the critic's regrades of unchanged cells free).
    resample: the frozen policy as `resample(prompts, key, J)` (e.g. measure.PolicySampler).
    client: the TextClient of "llm" roles; built from config.judge (backend
      evolver.llm_backend, default the judge's) when an LLM role needs one and none is given.
  """
  ev = config.evolver
  if client is None and "llm" in (ev.attributor, ev.proposer):
    from harnessrl_jax.judges.factory import make_client  # pylint: disable=g-import-not-at-top
    client = make_client(config.judge, ev.llm_backend or None)
  cal = calibration_of(ev)
  lam = float(config.harness.total_weight)
  critic = Critic(judge, resample, ev, num_samples=int(config.rollout.num_samples),
                  bands=None if cal is None else cal.bands)
  return Evolver(ev, attributor=make_attributor(ev, client=client, total_weight=lam),
                 proposer=make_proposer(ev, client=client), critic=critic,
                 history_log=history_log, candidate_log=candidate_log)
