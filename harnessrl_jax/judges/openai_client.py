"""A client for OpenAI-compatible chat-completions servers (vLLM, SGLang, tpu-inference).

POST {base_url}/chat/completions with {"model", "messages", "max_tokens", "temperature"}
and, when the caller gives a JSON schema, "response_format": {"type": "json_schema",
"json_schema": {"name", "schema", "strict": true}} (structured outputs, as OpenAI, vLLM and
SGLang accept them); the answer is choices[0].message.content. The API key is read from
the environment variable named in config (judge.openai.api_key_env), never from the config
itself; no variable means no Authorization header (local servers usually need none).

Retried (bounded, exponential back-off, Retry-After honoured): time-outs, refused or reset
connections, HTTP 408/429/5xx, and bodies that are not the expected JSON. Not retried: other
4xx (a wrong model name does not fix itself); they fail the request at once. HTTP 401 / 403
raise AuthError naming the key's variable: a refused key is a setting to fix, not a fault
to count per cell.

Transport: one `httpx.Client` per OpenAIClient, its connection pool sized to the requests in
flight, so concurrent requests reuse kept-alive connections instead of a new one each.
Retries stay in `client.call_with_retries` (shared with the JetStream client): the pool
(judges/pool.py) decides per attempt where a retry goes, which a retry decorator around one
endpoint's call could not.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable

import httpx

from harnessrl_jax.data.schema import Message
from harnessrl_jax.errors import ConfigError
from harnessrl_jax.judges.client import (AuthError, RetryableError, RetryPolicy, Schema,
                                         ServerError, TextClient, call_with_retries,
                                         concurrent_map)

_RETRY_STATUS = (408, 429)
_AUTH_STATUS = (401, 403)


class OpenAIClient(TextClient):
  """Chat completions over HTTP, requests sent concurrently."""

  takes_schema = True

  def __init__(self, base_url: str, model: str, *, api_key_env: str = "OPENAI_API_KEY",
               temperature: float = 0.0, timeout_s: float = 120.0,
               policy: RetryPolicy = RetryPolicy(), max_concurrency: int = 16,
               sleep: Callable[[float], None] | None = None):
    if not model:
      raise ConfigError("judge.openai.model is empty: name the served model "
                        "(e.g. the --served-model-name given to vLLM)")
    if not base_url.startswith(("http://", "https://")):
      raise ConfigError(f"judge.openai.base_url={base_url!r}: expected http(s)://host:port/v1")
    self.url = base_url.rstrip("/") + "/chat/completions"
    self.model = model
    self.api_key_env = api_key_env
    self.temperature = float(temperature)
    self.timeout_s = float(timeout_s)
    self.policy = policy
    self.max_concurrency = int(max_concurrency)
    self._sleep = sleep
    self.identity = f"openai:{self.url}:{model}:t={self.temperature:g}"
    self._http = httpx.Client(
        timeout=self.timeout_s,
        limits=httpx.Limits(max_connections=self.max_concurrency,
                            max_keepalive_connections=self.max_concurrency))

  def close(self) -> None:
    self._http.close()

  def _headers(self) -> dict[str, str]:
    headers = {"Content-Type": "application/json"}
    key = os.environ.get(self.api_key_env, "") if self.api_key_env else ""
    if key:
      headers["Authorization"] = f"Bearer {key}"
    return headers

  def _post_once(self, body: bytes) -> str:
    try:
      reply = self._http.post(self.url, content=body, headers=self._headers())
      raw = reply.content
    except httpx.RequestError as e:   # refused, reset, timed out, a broken reply
      raise RetryableError(f"{type(e).__name__} talking to {self.url}: {e}") from e
    code = reply.status_code
    if code >= 400:
      detail = _snippet(raw)
      if code in _AUTH_STATUS:
        raise AuthError(self._auth_message(code, detail))
      if code >= 500 or code in _RETRY_STATUS:
        raise RetryableError(f"HTTP {code} from {self.url}: {detail}",
                             _retry_after(reply.headers.get("Retry-After")))
      raise ServerError(f"HTTP {code} from {self.url}: {detail} (not retried: check "
                        f"judge.openai.model={self.model!r} and the URL)")
    try:
      content = json.loads(raw)["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError) as e:
      raise RetryableError(f"unexpected body from {self.url}: {_snippet(raw)}") from e
    if not isinstance(content, str):
      raise RetryableError(f"unexpected body from {self.url}: content is "
                           f"{type(content).__name__}, not text")
    return content

  def _auth_message(self, code: int, detail: str) -> str:
    """What to fix when the server refuses the credentials (HTTP 401 / 403)."""
    where = f"judge.openai: HTTP {code} from {self.url} ({detail})"
    var = self.api_key_env
    if var and os.environ.get(var):
      return (f"{where}: authentication failed: the server refused the key in ${var} "
              f"(judge.openai.api_key_env); set {var} to a key it accepts")
    unset = f"${var} (judge.openai.api_key_env) is not set" if var else (
        "judge.openai.api_key_env names no variable")
    return (f"{where}: authentication failed: no key was sent, as {unset}; export the key "
            "in the variable judge.openai.api_key_env names")

  def _one(self, payload: dict) -> str:
    body = json.dumps(payload).encode("utf-8")
    kwargs = {} if self._sleep is None else {"sleep": self._sleep}
    return call_with_retries(lambda: self._post_once(body), self.policy,
                             f"chat completion at {self.url}", **kwargs)

  def _complete(self, chats: list[tuple[Message, ...]], max_tokens: int,
                schema: Schema | None = None) -> list[str | ServerError]:
    extra = {} if schema is None else {"response_format": {
        "type": "json_schema",
        "json_schema": {"name": schema.get("title", "answer"), "schema": schema,
                        "strict": True}}}
    payloads = [{"model": self.model,
                 "messages": [{"role": m.role, "content": m.content} for m in chat],
                 "max_tokens": max_tokens, "temperature": self.temperature, **extra}
                for chat in chats]
    return concurrent_map(self._one, payloads, self.max_concurrency)


def _snippet(raw: bytes | str, limit: int = 200) -> str:
  text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
  return repr(text[:limit] + ("..." if len(text) > limit else ""))


def _retry_after(value: str | None) -> float | None:
  try:
    return float(value) if value is not None else None
  except ValueError:
    return None
