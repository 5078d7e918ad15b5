"""Several endpoints behind one TextClient (judge.endpoints, judge.pool.*).

Dispatch: each request goes to the least-loaded endpoint that can take it, at most
`max_in_flight` requests per endpoint. When every healthy endpoint is full the request waits
(back-pressure): a server's queue does not grow past what it was sized for, and a slow
server, whose requests stay in flight longer, is sent fewer of them.

Circuit breaker, per endpoint: `failure_threshold` consecutive transport failures take the
endpoint out ("open") for `cooldown_s`; then it is "half_open": one request probes it, and
its outcome closes the breaker (any answer, a refusal included: the server is up) or opens
it again for another cooldown.

Retries: the members are single-endpoint clients built with no retries of their own, so a
transport fault surfaces here at once, and the request is retried on an endpoint it has not
tried yet (waiting for a slot there if all are full, not going back to the one that failed
it). It backs off (RetryPolicy) only once it has tried every endpoint that is not out; when
every endpoint is out it waits for the earliest half-open time rather than failing at
once. Attempts and those waits count against the same budget of 1 + retries; a request
that uses it up yields a TransportError in its place (the judge leaves the cell unscored
and counts it, never a default). A refusal (a ServerError that is not a TransportError: a
4xx, a prompt too long) is returned at once, as another endpoint of the same model would
refuse it too; AuthError propagates.

Moved requests: a request that one endpoint failed in transport and another then answered
(or refused) moved. Each endpoint counts those it took over (`moved_in`) and those it lost
(`moved_out`, each request once per endpoint that failed it); the sum of `moved_in` over the
endpoints is how many requests, so cells, a fault sent elsewhere instead of leaving them
unscored. One judge request is one cell (or several identical cells the judge merged).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Mapping

from harnessrl_jax.data.schema import Message
from harnessrl_jax.judges.client import (AuthError, RetryPolicy, Schema, ServerError,
                                         TextClient, TransportError, concurrent_map)

CLOSED, OPEN, HALF_OPEN = "closed", "open", "half_open"
_ANSWERED, _REFUSED, _FAILED = "answered", "refused", "failed"


@dataclasses.dataclass(eq=False)   # eq=False: hashed by identity, for a request's `tried` set
class _Endpoint:
  """One member, its breaker and its counters; every field is guarded by the pool's lock."""

  name: str
  client: TextClient
  in_flight: int = 0
  consecutive_failures: int = 0
  open_until: float | None = None   # None: closed; else out until then, half-open after
  probing: bool = False             # the half-open probe is in flight
  requests: int = 0
  successes: int = 0
  transport_failures: int = 0
  refusals: int = 0
  opened: int = 0
  moved_in: int = 0    # requests another endpoint failed that this one then answered
  moved_out: int = 0   # requests this one failed that another then answered

  def state(self, now: float) -> str:
    if self.open_until is None:
      return CLOSED
    return OPEN if now < self.open_until else HALF_OPEN


class PoolClient(TextClient):
  """Requests spread over `members` (endpoint name -> its client), with back-pressure, a
  circuit breaker per endpoint, and retries sent to another endpoint."""

  takes_schema = True   # passed on; a member whose server cannot take one ignores it

  def __init__(self, members: Mapping[str, TextClient], *, max_in_flight: int = 16,
               failure_threshold: int = 3, cooldown_s: float = 10.0,
               policy: RetryPolicy = RetryPolicy()):
    if not members:
      raise ValueError("an endpoint pool needs at least one endpoint")
    self._endpoints = [_Endpoint(name, client) for name, client in members.items()]
    self.max_in_flight = int(max_in_flight)
    self.failure_threshold = int(failure_threshold)
    self.cooldown_s = float(cooldown_s)
    self.policy = policy
    self._cond = threading.Condition()
    self.identity = "pool[" + ",".join(e.client.identity for e in self._endpoints) + "]"
    # Schemas must suit every member's engine.
    self.regular_schemas = any(getattr(e.client, "regular_schemas", False)
                               for e in self._endpoints)

  def stats(self) -> dict[str, dict[str, int | str]]:
    """Per endpoint: its breaker state, requests in flight now, and counters since start
    (requests sent, answers, transport failures, refusals, times its breaker opened,
    requests it took over from endpoints that failed them and requests it lost to others)."""
    with self._cond:
      now = time.monotonic()
      return {e.name: {"state": e.state(now), "in_flight": e.in_flight,
                       "requests": e.requests, "successes": e.successes,
                       "transport_failures": e.transport_failures, "refusals": e.refusals,
                       "opened": e.opened, "moved_in": e.moved_in,
                       "moved_out": e.moved_out}
              for e in self._endpoints}

  def close(self) -> None:
    for e in self._endpoints:
      e.client.close()

  def _complete(self, chats: list[tuple[Message, ...]], max_tokens: int,
                schema: Schema | None = None) -> list[str | ServerError]:
    # One thread per slot the pool has: enough to keep every endpoint full; more would
    # only wait for a slot.
    workers = len(self._endpoints) * self.max_in_flight
    return concurrent_map(lambda chat: self._request(chat, max_tokens, schema), chats,
                          workers)

  def _request(self, chat: tuple[Message, ...], max_tokens: int,
               schema: Schema | None) -> str | ServerError:
    tried: set[_Endpoint] = set()
    failed_on: set[_Endpoint] = set()   # kept across back-offs (`tried` is not): the moves
    backoffs = 0
    last = "every endpoint was out (circuit open)"
    for attempt in range(self.policy.retries + 1):
      got = self._acquire(tried)
      if isinstance(got, float):   # every endpoint is out: wait for the first to half-open
        if attempt < self.policy.retries:
          time.sleep(max(0.0, got - time.monotonic()))
        continue
      endpoint, probe = got
      outcome = None   # stays None for an exception that says nothing of the server
      try:
        result = endpoint.client.complete_or_errors([chat], max_tokens=max_tokens,
                                                    schema=schema)[0]
        outcome = _FAILED if isinstance(result, TransportError) else (
            _REFUSED if isinstance(result, ServerError) else _ANSWERED)
      except AuthError:
        outcome = _REFUSED   # the server answered: its breaker closes, the run stops
        raise
      finally:
        self._release(endpoint, probe, outcome, failed_on)
      if outcome != _FAILED:
        return result
      last = f"{endpoint.name}: {result}"
      tried.add(endpoint)
      failed_on.add(endpoint)
      if attempt < self.policy.retries and self._tried_every_reachable(tried):
        time.sleep(self.policy.delay(backoffs))
        backoffs += 1
        tried.clear()
    return TransportError(f"endpoint pool: no answer after {self.policy.retries + 1} "
                          f"attempts over {len(self._endpoints)} endpoints; last: {last}")

  def _can_take(self, e: _Endpoint, now: float) -> bool:
    state = e.state(now)
    return (e.in_flight < self.max_in_flight and
            (state == CLOSED or (state == HALF_OPEN and not e.probing)))

  def _acquire(self, tried: set[_Endpoint]) -> tuple[_Endpoint, bool] | float:
    """A slot on the least-loaded endpoint for a request's next attempt: (endpoint, whether
    the attempt is the endpoint's half-open probe). Waits while the endpoints that could
    take it are full or probing. When every endpoint is out, returns the earliest time one
    half-opens instead: the caller counts that wait as an attempt."""
    with self._cond:
      while True:
        now = time.monotonic()
        up = [e for e in self._endpoints if e.state(now) != OPEN]
        if not up:
          return min(e.open_until for e in self._endpoints)
        # A retry waits for an endpoint it has not tried, even a busy one, rather than going
        # back to one that just failed it (the caller clears `tried` once it covers `up`).
        ready = [e for e in ([e for e in up if e not in tried] or up)
                 if self._can_take(e, now)]
        if ready:
          e = min(ready, key=lambda e: e.in_flight)   # the least loaded
          probe = e.state(now) == HALF_OPEN
          e.probing = e.probing or probe
          e.in_flight += 1
          e.requests += 1
          return e, probe
        # A release notifies; an open endpoint turning half-open does not, so wake for it.
        out = [e.open_until for e in self._endpoints if e.state(now) == OPEN]
        self._cond.wait(min(out) - now if out else None)

  def _release(self, e: _Endpoint, probe: bool, outcome: str | None,
               failed_on: set[_Endpoint]) -> None:
    """Frees the slot and records the outcome; `failed_on`: the endpoints that failed this
    request before (an answer here moves it from them)."""
    with self._cond:
      e.in_flight -= 1
      if probe:
        e.probing = False
      if outcome == _FAILED:
        e.transport_failures += 1
        e.consecutive_failures += 1
        # A failed probe reopens the breaker; a closed one opens at the threshold. Failures
        # of requests sent before it opened do not extend the cooldown.
        if probe or (e.open_until is None and
                     e.consecutive_failures >= self.failure_threshold):
          e.open_until = time.monotonic() + self.cooldown_s
          e.opened += 1
      elif outcome is not None:   # an answer or a refusal: the server is up
        if outcome == _ANSWERED:
          e.successes += 1
        else:
          e.refusals += 1
        e.consecutive_failures = 0
        e.open_until = None
        lost_by = failed_on - {e}   # failed here before too: it came back, not moved
        if lost_by:
          e.moved_in += 1
          for other in lost_by:
            other.moved_out += 1
      self._cond.notify_all()

  def _tried_every_reachable(self, tried: set[_Endpoint]) -> bool:
    """Whether every endpoint that is not out has failed this request already, while one
    is not out (when all are out, waiting for the half-open time is the back-off)."""
    with self._cond:
      now = time.monotonic()
      reachable = [e for e in self._endpoints if e.state(now) != OPEN]
      return bool(reachable) and all(e in tried for e in reachable)
