"""Building judges and text clients from the `judge` config section (judges/config.py)."""

from __future__ import annotations

from harnessrl_jax.errors import ConfigError
from harnessrl_jax.judges.client import RetryPolicy, TextClient
from harnessrl_jax.judges.config import BACKENDS, LLM_BACKENDS, LOCAL_VERDICT_MODES
from harnessrl_jax.judges.judge import Judge, JudgeSettings


def retry_policy(judge_cfg) -> RetryPolicy:
  if judge_cfg.transport_retries < 0 or judge_cfg.backoff_s < 0:
    raise ConfigError(f"judge.transport_retries={judge_cfg.transport_retries} and "
                      f"judge.backoff_s={judge_cfg.backoff_s} must be >= 0")
  return RetryPolicy(int(judge_cfg.transport_retries), float(judge_cfg.backoff_s),
                     float(judge_cfg.backoff_max_s))


def make_client(judge_cfg, backend: str | None = None, *, loaded=None) -> TextClient:
  """A TextClient for an LLM backend ("local", "jetstream" or "openai").

  "local" with judge.local.verdict="logits" (the default) gives a LogitVerdictClient: still
  a TextClient, and a VerdictClient the judge asks for verdicts instead of text.

  Args:
    judge_cfg: the `judge` config section.
    backend: defaults to judge.backend (judge.llm_backend when that is "hybrid").
    loaded: a `models.loading.LoadedModel` to use instead of loading judge.model ("local"
      uses the model, "jetstream" only its PromptBuilder).
  """
  if backend is None:
    backend = judge_cfg.llm_backend if judge_cfg.backend == "hybrid" else judge_cfg.backend
  if backend not in LLM_BACKENDS:
    raise ConfigError(f"judge backend {backend!r} is not an LLM backend; expected one of "
                      f"{LLM_BACKENDS}")
  policy = retry_policy(judge_cfg)
  mode = judge_cfg.local.verdict
  if backend == "local" and mode not in LOCAL_VERDICT_MODES:
    raise ConfigError(f"judge.local.verdict={mode!r}; expected one of {LOCAL_VERDICT_MODES}")
  if backend == "openai":
    # pylint: disable-next=g-import-not-at-top
    from harnessrl_jax.judges.openai_client import OpenAIClient
    o = judge_cfg.openai
    return OpenAIClient(o.base_url, o.model, api_key_env=o.api_key_env,
                        temperature=o.temperature, timeout_s=judge_cfg.timeout_s,
                        policy=policy, max_concurrency=judge_cfg.max_concurrency)
  if loaded is None:
    from harnessrl_jax.models.loading import load_model  # pylint: disable=g-import-not-at-top
    loaded = load_model(judge_cfg.model)
  if backend == "local":
    # pylint: disable=g-import-not-at-top
    from harnessrl_jax.judges.local_client import LocalClient
    from harnessrl_jax.judges.logit_client import LogitVerdictClient
    # pylint: enable=g-import-not-at-top
    kind = {"logits": LogitVerdictClient, "generate": LocalClient}[mode]
    return kind(loaded.model, loaded.prompt_builder, name=judge_cfg.model.source,
                batch_size=judge_cfg.local.batch_size,
                prompt_buckets=tuple(judge_cfg.local.prompt_buckets))
  # pylint: disable-next=g-import-not-at-top
  from harnessrl_jax.judges.jetstream_client import JetStreamClient
  js = judge_cfg.jetstream
  return JetStreamClient(js.address, loaded.prompt_builder,
                         max_prompt_tokens=js.max_prompt_tokens, timeout_s=judge_cfg.timeout_s,
                         policy=policy, max_concurrency=judge_cfg.max_concurrency)


def make_judge(judge_cfg, *, loaded=None, client: TextClient | None = None) -> Judge:
  """The judge that judge.backend names; `client` overrides the LLM client it would build."""
  backend = judge_cfg.backend
  if backend not in BACKENDS:
    raise ConfigError(f"judge.backend={backend!r}; expected one of {BACKENDS}")
  if backend == "hybrid" and judge_cfg.llm_backend not in LLM_BACKENDS:
    raise ConfigError(f"judge.llm_backend={judge_cfg.llm_backend!r}; expected one of "
                      f"{LLM_BACKENDS}")
  settings = JudgeSettings(max_new_tokens=int(judge_cfg.max_new_tokens),
                           parse_retries=int(judge_cfg.parse_retries),
                           max_unscored_share=float(judge_cfg.max_unscored_share))
  if backend != "program" and client is None:
    client = make_client(judge_cfg, loaded=loaded)
  return Judge(None if backend == "program" else client,
               use_checks=backend in ("program", "hybrid"), settings=settings,
               cache_size=int(judge_cfg.cache_size))
