"""Fault injection: the tiny driver (configs/tiny.py, judge.backend = "openai") against a
loopback OpenAI-compatible stub judge that answers every request about a seed-rubric
criterion and fails (HTTP 500) every request about any other criterion text. Only the
critic asks about other texts (a candidate's rewritten, split or new criteria), so the
learner and the held-out evaluation see a perfect judge while the critic loses cells.

The run must surface that: with a generous evolver.max_unscored_share it finishes, and its
rows, progress lines and summary count the unmeasurable candidates and the critic's cells
without a verdict; with the default limit it stops with exit code 2 and one line naming
the critic, before the step's checkpoint.
"""

import collections
import hashlib
import json
import os
import subprocess
import sys
import threading
import types

import jax
import pytest

from harnessrl_jax import harness
from harnessrl_jax.run import step as step_fns
from harnessrl_jax.data.schema import Criterion, Message, Task
from harnessrl_jax.judges.client import TextClient, TransportError
from harnessrl_jax.judges.judge import Judge, JudgeError
from harnessrl_jax.rollout import SamplingParams
from tests import chat_stub
from tests.run.test_train_resume import env_and_data  # pylint: disable=unused-import
from repo_paths import REPO



def _fenced(text: str, label: str) -> str:
  start = text.index(f"<<<BEGIN {label} ")
  start = text.index(">>>\n", start) + 4
  return text[start:text.index(f"\n<<<END {label} ", start)]


class StubJudge:
  """A chat-completions server on 127.0.0.1. A request whose rubric item is a seed
  criterion gets a verdict (a fixed pseudo-random function of criterion and response, so
  that the attributor finds spurious criteria and the proposer offers rubric candidates);
  any other criterion text gets HTTP 500 (a transport fault, after the client's retries)."""

  def __init__(self, seed_texts):
    self.seed_texts = frozenset(seed_texts)
    self.answered = self.failed = 0
    self.attempts = collections.Counter()   # request body -> times it arrived
    lock = threading.Lock()
    outer = self

    class Handler(chat_stub.ChatHandler):
      def do_GET(self):  # noqa: N802  (the driver's start-up probe of /models)
        self.send_json(200, {"object": "list", "data": [{"id": "stub", "object": "model"}]})

      def do_POST(self):  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        req = json.loads(body)
        with lock:
          outer.attempts[body] += 1
        user = req["messages"][1]["content"]
        criterion = _fenced(user, "RUBRIC ITEM").split("\n(")[0]
        if criterion not in outer.seed_texts:
          with lock:
            outer.failed += 1
          self.send_json(500, {"object": "error", "message": "cannot score this criterion"})
          return
        with lock:
          outer.answered += 1
        digest = hashlib.sha256((criterion + _fenced(user, "RESPONSE")).encode()).digest()
        verdict = json.dumps({"explanation": "stub", "criteria_met": digest[0] % 2 == 0})
        self.send_json(200, chat_stub.completion(verdict, req["model"]))

    self.loopback = chat_stub.Loopback(Handler, poll_interval=0.05)
    self.url = self.loopback.url

  def close(self):
    self.loopback.close()


@pytest.fixture(scope="module")
def stub(env_and_data):
  root, _ = env_and_data
  texts = set()
  for name in ("train.jsonl", "heldout.jsonl"):
    with open(root / name, encoding="utf-8") as f:
      for line in f:
        texts.update(c["text"] for c in json.loads(line)["criteria"])
  s = StubJudge(texts)
  yield s
  s.close()


def train(env_and_data, stub, workdir, *extra):
  root, env = env_and_data
  cmd = [sys.executable, "-m", "harnessrl_jax.train", "--config=configs/tiny.py",
         f"--workdir={workdir}", f"--config.data.train={root / 'train.jsonl'}",
         f"--config.data.heldout={root / 'heldout.jsonl'}",
         "--config.judge.backend=openai", f"--config.judge.openai.base_url={stub.url}",
         "--config.judge.openai.model=stub", "--config.judge.transport_retries=1",
         "--config.judge.backoff_s=0.01", "--config.judge.backoff_max_s=0.01",
         "--config.judge.timeout_s=30", *extra]
  return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)


def rows(workdir):
  with open(workdir / "metrics.jsonl", encoding="utf-8") as f:
    return [json.loads(line) for line in f]


def test_a_judge_that_fails_only_the_critic_is_surfaced(env_and_data, stub):
  workdir = env_and_data[0] / "faults_lenient"
  done = train(env_and_data, stub, workdir, "--config.evolver.max_unscored_share=1.0")
  assert done.returncode == 0, done.stderr[-3000:]
  assert stub.failed > 0 and stub.answered > 0
  # A failing request is sent in at most judge.REQUEST_CALLS = 2 calls of transport_retries
  # + 1 = 2 attempts each, however often the critic regrades it.
  assert max(stub.attempts.values()) <= 2 * 2
  got = rows(workdir)
  # The learner's and the held-out cells all got verdicts ...
  assert all(r["unscored"]["count"] == 0 and r["unscored"]["cells"] > 0 for r in got)
  assert all(r["heldout_unscored"]["count"] == 0 for r in got if "heldout_unscored" in r)
  # ... the critic's did not, and the candidates they measured are unmeasurable.
  critic = [r["critic_unscored"] for r in got]
  assert sum(c["count"] for c in critic) > 0
  assert all(set(c["causes"]) <= {"transport"} for c in critic)
  assert sum(r["evolver"].get("unmeasurable", 0) for r in got) > 0
  with open(workdir / "evolver_candidates.jsonl", encoding="utf-8") as f:
    cands = [json.loads(line) for line in f]
  lost = [c for c in cands if c["verdict"] == "unmeasurable"]
  assert lost and all(c["measurement"]["delta"] is None and c["measurement"]["unscored"]["count"]
                      for c in lost)
  assert not any(c["verdict"] == "rejected" and c["measurement"]["unscored"]["count"]
                 for c in cands)   # no lost cell hides in a measured rejection
  with open(workdir / "summary.json", encoding="utf-8") as f:
    summary = json.load(f)
  assert summary["unscored"]["critic"]["count"] == sum(c["count"] for c in critic)
  assert summary["unscored"]["learner"]["count"] == 0
  assert sum(v.get("unmeasurable", 0) for v in summary["updates"].values()) == len(lost)
  assert summary["heldout_end"]["unscored"]["count"] == 0
  # The critic's re-samples are counted as a phase of their own, row by row and in sum.
  spent = [r["positions"]["critic"] for r in got if "critic" in r["positions"]]
  assert bool(spent) == (summary["cost"]["critic_rollouts"] > 0)
  assert all(0 < p["real"] <= p["computed"] for p in spent)
  assert summary["cost"]["positions"].get("critic", {}) == (
      {k: sum(p[k] for p in spent) for k in ("computed", "real")} if spent else {})
  # The progress lines say it.
  lines = [l for l in done.stdout.splitlines() if l.startswith("step ")]
  assert any("critic unscored" in l for l in lines), lines
  assert all(" unmeasurable " in l for l in lines)


def test_past_its_limit_the_critic_stops_the_run_with_one_line(env_and_data, stub):
  workdir = env_and_data[0] / "faults_strict"
  # The critic loses about 8% of its cells in step 1 here: under the default 0.1.
  done = train(env_and_data, stub, workdir, "--config.evolver.max_unscored_share=0.05")
  assert done.returncode == 2, done.stderr[-3000:]
  err = [l for l in done.stderr.splitlines() if l.strip()]
  assert "Traceback" not in done.stderr
  assert len([l for l in err if l.startswith("error: ")]) == 1, err
  (line,) = [l for l in err if l.startswith("error: ")]
  assert line.startswith("error: critic, step 1: ")
  assert "evolver.max_unscored_share=0.05" in line and "(transport: " in line
  assert "last checkpoint (if any) is intact" in line
  # Stopped before step 1's checkpoint and row: nothing half-written to resume from.
  assert not os.path.exists(workdir / "metrics.jsonl") or rows(workdir) == []
  assert not (workdir / "checkpoints" / "1").exists()


# ---- the stop messages say where: learner step, held-out evaluation (units, no driver)


class _Down(TextClient):
  identity = "down"

  def _complete(self, chats, max_tokens):
    return [TransportError("connection refused") for _ in chats]


def _tasks():
  crits = (Criterion("c1", "Is clear", 1.0), Criterion("c2", "Is kind", 1.0))
  return tuple(Task(f"t{i}", "medical", (Message("user", f"q{i}"),), crits) for i in range(3))


def _learner(tasks):
  texts = lambda params, chats, sampling, key, j: types.SimpleNamespace(
      responses=tuple(("an answer",) * j for _ in chats))
  texts.generate_fn = lambda params, sampling, key, pad_multiple=0: (
      lambda prompts: ["an answer"] * len(prompts))
  return step_fns.Learner(train_tasks=tasks, texts=texts, judge=Judge(_Down(), use_checks=False),
                      train_step=None, logprob_fn=None, sampling=SamplingParams(),
                      tasks_per_step=2, num_samples=2, num_epochs=1, advantage="grpo",
                      eps_advantage=1e-6)


def test_the_learners_stop_names_the_step_and_what_is_left():
  tasks = _tasks()
  state = types.SimpleNamespace(params=None)
  with pytest.raises(JudgeError) as e:
    step_fns.rl_step(_learner(tasks), state, harness.from_tasks(tasks), 4, jax.random.key(0),
                 jax.random.key(1))
  msg = str(e.value)
  # 2 drawn tasks x 2 criteria x 2 samples, none with a verdict.
  assert msg.startswith("learner, step 5: judge down:max_tokens=128: 8 of 8 judged cells "
                        "(100%) have no verdict (transport: 8); first error: connection "
                        "refused. That is more than judge.max_unscored_share=0.1")
  assert msg.endswith(step_fns.STOPPED) and "\n" not in msg
  assert e.value.unscored.share == 1.0


@pytest.mark.parametrize("after,where", [(0, "held-out evaluation at the start"),
                                         (3, "held-out evaluation after step 3")])
def test_the_heldout_stop_names_the_evaluation(after, where):
  tasks = _tasks()
  with pytest.raises(JudgeError) as e:
    step_fns.evaluate(tasks, _learner(tasks), None, jax.random.key(0), after=after)
  msg = str(e.value)
  assert msg.startswith(f"{where}: judge down:max_tokens=128: 6 of 6 judged cells (100%) "
                        "have no verdict (transport: 6); first error: connection refused.")
  assert msg.endswith(step_fns.STOPPED) and "\n" not in msg
