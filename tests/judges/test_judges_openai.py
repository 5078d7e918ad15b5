"""The OpenAI-compatible client against a local HTTP server started here, which answers
like vLLM / SGLang do, and also with errors, slowness and garbage."""

import collections
import json
import threading
import time

import numpy as np
import portpicker
import pytest

from harnessrl_jax.data.schema import Criterion, Message, Task
from harnessrl_jax.errors import ConfigError
from harnessrl_jax.judges.client import AuthError, RetryPolicy, ServerError
from harnessrl_jax.judges.config import judge_defaults
from harnessrl_jax.judges.factory import make_judge
from harnessrl_jax.judges.judge import JudgeError
from harnessrl_jax.judges.openai_client import OpenAIClient
from harnessrl_jax.judges.prompt import VERDICT_SCHEMA
from tests import chat_stub


def completion_body(content, model="judge-model"):
  """A chat-completions body as vLLM returns it."""
  return {"id": "chatcmpl-8f1c", "object": "chat.completion", "created": 1764450000,
          "model": model,
          "choices": [{"index": 0, "message": {"role": "assistant", "content": content,
                                               "tool_calls": []},
                       "logprobs": None, "finish_reason": "stop", "stop_reason": None}],
          "usage": {"prompt_tokens": 57, "total_tokens": 70, "completion_tokens": 13}}


class Server:
  """Behaviour is chosen by the last message's first word: ok, 503x2, 429, garbage, html,
  nochoices, 404, 401, 403, slow, grade (criteria_met = whether "cat" is in the fenced
  response); `mode`, when set, answers every request instead."""

  def __init__(self):
    self.attempts = collections.Counter()
    self.requests = []
    self.in_flight = self.max_in_flight = 0
    self.mode = None
    lock = threading.Lock()
    outer = self

    class Handler(chat_stub.ChatHandler):
      def do_POST(self):  # noqa: N802
        with lock:
          outer.in_flight += 1
          outer.max_in_flight = max(outer.max_in_flight, outer.in_flight)
        try:
          self._handle()
        finally:
          with lock:
            outer.in_flight -= 1

      def _handle(self):
        req = self.read_json()
        text = req["messages"][-1]["content"]
        mode = outer.mode or text.split()[0]
        with lock:
          outer.requests.append((self.path, dict(self.headers), req))
          outer.attempts[text] += 1
          n = outer.attempts[text]
        if mode == "ok":
          self.send_json(200, completion_body(f"echo {text}", req["model"]))
        elif mode == "503x2":
          if n <= 2:
            self.send_json(503, {"object": "error", "message": "overloaded", "code": 503})
          else:
            self.send_json(200, completion_body("recovered"))
        elif mode == "429":
          if n == 1:
            self.send_json(429, {"error": "rate limited"}, [("Retry-After", "3")])
          else:
            self.send_json(200, completion_body("after wait"))
        elif mode == "garbage":
          self.send_json(200, b"\x00\xffnot json")
        elif mode == "html":
          self.send_json(502, b"<html><body>Bad Gateway</body></html>")
        elif mode == "nochoices":
          self.send_json(200, {"id": "x", "object": "chat.completion", "choices": []})
        elif mode == "404":
          self.send_json(404, {"object": "error", "message": "The model `nope` does not exist.",
                           "type": "NotFoundError", "code": 404})
        elif mode in ("401", "403"):   # as vLLM --api-key / an OpenAI-style gateway answer
          self.send_json(int(mode), {"error": {"message": "Incorrect API key provided",
                                           "type": "invalid_request_error",
                                           "code": "invalid_api_key"}})
        elif mode == "slow":
          time.sleep(0.6)
          self.send_json(200, completion_body("late"))
        else:  # a judge request
          time.sleep(0.05)
          response = text.split("<<<BEGIN RESPONSE ")[1].split(">>>\n", 1)[1].split("\n<<<END")[0]
          verdict = "cat" in response
          self.send_json(200, completion_body(
              "```json\n" + json.dumps({"explanation": "checked", "criteria_met": verdict}) +
              "\n```\nLet me know if you need more."))

    self.loopback = chat_stub.Loopback(Handler)
    self.url = self.loopback.url

  def close(self):
    self.loopback.close()


@pytest.fixture
def server():
  s = Server()
  yield s
  s.close()


def client(url, sleeps=None, **kw):
  sleeps = [] if sleeps is None else sleeps
  kw.setdefault("policy", RetryPolicy(retries=3, backoff_s=0.1, backoff_max_s=2.0))
  return OpenAIClient(url, "judge-model", api_key_env="HARNESS_TEST_KEY",
                      sleep=sleeps.append, **kw)


def chat(text):
  return [Message("system", "sys"), Message("user", text)]


def test_realistic_round_trip_and_request_shape(server, monkeypatch):
  monkeypatch.setenv("HARNESS_TEST_KEY", "sk-test-123")
  out = client(server.url).complete([chat("ok one"), chat("ok two")], max_tokens=17)
  assert out == ["echo ok one", "echo ok two"]
  path, headers, req = server.requests[0]
  assert path == "/v1/chat/completions"
  assert headers["Authorization"] == "Bearer sk-test-123"
  assert req["model"] == "judge-model" and req["max_tokens"] == 17
  assert req["temperature"] == 0.0
  assert req["messages"][0] == {"role": "system", "content": "sys"}
  monkeypatch.delenv("HARNESS_TEST_KEY")
  client(server.url).complete([chat("ok three")], max_tokens=5)
  assert "Authorization" not in server.requests[-1][1]
  assert "response_format" not in server.requests[-1][2]   # no schema asked, none sent


def test_a_schema_goes_out_as_structured_outputs(server):
  client(server.url).complete([chat("ok four")], max_tokens=5, schema=VERDICT_SCHEMA)
  fmt = server.requests[-1][2]["response_format"]
  assert fmt == {"type": "json_schema", "json_schema": {
      "name": "verdict", "schema": VERDICT_SCHEMA, "strict": True}}


def test_5xx_and_429_are_retried_with_backoff(server):
  sleeps = []
  assert client(server.url, sleeps).complete([chat("503x2 a")], max_tokens=5) == ["recovered"]
  assert server.attempts["503x2 a"] == 3
  assert sleeps == [0.1, 0.2]   # exponential back-off
  sleeps.clear()
  assert client(server.url, sleeps).complete([chat("429 b")], max_tokens=5) == ["after wait"]
  assert sleeps == [2.0]        # Retry-After: 3, capped at backoff_max_s


@pytest.mark.parametrize("mode", ["garbage", "html", "nochoices"])
def test_garbage_is_retried_then_fails(server, mode):
  sleeps = []
  c = client(server.url, sleeps)
  out = c.complete_or_errors([chat(f"{mode} x"), chat("ok y")], max_tokens=5)
  assert isinstance(out[0], ServerError) and out[1] == "echo ok y"
  assert "failed after 4 attempts" in str(out[0])
  assert server.attempts[f"{mode} x"] == 4 and sleeps == [0.1, 0.2, 0.4]
  with pytest.raises(ServerError, match="1 of 1 requests failed"):
    c.complete([chat(f"{mode} z")], max_tokens=5)


def test_client_errors_are_not_retried(server):
  out = client(server.url).complete_or_errors([chat("404 m")], max_tokens=5)
  assert server.attempts["404 m"] == 1
  assert "HTTP 404" in str(out[0]) and "does not exist" in str(out[0])
  assert "judge.openai.model='judge-model'" in str(out[0])


@pytest.mark.parametrize("code", ["401", "403"])
def test_refused_key_is_an_auth_error_naming_the_variable(server, monkeypatch, code):
  sleeps = []
  monkeypatch.setenv("HARNESS_TEST_KEY", "sk-wrong")
  with pytest.raises(AuthError, match=rf"HTTP {code}.*refused the key in \$HARNESS_TEST_KEY "
                     r"\(judge\.openai\.api_key_env\)"):
    client(server.url, sleeps).complete_or_errors([chat(f"{code} a"), chat("ok b")],
                                                  max_tokens=5)
  assert server.attempts[f"{code} a"] == 1 and sleeps == []   # not retried
  assert not isinstance(AuthError("x"), ServerError)          # not a transport fault
  monkeypatch.delenv("HARNESS_TEST_KEY")
  with pytest.raises(AuthError, match=r"no key was sent, as \$HARNESS_TEST_KEY "
                     r"\(judge\.openai\.api_key_env\) is not set"):
    client(server.url).complete([chat(f"{code} b")], max_tokens=5)


def test_judge_stops_on_a_refused_key_instead_of_leaving_cells_unscored(server):
  cfg = judge_defaults()
  cfg.backend = "openai"
  cfg.openai.base_url = server.url
  cfg.openai.model = "judge-model"
  cfg.openai.api_key_env = "HARNESS_TEST_KEY_UNSET"
  server.mode = "401"
  with pytest.raises(AuthError, match="HARNESS_TEST_KEY_UNSET"):
    make_judge(cfg).score(_tasks()[:1], [("a", "b")])
  assert len(server.requests) <= 4   # each request once: 2 responses x 2 criteria


def test_timeout_and_refused_connection(server):
  sleeps = []
  c = client(server.url, sleeps, timeout_s=0.2,
             policy=RetryPolicy(retries=1, backoff_s=0.01))
  out = c.complete_or_errors([chat("slow s")], max_tokens=5)
  assert isinstance(out[0], ServerError) and server.attempts["slow s"] == 2
  dead = client(f"http://127.0.0.1:{portpicker.pick_unused_port()}/v1",
                policy=RetryPolicy(retries=2, backoff_s=0.01))
  out = dead.complete_or_errors([chat("ok")], max_tokens=5)
  assert "failed after 3 attempts" in str(out[0]) and "refused" in str(out[0]).lower()


def test_config_errors():
  with pytest.raises(ConfigError, match="judge.openai.model"):
    OpenAIClient("http://127.0.0.1:1/v1", "")
  with pytest.raises(ConfigError, match="base_url"):
    OpenAIClient("127.0.0.1:1/v1", "m")


def _tasks():
  crits = (Criterion("c1", "Mentions cats.", 1.0), Criterion("c2", "Is rude.", -1.0))
  return [Task(id=f"t{i}", domain="writing", prompt=(Message("user", f"Q{i}"),),
               criteria=crits) for i in range(3)]


def test_judge_through_openai_backend(server):
  cfg = judge_defaults()
  cfg.backend = "openai"
  cfg.openai.base_url = server.url
  cfg.openai.model = "judge-model"
  cfg.max_concurrency = 8
  judge = make_judge(cfg)
  responses = [("a cat", "a dog"), ("cats!", "none"), ("no", "cat")]
  m = judge.score(_tasks(), responses)
  want = np.array([[[1, 0]] * 2, [[1, 0]] * 2, [[0, 1]] * 2], np.float32)
  np.testing.assert_array_equal(m.scores, want)
  assert m.scored.all() and m.stats.requests == 12
  assert server.max_in_flight > 1   # sent concurrently
  schemas = {json.dumps(r["response_format"]["json_schema"]["schema"], sort_keys=True)
             for _, _, r in server.requests}
  assert schemas == {json.dumps(VERDICT_SCHEMA, sort_keys=True)}   # every verdict request
  n = len(server.requests)
  again = judge.score(_tasks(), responses)
  assert len(server.requests) == n and again.stats.cache_hits == 12


def test_judge_fails_the_step_when_the_server_is_down():
  cfg = judge_defaults()
  cfg.backend = "openai"
  cfg.openai.base_url = f"http://127.0.0.1:{portpicker.pick_unused_port()}/v1"
  cfg.openai.model = "m"
  cfg.transport_retries = 1
  cfg.backoff_s = 0.01
  with pytest.raises(JudgeError, match=r"6 of 6 judged cells \(100%\).*transport: 6.*refused"):
    make_judge(cfg).score(_tasks()[:1], [("a", "b", "c")])
