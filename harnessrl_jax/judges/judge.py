"""`Judge.score(tasks, responses, criteria) -> ScoreMatrix`: one interface over every backend.

A cell is one (task, criterion, rollout). Per call:
  1. cells whose criterion carries a programmatic check are decided by it (when the judge
     uses checks: backends "program" and "hybrid");
  2. the others are asked of the LLM client (when there is one): the judge prompt is
     rendered, looked up in the verdict cache, identical requests are merged, and all
     remaining requests of the step go to the client in one batch (sent concurrently);
  3. answers that cannot be parsed are re-asked up to `parse_retries` times with a
     reminder appended, then left unscored (cause "parse"); requests that failed after the
     client's transport retries are left unscored ("transport"), and so are requests the
     server refused for good ("refused": a 4xx, a prompt too long). A verdict is never
     defaulted. A client that is a `VerdictClient` (the local backend's logit mode) is
     asked for verdicts instead of text: one forward pass per request, no parsing, so no
     retries; its raw text is "logit verdict: p_true=...".
  4. A failed request is not sent again within the call. A later call sends it again
     (the judge may be back), but a request is sent in at most REQUEST_CALLS calls of one
     judge, and a refused one in one: its attempts over the run stay below
     REQUEST_CALLS x (transport_retries + 1) x (parse_retries + 1). Without this bound the
     critic's regrades re-sent a failed cell of the step once per candidate.
  5. `ScoreMatrix.stats.failures` holds the failed cells by cause. If their share of the
     judged cells passes `max_unscored_share`, JudgeError is raised with the counts and
     the first error (unless the caller checks a limit of its own: `check_limit=False`,
     the critic's); the caller's step fails before any update, so the last checkpoint
     stays intact.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from harnessrl_jax.data import checks
from harnessrl_jax.data.schema import Criterion, Message, Task
from harnessrl_jax.errors import ConfigError, HarnessError
from harnessrl_jax.judges import prompt as prompt_lib
from harnessrl_jax.judges.cache import FailedRequests, VerdictCache, cache_key
from harnessrl_jax.judges.client import (ServerError, TextClient, TransportError,
                                         VerdictClient)
from harnessrl_jax.judges.parsing import parse_verdict
from harnessrl_jax.judges.score_matrix import (UNSCORED_NO_CHECK, UNSCORED_PARSE,
                                               UNSCORED_REFUSED, UNSCORED_TRANSPORT,
                                               JudgeStats, ScoreMatrix, Unscored)

# The calls of one judge in which a request that keeps failing is sent (module docstring).
REQUEST_CALLS = 2


class JudgeError(HarnessError):
  """Too many cells of a judged batch have no verdict; the step must not be applied.

  Attributes:
    unscored: the failed cells of the batch (or of the critic's step), by cause.
  """

  def __init__(self, message: str, unscored: Unscored = Unscored()):
    super().__init__(message)
    self.unscored = unscored


def failure_cause(error: ServerError) -> str:
  """The unscored cause of a request that ended in `error`."""
  return UNSCORED_TRANSPORT if isinstance(error, TransportError) else UNSCORED_REFUSED


@dataclasses.dataclass(frozen=True)
class JudgeSettings:
  """The judge's own settings (config.judge; `JudgeConfig` checks them)."""

  max_new_tokens: int = 128
  parse_retries: int = 1
  max_unscored_share: float = 0.1


class Judge:
  """Scores responses against rubric criteria with checks, an LLM client, or both."""

  def __init__(self, client: TextClient | VerdictClient | None, *, use_checks: bool,
               settings: JudgeSettings = JudgeSettings(), cache_size: int = 200_000):
    if client is None and not use_checks:
      raise ConfigError("a judge needs an LLM client, programmatic checks, or both")
    self.client = client
    self.verdict_client = client if isinstance(client, VerdictClient) else None
    self.use_checks = use_checks
    self.settings = settings
    self.cache = VerdictCache(cache_size)
    self.failed = FailedRequests(max(cache_size, 1024))
    parts = (["program"] if use_checks else []) + ([client.identity] if client else [])
    # Cache keys hash this identity with the full rendered prompt, so a change of model,
    # server, verdict mode, answer length or prompt template is a miss.
    mode = ("verdicts" if self.verdict_client is not None
            else f"max_tokens={settings.max_new_tokens}")
    self.identity = "+".join(parts) + f":{mode}"

  def score(self, tasks: Sequence[Task], responses: Sequence[Sequence[str]],
            criteria: Sequence[Sequence[Criterion]] | None = None, *,
            check_limit: bool = True) -> ScoreMatrix:
    """Verdicts for every (task, criterion, rollout).

    Args:
      tasks: T tasks (their prompts are the conversations being answered).
      responses: responses[t] holds the J responses to task t (same J for every task).
      criteria: criteria[t] to judge task t by (default: each task's own rubric); the JIT
        critic passes a candidate rubric here.
      check_limit: raise JudgeError past settings.max_unscored_share (False: the caller
        counts the failures against a limit of its own).

    Returns:
      A ScoreMatrix of shape [T, max_k, J].

    Raises:
      JudgeError: the failed share passed settings.max_unscored_share.
    """
    crits = _rubrics(tasks, responses, criteria)
    num_j = len(responses[0]) if tasks else 0
    tally = _Tally.empty(len(tasks), max((len(c) for c in crits), default=0), num_j)
    for t, task in enumerate(tasks):
      for k, crit in enumerate(crits[t]):
        tally.weights[t, k], tally.mask[t, k] = crit.weight, True
        for j, response in enumerate(responses[t]):
          self._decide_or_queue(tally, (t, k, j), task, crit, response)
    if self.verdict_client is not None:
      outcomes, requests = self._ask_verdicts(tally.pending)
    else:
      outcomes, requests = self._ask_text(tally.pending)
    self._settle(tally, outcomes)
    matrix = tally.matrix(requests)
    if check_limit:
      self._check_unscored(matrix, tally.errors)
    return matrix

  def _decide_or_queue(self, tally: _Tally, cell: tuple[int, int, int], task: Task,
                       crit: Criterion, response: str) -> None:
    """Decides one cell from its check, the verdict cache or an earlier failure, or
    queues its request in `tally.pending` (merged with identical requests)."""
    if self.use_checks and crit.check is not None:
      verdict = checks.run_check(crit.check, response, prompt=task.user_text)
      tally.set(cell, float(verdict), f"check {crit.check.type}: {str(bool(verdict)).lower()}")
      tally.program_cells += 1
      return
    if self.client is None:
      tally.unscored[UNSCORED_NO_CHECK] += 1
      tally.set(cell, None, "unscored: no programmatic check and no LLM backend")
      return
    messages = prompt_lib.judge_messages(task.prompt, crit, response)
    key = cache_key(self.identity, messages)
    hit = self.cache.get(key)
    if hit is not None:
      tally.set(cell, float(hit[0]), hit[1])
      tally.cache_hits += 1
      return
    failed = self.failed.get(key)
    if failed is not None and (failed[0] == UNSCORED_REFUSED or failed[1] >= REQUEST_CALLS):
      tally.unscored[failed[0]] += 1
      text = (f"unscored: {failed[0]}: not sent again, the request failed in "
              f"{failed[1]} earlier call(s)")
      tally.set(cell, None, text)
      tally.errors.append(text)
      return
    tally.pending.setdefault(key, (messages, []))[1].append(cell)

  def _settle(self, tally: _Tally, outcomes) -> None:
    """Writes each pending request's outcome to its cells; caches verdicts and records
    failures (`self.failed`) by cause."""
    for key, (_, cells) in tally.pending.items():
      outcome = outcomes[key]
      if isinstance(outcome, ServerError):
        verdict, text = None, f"unscored: {outcome}"
        cause = failure_cause(outcome)
        tally.errors.append(str(outcome))
      else:
        verdict, text = outcome
        cause = UNSCORED_PARSE if verdict is None else ""   # unparseable after the retries
      if cause:
        tally.unscored[cause] += len(cells)
        self.failed.add(key, cause)
      else:
        self.cache.put(key, verdict, text)
        self.failed.discard(key)
      for cell in cells:
        tally.set(cell, None if verdict is None else float(verdict), text)

  def _check_unscored(self, matrix: ScoreMatrix, errors: list[str]) -> None:
    """Raises JudgeError when the failed share passes settings.max_unscored_share."""
    # Cells no backend of this judge can score (no check, no LLM) are unscored by design
    # and masked out of the reward; the limit is on cells the judge tried and failed.
    failures = matrix.stats.failures
    if failures.share > self.settings.max_unscored_share:
      first = f"; first error: {errors[0]}" if errors else ""
      raise JudgeError(
          f"judge {self.identity}: {failures.describe()}{first}. That is more than "
          f"judge.max_unscored_share={self.settings.max_unscored_share:g}: check that the "
          "judge server is up and answers in the JSON format, or raise "
          "judge.max_unscored_share.", failures)

  def _ask_text(self, pending) -> tuple[dict[str, ServerError | tuple[bool | None, str]], int]:
    """Text answers for every pending request: key -> ServerError or (verdict or None if
    unparseable, answer). Round 0 sends every request; later rounds re-ask unparseable
    answers. Also returns the number of requests sent."""
    outcomes: dict[str, ServerError | tuple[bool | None, str]] = {}
    asks = {key: messages for key, (messages, _) in pending.items()}
    requests = 0
    for _ in range(self.settings.parse_retries + 1):
      if not asks:
        break
      keys = list(asks)
      answers = self.client.complete_or_errors([asks[k] for k in keys],
                                               max_tokens=self.settings.max_new_tokens,
                                               schema=prompt_lib.VERDICT_SCHEMA)
      requests += len(keys)
      retry = {}
      for key, answer in zip(keys, answers):
        if isinstance(answer, ServerError):
          outcomes[key] = answer
          continue
        verdict = parse_verdict(answer)
        outcomes[key] = (verdict, answer)
        if verdict is None:
          retry[key] = prompt_lib.retry_messages(pending[key][0], answer)
      asks = retry
    return outcomes, requests

  def _ask_verdicts(self, pending) -> tuple[dict[str, ServerError | tuple[bool, str]], int]:
    """Verdicts of the VerdictClient for every pending request, as in `_ask_text`."""
    if not pending:
      return {}, 0
    keys = list(pending)
    results = self.verdict_client.verdicts([pending[k][0] for k in keys])
    outcomes = {key: r if isinstance(r, ServerError) else (r.met, r.raw)
                for key, r in zip(keys, results)}
    return outcomes, len(keys)


def _rubrics(tasks: Sequence[Task], responses: Sequence[Sequence[str]],
             criteria: Sequence[Sequence[Criterion]] | None) -> list[tuple[Criterion, ...]]:
  """Each task's criteria (its own rubric unless `criteria` is given); raises HarnessError
  unless tasks, response groups and rubrics match and every task has the same J."""
  crits = [tuple(t.criteria) for t in tasks] if criteria is None else [tuple(c) for c in criteria]
  if len(crits) != len(tasks) or len(responses) != len(tasks):
    raise HarnessError(f"judge: {len(tasks)} tasks, {len(responses)} response groups and "
                       f"{len(crits)} rubrics; they must match")
  num_j = len(responses[0]) if tasks else 0
  for t, group in enumerate(responses):
    if len(group) != num_j:
      raise HarnessError(f"judge: task {t} has {len(group)} responses, task 0 has {num_j}")
  return crits


@dataclasses.dataclass
class _Tally:
  """What one `Judge.score` call has decided so far, cell by cell ([T, K, J] arrays), and
  the requests still to send: key -> (judge request, cells waiting for it)."""

  scores: np.ndarray
  scored: np.ndarray
  weights: np.ndarray
  mask: np.ndarray
  raw: list[list[list[str]]]
  unscored: dict[str, int]
  errors: list[str] = dataclasses.field(default_factory=list)
  program_cells: int = 0
  cache_hits: int = 0
  pending: dict[str, tuple[tuple[Message, ...], list[tuple[int, int, int]]]] = (
      dataclasses.field(default_factory=dict))

  @classmethod
  def empty(cls, num_t: int, num_k: int, num_j: int) -> _Tally:
    return cls(scores=np.zeros((num_t, num_k, num_j), np.float32),
               scored=np.zeros((num_t, num_k, num_j), bool),
               weights=np.zeros((num_t, num_k), np.float32),
               mask=np.zeros((num_t, num_k), bool),
               raw=[[[""] * num_j for _ in range(num_k)] for _ in range(num_t)],
               unscored={UNSCORED_NO_CHECK: 0, UNSCORED_TRANSPORT: 0, UNSCORED_PARSE: 0,
                         UNSCORED_REFUSED: 0})

  def set(self, cell: tuple[int, int, int], verdict: float | None, text: str) -> None:
    """Records a cell's raw text and, unless `verdict` is None, its score."""
    t, k, j = cell
    self.raw[t][k][j] = text
    if verdict is not None:
      self.scores[t, k, j], self.scored[t, k, j] = verdict, True

  def matrix(self, requests: int) -> ScoreMatrix:
    """The read-only ScoreMatrix of the decided cells."""
    stats = JudgeStats(cells=int(self.mask.sum()) * self.scores.shape[2],
                       program_cells=self.program_cells, cache_hits=self.cache_hits,
                       requests=requests,
                       unscored=tuple(sorted((r, n) for r, n in self.unscored.items() if n)))
    for array in (self.scores, self.scored, self.weights, self.mask):
      array.setflags(write=False)  # verdicts cross module boundaries read-only
    raw = tuple(tuple(tuple(row) for row in crit_rows) for crit_rows in self.raw)
    return ScoreMatrix(scores=self.scores, scored=self.scored, weights=self.weights,
                       criterion_mask=self.mask, raw=raw, stats=stats)
