"""The endpoint pool (judges/pool.py) over loopback OpenAI-compatible servers started here,
built the way the judge builds it (judge.endpoints through `make_client`): of three servers
one dies mid-run and one answers slowly, yet every request gets its own answer, none lost or
defaulted, and the run takes no longer than 1.2x the two servers that stay up (the slow one
and the healthy one) alone. Refusals are not retried, a pool with every server down answers
each request with a TransportError after its bounded attempts, and a breaker that opened
closes again once its probe is answered. The trainer's start-up probes every endpoint, and
the pool's settings are checked by name."""

import collections
import re
import socket
import threading
import time

import pytest

from harnessrl_jax.errors import ConfigError
from harnessrl_jax.judges.client import AuthError, ServerError, TransportError
from harnessrl_jax.judges.config import JudgeConfig, judge_defaults
from harnessrl_jax.judges.factory import make_client, make_judge
from harnessrl_jax.judges.openai_client import OpenAIClient
from harnessrl_jax.judges.pool import PoolClient
from tests import chat_stub

IN_FLIGHT = 4        # judge.pool.max_in_flight in these tests
DELAY_S = 0.03       # a healthy server's time per request: serving dominates, not Python
SLOW_DELAY_S = 0.15


class Server:
  """A chat-completions server on a free loopback port. It answers "echo <last message>"
  after `delay_s`, HTTP 400 to a message starting "refuse", 401 to one starting "auth", and
  503 to everything while `failing`. With `die_after`, once it has answered that many it
  stops listening and drops the requests it still holds, unanswered."""

  def __init__(self, delay_s=DELAY_S, die_after=None):
    self.delay_s, self.die_after, self.failing = delay_s, die_after, False
    self.received = collections.Counter()   # last message -> requests received
    self.answered = self.in_flight = self.max_in_flight = 0
    self.dead = threading.Event()
    lock = threading.Lock()
    outer = self

    class Handler(chat_stub.ChatHandler):
      def do_POST(self):  # noqa: N802
        text = self.read_json()["messages"][-1]["content"]
        with lock:
          outer.received[text] += 1
          outer.in_flight += 1
          outer.max_in_flight = max(outer.max_in_flight, outer.in_flight)
        time.sleep(outer.delay_s)
        with lock:   # done before it answers: the client may send the next one at once
          outer.in_flight -= 1
        if outer.dead.is_set():   # died while serving it: the connection just closes
          self.close_connection = True
        elif outer.failing:
          self.send_json(503, {"object": "error", "message": "overloaded"})
        elif text.startswith("refuse"):
          self.send_json(400, {"object": "error", "message": "prompt too long"})
        elif text.startswith("auth"):
          self.send_json(401, {"error": {"message": "Incorrect API key provided"}})
        else:
          with lock:   # counted before it is sent: the client cannot see it uncounted
            outer.answered += 1
            if outer.answered == outer.die_after:
              outer.kill()   # this answer still goes out
          self.send_json(200, chat_stub.completion(f"echo {text}"))

    self.loopback = chat_stub.Loopback(Handler)
    self.url = self.loopback.url

  def kill(self):
    """Stops answering: requests in flight are dropped, new connections refused."""
    self.dead.set()

    threading.Thread(target=self.loopback.close, daemon=True).start()


@pytest.fixture(name="serve")
def fixture_serve():
  """Starts Servers; stops those still up when the test ends."""
  started = []

  def start(**kwargs):
    started.append(Server(**kwargs))
    return started[-1]
  yield start
  for server in started:
    if not server.dead.is_set():
      server.kill()


def pool_config(urls, **pool):
  j = judge_defaults()
  j.backend = "openai"
  j.openai.model = "judge-model"
  j.endpoints = tuple(urls)
  j.timeout_s = 5.0
  j.transport_retries = 3
  j.backoff_s = 0.02
  j.pool.max_in_flight = IN_FLIGHT
  j.pool.failure_threshold = 2
  j.pool.cooldown_s = 0.5
  for k, v in pool.items():
    setattr(j.pool, k, v)
  return j


def chats(*texts):
  return [[{"role": "user", "content": t}] for t in texts]


def timed(client, prompts):
  t0 = time.perf_counter()
  out = client.complete_or_errors(prompts, max_tokens=8)
  return out, time.perf_counter() - t0


def free_url():
  with socket.socket() as s:   # a port nothing listens on once this closes
    s.bind(("127.0.0.1", 0))
    return f"http://127.0.0.1:{s.getsockname()[1]}/v1"


def test_a_dying_and_a_slow_server_lose_nothing_and_cost_no_throughput(serve):
  n = 240
  prompts = chats(*(f"request {i}" for i in range(n)))
  want = [f"echo request {i}" for i in range(n)]
  slow, fast = serve(delay_s=SLOW_DELAY_S), serve()
  servers = [slow, fast]
  # Two runs of each, interleaved, the faster kept: the machine may be busy elsewhere.
  two_s, three_s = [], []
  for _ in range(2):
    two_s.append(timed(make_client(pool_config([slow.url, fast.url])), prompts)[1])
    dying = serve(die_after=50)
    servers.append(dying)
    pool = make_client(pool_config([dying.url, slow.url, fast.url]))
    assert isinstance(pool, PoolClient)
    answers, seconds = timed(pool, prompts)
    three_s.append(seconds)
    assert answers == want   # each its own answer: none lost, none defaulted
    stats = pool.stats()
    d, s_, f = stats[dying.url], stats[slow.url], stats[fast.url]
    assert d["successes"] == dying.answered >= 50   # >: answers sent as it died
    assert d["transport_failures"] >= 2 and d["opened"] >= 1
    assert d["state"] in ("open", "half_open")
    assert s_["successes"] >= 1 and s_["transport_failures"] == 0
    assert sum(e["successes"] for e in stats.values()) == n
    # Only the dying server failed requests: each one it lost was taken over by another.
    moved = sum(e["moved_in"] for e in stats.values())
    assert moved == d["moved_out"] >= 1 and d["moved_in"] == 0
    assert s_["moved_out"] == f["moved_out"] == 0
    for e in stats.values():
      assert e["requests"] == e["successes"] + e["transport_failures"] + e["refusals"]
      assert e["in_flight"] == 0 and e["refusals"] == 0
    # The slow server is sent fewer requests, not the same share.
    assert s_["requests"] < f["requests"] / 2
  # Back-pressure: no server ever held more than its bound.
  assert max(x.max_in_flight for x in servers) <= IN_FLIGHT
  ratio = min(three_s) / min(two_s)
  print(f"\n3 servers (one dying, one slow) {min(three_s):.2f}s, the 2 that stay up alone "
        f"{min(two_s):.2f}s: ratio {ratio:.2f}")
  assert ratio <= 1.2, f"the pool took {ratio:.2f}x the time of the servers that stay up"


def test_a_refusal_comes_back_at_once_and_a_refused_key_stops(serve):
  servers = [serve(delay_s=0.0), serve(delay_s=0.0)]
  pool = make_client(pool_config(s.url for s in servers))
  out = pool.complete_or_errors(chats("refuse this", "fine"), max_tokens=8)
  assert isinstance(out[0], ServerError) and not isinstance(out[0], TransportError)
  assert "HTTP 400" in str(out[0]) and out[1] == "echo fine"
  assert sum(s.received["refuse this"] for s in servers) == 1   # not retried elsewhere
  assert sum(e["refusals"] for e in pool.stats().values()) == 1
  with pytest.raises(AuthError, match="authentication failed"):
    pool.complete_or_errors(chats("auth please"), max_tokens=8)
  assert sum(s.received["auth please"] for s in servers) == 1


def test_with_every_server_down_each_request_ends_in_a_transport_error():
  pool = make_client(pool_config([free_url(), free_url()], failure_threshold=1,
                                 cooldown_s=0.3))
  out, elapsed = timed(pool, chats(*(f"q{i}" for i in range(10))))
  assert all(isinstance(e, TransportError) for e in out), out
  assert "after 4 attempts over 2 endpoints" in str(out[0])
  stats = pool.stats()
  assert all(e["opened"] >= 1 and e["successes"] == 0 for e in stats.values())
  # Each request sends at most its 4 attempts; ones that found every breaker open waited
  # for the half-open time instead of failing at once, and that wait was bounded too.
  assert sum(e["requests"] for e in stats.values()) <= 10 * 4
  assert 0.3 <= elapsed < 5.0


def test_an_open_breaker_closes_once_its_probe_is_answered(serve):
  flaky, steady = serve(delay_s=0.01), serve(delay_s=0.01)
  flaky.failing = True
  pool = make_client(pool_config([flaky.url, steady.url], cooldown_s=1.0))
  first = pool.complete_or_errors(chats(*(f"a{i}" for i in range(20))), max_tokens=8)
  assert first == [f"echo a{i}" for i in range(20)]   # the 503s were retried on steady
  f, st = pool.stats()[flaky.url], pool.stats()[steady.url]
  assert (f["state"], f["opened"], f["successes"]) == ("open", 1, 0)
  assert f["transport_failures"] >= 2
  # Each request flaky failed moved to steady once: the counters say how many.
  assert f["moved_out"] == st["moved_in"] == f["transport_failures"]
  assert f["moved_in"] == st["moved_out"] == 0
  flaky.failing = False
  time.sleep(1.05)
  assert pool.stats()[flaky.url]["state"] == "half_open"
  second = pool.complete_or_errors(chats(*(f"b{i}" for i in range(20))), max_tokens=8)
  assert second == [f"echo b{i}" for i in range(20)]
  f = pool.stats()[flaky.url]
  assert (f["state"], f["opened"]) == ("closed", 1) and f["successes"] >= 1


def test_one_endpoint_is_a_plain_client_and_the_evolver_shares_the_pool():
  from harnessrl_jax.config import base_config  # pylint: disable=g-import-not-at-top
  from harnessrl_jax.evolver import build_evolver  # pylint: disable=g-import-not-at-top
  one = make_client(pool_config(["http://judge-0:8000/v1"]))
  assert isinstance(one, OpenAIClient) and one.url == "http://judge-0:8000/v1/chat/completions"
  c = base_config()
  c.judge = pool_config(["http://judge-0:8000/v1", "http://judge-1:8000/v1"])
  c.evolver.attributor = c.evolver.proposer = "llm"
  judge = make_judge(c.judge)
  assert isinstance(judge.client, PoolClient)
  ev = build_evolver(c, judge=judge)
  assert ev.attributor.client is judge.client and ev.proposer.client is judge.client
  # A jetstream client finds no jetstream entry among openai endpoints: its one address.
  assert JudgeConfig.from_config(c.judge).addresses("jetstream") == ("127.0.0.1:9000",)
  # Each metrics.jsonl row of a run judged through the pool carries its counters.
  import types  # pylint: disable=g-import-not-at-top
  from harnessrl_jax import run_files, train  # pylint: disable=g-import-not-at-top
  run = types.SimpleNamespace(learner=types.SimpleNamespace(judge=judge))
  row = train._with_endpoints(run, {"step": 0})  # pylint: disable=protected-access
  assert set(row[run_files.ENDPOINTS]) == {"http://judge-0:8000/v1", "http://judge-1:8000/v1"}
  assert row[run_files.ENDPOINTS]["http://judge-0:8000/v1"]["state"] == "closed"
  c.judge.backend = "program"
  plain = types.SimpleNamespace(learner=types.SimpleNamespace(judge=make_judge(c.judge)))
  # pylint: disable-next=protected-access
  assert train._with_endpoints(plain, {"step": 0}) == {"step": 0}


def test_the_trainer_start_probes_every_endpoint(serve):
  from harnessrl_jax.train import check_judge  # pylint: disable=g-import-not-at-top
  up, down = serve().url, free_url()
  check_judge(pool_config([up, serve().url]))
  with pytest.raises(ConfigError, match=rf"judge\.endpoints entry '{re.escape(down)}': "
                                        "cannot reach"):
    check_judge(pool_config([up, down]))


@pytest.mark.parametrize("field,value,message", [
    ("endpoints", ("judge-0",), r"config\.judge\.endpoints entry 'judge-0': expected"),
    ("endpoints", ("judge-0:9000",), r"config\.judge\.endpoints entry 'judge-0:9000' is a "
                                     r"jetstream endpoint, but the judge's backend is openai"),
    ("endpoints", ("http://a:1/v1", "http://a:1/v1"),
     r"config\.judge\.endpoints lists \['http://a:1/v1'\] more than once"),
    ("pool.max_in_flight", 0, r"config\.judge\.pool\.max_in_flight = 0: must be >= 1"),
    ("pool.failure_threshold", 0, r"config\.judge\.pool\.failure_threshold = 0: must be"),
    ("pool.cooldown_s", 0.0, r"config\.judge\.pool\.cooldown_s = 0\.0: must be > 0"),
])
def test_pool_settings_are_checked_by_name(field, value, message):
  j = pool_config(["http://a:1/v1", "http://b:1/v1"])
  section, _, name = field.rpartition(".")
  setattr(j[section] if section else j, name, value)
  with pytest.raises(ConfigError, match=message):
    JudgeConfig.from_config(j)


def test_a_schema_reaches_every_member_that_takes_one():
  from harnessrl_jax.judges.client import TextClient  # pylint: disable=g-import-not-at-top
  from harnessrl_jax.judges.prompt import VERDICT_SCHEMA  # pylint: disable=g-import-not-at-top

  class Member(TextClient):
    takes_schema = True

    def __init__(self, name):
      self.identity, self.schemas = name, []

    def _complete(self, chats, max_tokens, schema=None):
      self.schemas.append(schema)
      return ["ok"] * len(chats)

  members = {"a": Member("a"), "b": Member("b")}
  pool = PoolClient(members, max_in_flight=1)
  assert pool.complete([[{"role": "user", "content": "x"}]] * 8, max_tokens=4,
                       schema=VERDICT_SCHEMA) == ["ok"] * 8
  sent = members["a"].schemas + members["b"].schemas
  assert len(sent) == 8 and all(s is VERDICT_SCHEMA for s in sent)


def test_moved_requests_are_counted_once_where_they_landed():
  """A request failed by one endpoint and answered by another moved: counted once on each
  side. One that fails on A, then B, then is answered by A (after the back-off) moved from
  B only."""
  from harnessrl_jax.judges.client import RetryPolicy, TextClient  # pylint: disable=g-import-not-at-top

  class Member(TextClient):
    def __init__(self, name, fail_first):
      self.identity, self.fail_first, self.calls = name, fail_first, 0

    def _complete(self, chats, max_tokens, schema=None):
      self.calls += 1
      if self.calls <= self.fail_first:
        return [TransportError(f"{self.identity} down")]
      return [f"{self.identity} answered"]

  down, up = Member("down", 10**6), Member("up", 0)
  pool = PoolClient({"down": down, "up": up}, max_in_flight=1, failure_threshold=100,
                    policy=RetryPolicy(retries=3, backoff_s=0.0))
  out = pool.complete(chats(*(f"q{i}" for i in range(6))), max_tokens=4)
  assert out == ["up answered"] * 6
  stats = pool.stats()
  assert stats["up"]["moved_in"] == stats["down"]["moved_out"] == stats["down"][
      "transport_failures"] >= 1
  assert stats["up"]["moved_out"] == stats["down"]["moved_in"] == 0
  # One request: A fails, B fails, A answers after the back-off.
  a, b = Member("a", 1), Member("b", 1)
  pool = PoolClient({"a": a, "b": b}, max_in_flight=1,
                    policy=RetryPolicy(retries=3, backoff_s=0.0))
  answer = pool.complete(chats("q"), max_tokens=4)[0]
  first, second = ("a", "b") if answer == "a answered" else ("b", "a")
  stats = pool.stats()
  assert stats[first]["transport_failures"] == stats[second]["transport_failures"] == 1
  assert (stats[first]["moved_in"], stats[first]["moved_out"]) == (1, 0)
  assert (stats[second]["moved_in"], stats[second]["moved_out"]) == (0, 1)
