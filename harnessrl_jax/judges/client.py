"""The text-generation client interface shared by the judge and the evolver's text roles.

`TextClient.complete(prompts, max_tokens=...)` turns a batch of chat requests into one
answer each. Backends: LocalClient (a JAX model in process), JetStreamClient (gRPC), and
OpenAIClient (HTTP); PoolClient (judges/pool.py) spreads requests over several of the last
two. Transport faults (time-outs, refused connections, 5xx, garbage bodies) get bounded
retries with exponential back-off inside the client (a pool's: on another endpoint). A
request that still fails raises ServerError from `complete` (what the attributor and the
proposer call), or stands in its place in the list from `complete_or_errors` (what the judge
calls: it leaves the cell unscored and counts it).

`schema=` asks for an answer in a JSON schema (structured outputs): clients whose servers
decode under one (`takes_schema`: the OpenAI-compatible client, as vLLM and SGLang accept
`response_format` json_schema; LocalClient and JetStreamClient, whose engines are ours and
mask their logits with the schema's token automaton, docs/evolver.md; and the pool over
such servers) send it; the others ignore it. Either way the caller parses and validates the
answer strictly.

`VerdictClient.verdicts(prompts)` is the narrower interface of a backend that decides a
verdict without generating text (the local backend's logit mode, judges/logit_client.py):
one `Verdict` (the boolean and p(true)) per judge request. The judge prefers it when its
client provides it.
"""

from __future__ import annotations

import abc
import concurrent.futures
import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from harnessrl_jax.data.schema import Message
from harnessrl_jax.errors import HarnessError

T = TypeVar("T")
Chat = Sequence[Message | dict]
Schema = dict[str, Any]   # a JSON schema whose "title" names it


class ServerError(HarnessError):
  """An inference server failed after all retries, or refused the request for good."""


class TransportError(ServerError):
  """A request that kept failing in transport (time-outs, connections, 5xx, garbage bodies)
  through all its retries; any other ServerError is a refusal (a 4xx, a prompt too long),
  which no retry fixes. The judge counts the two causes apart."""


class AuthError(HarnessError):
  """The server refused the request's credentials (HTTP 401 / 403). Not retried and not a
  ServerError: no cell is left unscored for it; the run stops with this one message."""


class RetryableError(Exception):
  """A fault worth retrying (time-out, refused connection, 5xx, garbage body)."""

  def __init__(self, message: str, retry_after_s: float | None = None):
    super().__init__(message)
    self.retry_after_s = retry_after_s


@dataclasses.dataclass(frozen=True)
class RetryPolicy:
  """Bounded retries: `retries` more attempts after the first, waiting backoff_s * 2^n
  (at most backoff_max_s) before retry n."""

  retries: int = 3
  backoff_s: float = 0.5
  backoff_max_s: float = 8.0

  def delay(self, attempt: int, retry_after_s: float | None = None) -> float:
    """Seconds to wait before retry number `attempt` (0-based); honours Retry-After."""
    d = min(self.backoff_max_s, self.backoff_s * (2 ** attempt))
    if retry_after_s is not None:
      d = min(self.backoff_max_s, max(d, retry_after_s))
    return d


def call_with_retries(fn: Callable[[], T], policy: RetryPolicy, what: str,
                      sleep: Callable[[float], None] = time.sleep) -> T:
  """Runs fn, retrying RetryableError up to policy.retries times; then raises TransportError.

  Other exceptions (a ServerError for a 4xx, a bug) propagate at once.
  """
  for attempt in range(policy.retries + 1):
    try:
      return fn()
    except RetryableError as e:
      if attempt == policy.retries:
        raise TransportError(f"{what}: failed after {policy.retries + 1} attempts; "
                             f"last error: {e}") from e
      sleep(policy.delay(attempt, e.retry_after_s))
  raise AssertionError("unreachable")


def as_messages(chat: Chat) -> tuple[Message, ...]:
  return tuple(m if isinstance(m, Message) else Message(m["role"], m["content"]) for m in chat)


class TextClient(abc.ABC):
  """Chat requests in, answers out. `identity` names backend + model for cache keys."""

  identity: str
  takes_schema = False   # whether `schema=` reaches the server (module docstring)
  # Whether the server compiles schemas to a token automaton (a regular grammar: no open
  # objects; our own engines, docs/evolver.md): callers then send closed schemas only.
  regular_schemas = False

  def complete(self, prompts: Sequence[Chat], *, max_tokens: int,
               schema: Schema | None = None) -> list[str]:
    """One answer per prompt, in order; raises ServerError if any request fails for good."""
    results = self.complete_or_errors(prompts, max_tokens=max_tokens, schema=schema)
    errors = [r for r in results if isinstance(r, ServerError)]
    if errors:
      raise ServerError(f"{self.identity}: {len(errors)} of {len(results)} requests failed; "
                        f"first: {errors[0]}") from errors[0]
    return results

  def complete_or_errors(self, prompts: Sequence[Chat], *, max_tokens: int,
                         schema: Schema | None = None) -> list[str | ServerError]:
    """Like `complete`, but a request that failed after its retries yields its ServerError
    in place of the answer (the judge leaves such cells unscored and counts them)."""
    chats = [as_messages(p) for p in prompts]
    if schema is not None and self.takes_schema:
      return self._complete(chats, int(max_tokens), schema=schema)
    return self._complete(chats, int(max_tokens))

  def close(self) -> None:
    """Releases connections (no-op where there are none)."""

  @abc.abstractmethod
  def _complete(self, chats: list[tuple[Message, ...]],
                max_tokens: int) -> list[str | ServerError]:
    """Answers, or the ServerError that ended a request after its retries."""


@dataclasses.dataclass(frozen=True)
class Verdict:
  """A verdict read off the model's next-token distribution.

  Attributes:
    met: the verdict (criteria_met).
    p_true: p(true) / (p(true) + p(false)) over the verdict tokens.
  """

  met: bool
  p_true: float

  @property
  def raw(self) -> str:
    """The judge's raw text for the cell (what ScoreMatrix.raw and the cache hold)."""
    return f"logit verdict: p_true={self.p_true:.4f}"


class VerdictClient(abc.ABC):
  """Judge requests in, verdicts out, without generated text. `identity` names backend,
  model and verdict rule for cache keys."""

  identity: str

  def verdicts(self, prompts: Sequence[Chat]) -> list[Verdict | ServerError]:
    """One verdict per judge request, in order; a request that cannot be judged (e.g. too
    long) yields its ServerError in place of the verdict."""
    return self._verdicts([as_messages(p) for p in prompts])

  @abc.abstractmethod
  def _verdicts(self, chats: list[tuple[Message, ...]]) -> list[Verdict | ServerError]:
    """Verdicts, or the ServerError that stands for a request that could not be judged."""


def concurrent_map(fn: Callable[[Any], T], items: Sequence[Any],
                   max_workers: int) -> list[T | ServerError]:
  """fn over items on a thread pool; an item's ServerError is returned in its place (other
  exceptions are bugs and propagate)."""
  def guarded(item):
    try:
      return fn(item)
    except ServerError as e:
      return e

  if len(items) <= 1:   # no thread for one item (a pool sends its members one at a time)
    return [guarded(item) for item in items]
  with concurrent.futures.ThreadPoolExecutor(max(1, min(max_workers, len(items)))) as pool:
    return list(pool.map(guarded, items))
