"""The `judge` config section: its documented defaults, `JudgeConfig` (its typed view) and
`same_model` (whether a local judge can reuse the loaded policy).

Backends (judge.backend):
  program   - the verifiable checks of data/checks.py only; criteria without a check stay
              unscored (masked).
  local     - a JAX model in this process (CPU default). judge.local.verdict picks how:
              "logits"   - one forward pass per cell: the assistant turn is forced to
                           '{"criteria_met":' and the verdict is the likelier of the
                           "true"/"false" next tokens (judges/logit_client.py); always a
                           verdict, raw text "logit verdict: p_true=...";
              "generate" - greedy JSON verdicts through the rollout sampler, parsed.
  jetstream - a JetStream server started with `python -m harnessrl_jax.serve`.
  openai    - any OpenAI-compatible chat-completions server (vLLM, SGLang, tpu-inference).
  hybrid    - program checks where a criterion has one, `judge.llm_backend` otherwise.

judge.endpoints lists several servers of the jetstream or openai backend: the judge (and
the evolver's "llm" roles, when they use that backend) then talk to a pool of them
(judges/pool.py, settings judge.pool.*).
"""

from __future__ import annotations

from typing import Any

import ml_collections

from harnessrl_jax.config_view import section_view
from harnessrl_jax.models.config import ModelSettings, model_defaults

BACKENDS = ("program", "local", "jetstream", "openai", "hybrid")
LOCAL_VERDICT_MODES = ("logits", "generate")
LLM_BACKENDS = ("local", "jetstream", "openai")
REMOTE_BACKENDS = ("jetstream", "openai")


def judge_defaults() -> ml_collections.ConfigDict:
  """The judge section with documented defaults."""
  j = ml_collections.ConfigDict()
  j.backend = "local"
  j.llm_backend = "local"              # the LLM half of "hybrid"
  j.max_new_tokens = 128               # length of one generated verdict (explanation + JSON)
  j.parse_retries = 1                  # re-asks per unparseable cell before it is left unscored
  j.transport_retries = 3              # per request: time-outs, refused connections, 5xx, garbage
  j.backoff_s = 0.5                    # first back-off; doubles per retry
  j.backoff_max_s = 8.0
  j.timeout_s = 120.0                  # per request
  j.max_concurrency = 16               # requests in flight (openai, jetstream; one server)
  # A step fails (before any update, so the last checkpoint stays intact) when more than
  # this share of its real cells has no verdict.
  j.max_unscored_share = 0.1
  j.cache_size = 200_000               # cached verdicts (LRU); regrading unchanged cells is free

  # The judge's model for "local" (and the tokenizer for "jetstream"): the fields of
  # config.model (models/config.py); a frozen judge, never the policy being trained.
  j.model = model_defaults()
  j.local = ml_collections.ConfigDict()
  j.local.verdict = "logits"           # "logits" (one forward per cell) or "generate"
  j.local.batch_size = 16              # prompts per forward / greedy rollout call
  j.local.prompt_buckets = (128, 256, 512, 1024, 2048)

  j.openai = ml_collections.ConfigDict()
  j.openai.base_url = "http://127.0.0.1:8000/v1"
  j.openai.model = ""                  # required for backend "openai"
  j.openai.api_key_env = "OPENAI_API_KEY"  # name of the variable; the key never sits in config
  j.openai.temperature = 0.0

  j.jetstream = ml_collections.ConfigDict()
  j.jetstream.address = "127.0.0.1:9000"
  # Must not exceed the server's --max_prefill_length: JetStream 0.2.2 silently keeps only
  # the LAST tokens of a longer prompt, so the client refuses such prompts instead.
  j.jetstream.max_prompt_tokens = 1024

  # Several servers of one model, as a pool: base URLs ("http://host:8000/v1") for backend
  # openai, host:port addresses for jetstream. A client of either backend uses the entries
  # of its own form; none (the default): its one server above.
  j.endpoints = ()
  j.pool = ml_collections.ConfigDict()
  j.pool.max_in_flight = 16            # requests in flight per endpoint; more wait for a slot
  j.pool.failure_threshold = 3         # consecutive transport failures that take one out
  j.pool.cooldown_s = 10.0             # how long it stays out before one probe request
  return j


def endpoint_backend(endpoint: str) -> str | None:
  """The backend a judge.endpoints entry serves, by its form: "openai" for a base URL,
  "jetstream" for host:port, None for neither."""
  if endpoint.startswith(("http://", "https://")):
    return "openai"
  host, _, port = endpoint.rpartition(":")
  if host and port.isdigit() and not any(c.isspace() for c in endpoint):
    return "jetstream"
  return None


class JudgeConfig(section_view(judge_defaults, "config.judge",
                               nested={"model": ModelSettings})):
  """`config.judge`, typed (fields and their meanings: `judge_defaults`); its sub-sections
  are views too (`judge.model` a `ModelSettings`)."""

  @property
  def text_backend(self) -> str | None:
    """The LLM backend that judges cells without a check: judge.llm_backend for "hybrid",
    the backend itself for an LLM backend, None for "program"."""
    if self.backend == "hybrid":
      return self.llm_backend
    return self.backend if self.backend in LLM_BACKENDS else None

  def addresses(self, backend: str) -> tuple[str, ...]:
    """The servers a client of a remote `backend` talks to: the judge.endpoints entries of
    its form (a pool when there are several), else its one configured server."""
    pooled = tuple(e for e in self.endpoints if endpoint_backend(e) == backend)
    if pooled:
      return pooled
    return (self.openai.base_url,) if backend == "openai" else (self.jetstream.address,)

  def problems(self) -> list[str]:
    out = []
    if self.backend not in BACKENDS:
      out.append(f"config.judge.backend = {self.backend!r}: expected one of {BACKENDS}")
    if self.backend == "hybrid" and self.llm_backend not in LLM_BACKENDS:
      out.append(f"config.judge.llm_backend = {self.llm_backend!r}: expected one of "
                 f"{LLM_BACKENDS}")
    if self.local.verdict not in LOCAL_VERDICT_MODES:
      out.append(f"config.judge.local.verdict = {self.local.verdict!r}: expected one of "
                 f"{LOCAL_VERDICT_MODES}")
    for name in ("parse_retries", "transport_retries", "backoff_s", "backoff_max_s"):
      if getattr(self, name) < 0:
        out.append(f"config.judge.{name} = {getattr(self, name)}: must be >= 0")
    for name in ("max_new_tokens", "max_concurrency"):
      if getattr(self, name) < 1:
        out.append(f"config.judge.{name} = {getattr(self, name)}: must be >= 1")
    if not self.timeout_s > 0:
      out.append(f"config.judge.timeout_s = {self.timeout_s}: must be > 0")
    if not 0.0 <= self.max_unscored_share <= 1.0:
      out.append(f"config.judge.max_unscored_share = {self.max_unscored_share}: must be in "
                 "[0, 1]")
    if self.local.batch_size < 1:
      out.append(f"config.judge.local.batch_size = {self.local.batch_size}: must be >= 1")
    if not self.local.prompt_buckets or min(self.local.prompt_buckets) < 1:
      out.append(f"config.judge.local.prompt_buckets = {self.local.prompt_buckets}: need "
                 "positive lengths")
    if self.jetstream.max_prompt_tokens < 1:
      out.append(f"config.judge.jetstream.max_prompt_tokens = "
                 f"{self.jetstream.max_prompt_tokens}: must be >= 1")
    if self.text_backend == "openai":
      if not self.openai.model:
        out.append("config.judge.openai.model is empty: name the served model (backend "
                   "'openai')")
      if not self.openai.base_url.startswith(("http://", "https://")):
        out.append(f"config.judge.openai.base_url = {self.openai.base_url!r}: expected "
                   "http(s)://host:port/v1")
    out.extend(self._endpoint_problems())
    for name in ("max_in_flight", "failure_threshold"):
      if getattr(self.pool, name) < 1:
        out.append(f"config.judge.pool.{name} = {getattr(self.pool, name)}: must be >= 1")
    if not self.pool.cooldown_s > 0:
      out.append(f"config.judge.pool.cooldown_s = {self.pool.cooldown_s}: must be > 0")
    if self.text_backend in ("local", "jetstream"):   # both load judge.model
      out.extend(self.model.problems("config.judge.model"))
    return out

  def _endpoint_problems(self) -> list[str]:
    out = []
    for e in self.endpoints:
      kind = endpoint_backend(e)
      if kind is None:
        out.append(f"config.judge.endpoints entry {e!r}: expected http(s)://host:port/v1 "
                   "(backend openai) or host:port (backend jetstream)")
      elif self.text_backend in REMOTE_BACKENDS and kind != self.text_backend:
        out.append(f"config.judge.endpoints entry {e!r} is a {kind} endpoint, but the "
                   f"judge's backend is {self.text_backend}; list {self.text_backend} "
                   "endpoints only")
    repeated = sorted({e for e in self.endpoints if self.endpoints.count(e) > 1})
    if repeated:
      out.append(f"config.judge.endpoints lists {repeated} more than once")
    return out


def same_model(judge_model_section: Any, model_section: Any) -> bool:
  """Whether a local judge of `config.judge.model` can reuse the model loaded for
  `config.model` instead of loading its own: both name the same weights and numerics
  (`ModelSettings.weights_key`: source, dtypes, and the path of "hf" or the seed and family
  of "tiny"; cache_dir and remat do not matter). Either may be a section or a dict."""
  return (ModelSettings.from_config(judge_model_section, check=False).weights_key() ==
          ModelSettings.from_config(model_section, check=False).weights_key())
