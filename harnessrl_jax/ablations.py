"""The paper's ablations as wrappers around the evolver's roles (config.ablation).

  routes  `RouteFilter` lets the proposer propose only on the kept routes; a dropped
          route's labelled criteria end in a noop (guidance-only, rubric-only, ...).
  critic  `UncheckedCritic` accepts every candidate whose ops apply and keep the harness
          invariants, without measuring it on the policy ("no critic").
  memory  the driver passes no memory to the evolver ("no critic and no memory").
"""

from __future__ import annotations

from collections.abc import Iterable

from harnessrl_jax.errors import ConfigError, HarnessError
from harnessrl_jax.evolver.critic import Critic
from harnessrl_jax.evolver.types import ROUTES, Measurement
from harnessrl_jax.harness import ops as hops


class RouteFilter:
  """A proposer that proposes only on `routes` (None elsewhere: the evolver's noop)."""

  def __init__(self, proposer, routes: Iterable[str]):
    routes = tuple(routes)
    known = set(ROUTES.values())
    if not set(routes) <= known:
      raise ConfigError(f"ablation.routes = {routes}: each must be one of {sorted(known)}")
    self.inner = proposer
    self.routes = frozenset(routes)
    self.name = getattr(proposer, "name", "proposer")

  @property
  def requests(self) -> int:
    return getattr(self.inner, "requests", 0)

  def propose(self, req):
    return self.inner.propose(req) if req.route in self.routes else None


class UncheckedCritic(Critic):
  """Accepts any structurally valid candidate; measures nothing on the policy."""

  def measure(self, cand, h, group, label, memory, step, key):
    del group, label, memory, step, key
    try:
      new = hops.apply_all(h, cand.ops)
    except HarnessError as e:
      return Measurement(0.0, None, False, (f"(iii) structural: {e}",)), None
    problems = tuple(self.structural_problems(h, new, cand))
    return Measurement(0.0, None, not problems, problems), new
