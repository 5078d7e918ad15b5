"""Building judges and text clients from the `judge` config section (judges/config.py)."""

from __future__ import annotations

from collections.abc import Callable

from harnessrl_jax.errors import ConfigError
from harnessrl_jax.judges.client import RetryPolicy, TextClient
from harnessrl_jax.judges.config import LLM_BACKENDS, JudgeConfig, same_model
from harnessrl_jax.judges.judge import Judge, JudgeSettings
from harnessrl_jax.judges.pool import PoolClient


def make_client(judge_cfg, backend: str | None = None, *, loaded=None) -> TextClient:
  """A TextClient for an LLM backend ("local", "jetstream" or "openai").

  "local" with judge.local.verdict="logits" (the default) gives a LogitVerdictClient: still
  a TextClient, and a VerdictClient the judge asks for verdicts instead of text.
  "jetstream" and "openai" with several servers (`JudgeConfig.addresses`: judge.endpoints)
  give a PoolClient over one client per server.

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
    return _pooled(j, backend, policy, lambda url, member_policy: OpenAIClient(
        url, o.model, api_key_env=o.api_key_env, temperature=o.temperature,
        timeout_s=j.timeout_s, policy=member_policy, max_concurrency=j.max_concurrency))
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
  return _pooled(j, backend, policy, lambda address, member_policy: JetStreamClient(
      address, loaded.prompt_builder, max_prompt_tokens=j.jetstream.max_prompt_tokens,
      timeout_s=j.timeout_s, policy=member_policy, max_concurrency=j.max_concurrency))


def _pooled(j: JudgeConfig, backend: str, policy: RetryPolicy,
            client_for: Callable[[str, RetryPolicy], TextClient]) -> TextClient:
  """The one server's client, or a PoolClient over several. Pool members retry nothing
  themselves: a transport fault reaches the pool at once, which retries it elsewhere."""
  addresses = j.addresses(backend)
  if len(addresses) == 1:
    return client_for(addresses[0], policy)
  no_retries = RetryPolicy(retries=0)
  return PoolClient({a: client_for(a, no_retries) for a in addresses},
                    max_in_flight=j.pool.max_in_flight,
                    failure_threshold=j.pool.failure_threshold,
                    cooldown_s=j.pool.cooldown_s, policy=policy)


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


def make_run_judge(cfg, loaded) -> Judge:
  """config.judge's judge for a run whose policy `loaded` is config.model: a local judge
  of the same model reads the policy's loaded weights instead of loading them again."""
  return make_judge(cfg.judge,
                    loaded=loaded if same_model(cfg.judge.model, cfg.model) else None)
