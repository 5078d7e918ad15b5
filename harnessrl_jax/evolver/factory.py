"""Building the evolver a config names: its typed config, the roles shaped by the
ablations, the critic's bands (cold start or defaults)."""

from __future__ import annotations

from harnessrl_jax.data.splits import resolve
from harnessrl_jax.errors import ConfigError
from harnessrl_jax.evolver.attributor import make_attributor
from harnessrl_jax.evolver.calibration import Calibration, read_calibration
from harnessrl_jax.evolver.config import AblationConfig, EvolverConfig
from harnessrl_jax.evolver.critic import Critic
from harnessrl_jax.evolver.evolve import Evolver
from harnessrl_jax.evolver.proposer import make_proposer


def calibration_of(evolver: EvolverConfig) -> Calibration | None:
  """The cold start result `evolver.calibration_path` names, or None when it is empty."""
  path = str(evolver.calibration_path)
  return read_calibration(resolve(path)) if path else None


def check_resample_size(cal: Calibration, critic_j: int, path: str) -> None:
  """A guidance band is the null spread of a J-answer re-sample mean, which narrows as J
  grows: bands measured at one J judge another J's Delta too leniently or too strictly."""
  measured = cal.stats.get("group_b_samples")
  if measured is not None and int(measured) != int(critic_j):
    raise ConfigError(
        f"evolver.calibration_path: {path} measured the guidance band with re-samples of "
        f"{int(measured)} answers, but this run's critic re-samples {int(critic_j)} "
        "(evolver.resample_j, or rollout.num_samples when it is 0): rerun "
        "`python -m harnessrl_jax.calibrate` with this config")


def build_evolver(config, *, judge, client=None, history_log=None,
                  candidate_log: str | None = None,
                  attribution_log: str | None = None, tasks=(),
                  prompt_tokens=None) -> Evolver:
  """The Evolver of `config` (the whole tree: evolver, ablation, judge, rollout, harness
  sections), its roles built once and already shaped by `config.ablation`.

  Args:
    judge: the step's judge (its cache makes the critic's regrades of unchanged cells free;
      the attributor's intervention, when on, regrades edited responses with it).
    client: the TextClient of "llm" roles; when an LLM role needs one and none is given,
      the judge's own client if the roles use the judge's remote backend (one set of
      connections, and one pool's in-flight bounds and breakers, per server), else one built
      from config.judge (backend evolver.llm_backend, default the judge's).
    history_log / candidate_log / attribution_log: where accepted ops / every candidate
      record / every criterion's label are appended.
    tasks: the training pool (needed when evolver.transfer_tasks > 0: the tasks an
      accepted rubric repair is offered to).
    prompt_tokens: chat -> its length in the policy's tokens; the critic then refuses a
      candidate whose task's training prompt would not fit the largest of
      config.rollout.prompt_buckets (Critic).

  The frozen policy the critic re-samples with is not built here: pass it to each
  `Evolver.step(..., resample=...)`.
  """
  ev = EvolverConfig.from_config(config.evolver)
  ablation = AblationConfig.from_config(config.ablation)
  if client is None and "llm" in (ev.attributor, ev.proposer):
    client = _llm_client(config.judge, ev.llm_backend, judge)
  cal = calibration_of(ev)
  critic = Critic(judge, ev, num_samples=int(config.rollout.num_samples),
                  bands=None if cal is None else cal.bands, measure_effect=ablation.critic,
                  prompt_tokens=prompt_tokens,
                  max_prompt_tokens=max(int(b) for b in config.rollout.prompt_buckets))
  if cal is not None:
    check_resample_size(cal, critic.j, str(ev.calibration_path))
  attributor = make_attributor(ev, client=client, judge=judge,
                               total_weight=float(config.harness.total_weight))
  proposer = make_proposer(ev, client=client, routes=ablation.routes)
  return Evolver(ev, attributor=attributor, proposer=proposer, critic=critic,
                 history_log=history_log, candidate_log=candidate_log,
                 attribution_log=attribution_log, tasks=tasks)


def _llm_client(judge_section, llm_backend: str, judge):
  """The "llm" roles' TextClient: the judge's when both use the same remote backend (remote
  clients are thread-safe; a local backend's client is built anew, as before), else a new
  one for evolver.llm_backend (default: the judge's)."""
  # pylint: disable=g-import-not-at-top
  from harnessrl_jax.judges.config import REMOTE_BACKENDS, JudgeConfig
  from harnessrl_jax.judges.factory import make_client
  # pylint: enable=g-import-not-at-top
  judge_backend = JudgeConfig.from_config(judge_section, check=False).text_backend
  if (judge is not None and judge.client is not None and judge_backend in REMOTE_BACKENDS
      and llm_backend in ("", judge_backend)):
    return judge.client
  return make_client(judge_section, llm_backend or None)
