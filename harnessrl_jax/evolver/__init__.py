"""The harness evolver E: attributor, proposer and just-in-time critic (separate roles),
the evolver step with its accounting, its typed config, and the cold-start calibration.
See docs/evolver.md."""

from harnessrl_jax.evolver.attributor import LLMAttributor, RuleAttributor, make_attributor
from harnessrl_jax.evolver.calibration import Calibration, read_calibration
from harnessrl_jax.evolver.config import AblationConfig, EvolverConfig, evolver_defaults
from harnessrl_jax.evolver.critic import Critic
from harnessrl_jax.evolver.evolve import CandidateRecord, Evolver, StepResult
from harnessrl_jax.evolver.factory import build_evolver, calibration_of
from harnessrl_jax.evolver.proposer import LLMProposer, RuleProposer, make_proposer
from harnessrl_jax.evolver.types import (ALL_ROUTES, LABELS, ROUTES, Candidate, Cost,
                                         CriterionLabel, Group, Measurement, TaskAttribution)
