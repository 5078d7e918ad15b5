"""Building judges and text clients from the `judge` config section (judges/config.py)."""

from __future__ import annotations

from harnessrl_jax.errors import ConfigError
from harnessrl_jax.judges.client import RetryPolicy, TextClient
from harnessrl_jax.judges.config import LLM_BACKENDS, JudgeConfig
from harnessrl_jax.judges.judge import Judge, JudgeSettings


def make_client(judge_cfg, backend: str | None = None, *, loaded=None) -> TextClient:
  """A TextClient for an LLM backend ("local", "jetstream" or "openai").

  "local" with judge.local.verdict="logits" (the default) gives a LogitVerdictClient: still
  a TextClient, and a VerdictClient the judge asks for verdicts instead of text.

  Args:
    judge_cfg: the `judge` config section (or its `JudgeConfig`).
    backend: defaults to judge.backend (judge.llm_backend when that is "hybrid").
    loaded: a `models.loading.LoadedModel` to use instead of loading judge.model ("local"
      uses the model, "jetstream" only its PromptBuilder).
  """
  j = JudgeConfig.from_config(judge_cfg)
  backend = j.text_backend if backend is None else backend
  if backend not in LLM_BACKENDS:
    raise ConfigError(f"judge backend {backend!r} is not an LLM backend; expected one of "
                      f"{LLM_BACKENDS}")
  policy = RetryPolicy(j.transport_retries, j.backoff_s, j.backoff_max_s)
  if backend == "openai":
    # pylint: disable-next=g-import-not-at-top
    from harnessrl_jax.judges.openai_client import OpenAIClient
    o = j.openai
    return OpenAIClient(o.base_url, o.model, api_key_env=o.api_key_env,
                        temperature=o.temperature, timeout_s=j.timeout_s, policy=policy,
                        max_concurrency=j.max_concurrency)
  if loaded is None:
    from harnessrl_jax.models.loading import load_model  # pylint: disable=g-import-not-at-top
    loaded = load_model(j.model)
  if backend == "local":
    # pylint: disable=g-import-not-at-top
    from harnessrl_jax.judges.local_client import LocalClient
    from harnessrl_jax.judges.logit_client import LogitVerdictClient
    # pylint: enable=g-import-not-at-top
    kind = {"logits": LogitVerdictClient, "generate": LocalClient}[j.local.verdict]
    return kind(loaded.model, loaded.prompt_builder, name=j.model.source,
                batch_size=j.local.batch_size, prompt_buckets=j.local.prompt_buckets)
  # pylint: disable-next=g-import-not-at-top
  from harnessrl_jax.judges.jetstream_client import JetStreamClient
  return JetStreamClient(j.jetstream.address, loaded.prompt_builder,
                         max_prompt_tokens=j.jetstream.max_prompt_tokens,
                         timeout_s=j.timeout_s, policy=policy,
                         max_concurrency=j.max_concurrency)


def make_judge(judge_cfg, *, loaded=None, client: TextClient | None = None) -> Judge:
  """The judge that judge.backend names; `client` overrides the LLM client it would build.
  `judge_cfg` is the `judge` config section or its `JudgeConfig`."""
  j = JudgeConfig.from_config(judge_cfg)
  settings = JudgeSettings(max_new_tokens=j.max_new_tokens, parse_retries=j.parse_retries,
                           max_unscored_share=j.max_unscored_share)
  if j.backend != "program" and client is None:
    client = make_client(j, loaded=loaded)
  return Judge(None if j.backend == "program" else client,
               use_checks=j.backend in ("program", "hybrid"), settings=settings,
               cache_size=j.cache_size)
