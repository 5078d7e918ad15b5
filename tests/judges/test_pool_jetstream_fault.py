"""The judge endpoint pool under a real fault: two real JetStream judge servers (`python -m
harnessrl_jax.serve --model=tiny`, separate processes on loopback) judge a two-step tiny
training run through `judge.endpoints`, and one of them is SIGKILLed while the first step's
learner grading is under way. The run finishes with its summary.json; no cell of the learner,
the critic or the held-out evaluations is unscored (none lost, none defaulted: the judge
never defaults a cell, it counts it unscored); every metrics row carries the pool's health,
which shows the killed server out (breaker open, transport failures) and the survivor up;
and the rows' moved counters say how many requests (cells) the survivor took over.

The verdicts of a random tiny model parse because our server decodes each answer under the
verdict's JSON schema (the client sends it with the request). The kill is deterministic: the
killed server's answers are counted in the trainer's process, and the SIGKILL goes out right
after its KILL_AFTER-th answer, which the held-out evaluation at start cannot reach (it has
HELDOUT_CELLS requests in all), while the first step's grading sends it more than that."""

import json
import os
import signal
import threading
import time

import pytest

# The serving extras (requirements-serving.txt and google-jetstream) are optional.
pytest.importorskip("jetstream", reason="JetStream is not installed: the serving extras "
                    "(requirements-serving.txt, google-jetstream --no-deps)")

# pylint: disable=wrong-import-position
from harnessrl_jax import run_files, train
from harnessrl_jax.judges.jetstream_client import JetStreamClient
from harnessrl_jax.judges.pool import PoolClient
from harnessrl_jax.models.tokenizer import tiny_prompt_builder
from tests.run.test_configs import load
from tests.serving.test_serving_jetstream import REPO, serve_process, wait_until_up
# pylint: enable=wrong-import-position

PREFILL = 2048     # judge prompts of the tiny byte-level tokenizer stay under it
CRITERIA = 3       # per task: few cells keep the run light
HELDOUT_CELLS = CRITERIA   # the held-out evaluation: one task, one greedy answer
KILL_AFTER = HELDOUT_CELLS + 2
IN_FLIGHT = 2      # judge.pool.max_in_flight and each server's decode slots


def small_data(root):
  """Two training tasks and one held-out task of the bundled data, each cut to CRITERIA
  criteria."""
  for src, n in (("train", 2), ("heldout", 1)):
    with open(os.path.join(REPO, f"data/{src}.jsonl"), encoding="utf-8") as f:
      tasks = [json.loads(line) for line in f.readlines()[:n]]
    for t in tasks:
      t["criteria"] = t["criteria"][:CRITERIA]
      assert any(c["weight"] > 0 for c in t["criteria"])
    (root / f"{src}.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
  return root


@pytest.fixture(name="two_servers")
def fixture_two_servers(tmp_path):
  """[(address, process, log path)] of two tiny-model servers, both up; each is
  terminated at the end unless it is dead already."""
  flags = ["--model=tiny", f"--max_prefill_length={PREFILL}", "--max_decode_length=64",
           f"--max_concurrent_decodes={IN_FLIGHT}"]
  logs = [str(tmp_path / f"server{i}.log") for i in range(2)]
  with serve_process(flags, logs[0]) as (a0, p0), serve_process(flags, logs[1]) as (a1, p1):
    servers = [(a0, p0, logs[0]), (a1, p1, logs[1])]
    for address, proc, log in servers:   # started side by side, then waited for
      probe = JetStreamClient(address, tiny_prompt_builder())
      try:
        wait_until_up(probe, proc, log, timeout_s=180)
      finally:
        probe.close()
    yield servers


def test_a_server_killed_mid_run_loses_no_cell(two_servers, tmp_path, monkeypatch):
  (victim, victim_proc, _), (survivor, _, _) = two_servers
  data = small_data(tmp_path)
  c = load("tiny")
  c.data.train, c.data.heldout = str(data / "train.jsonl"), str(data / "heldout.jsonl")
  c.train.steps = 2
  c.train.eval_every = 0      # held-out evaluations at start and after the last step only
  c.train.eval_tasks = 1
  c.evolver.rounds = 1        # one critic round: its grading, if any, shares the pool
  c.judge.backend = "jetstream"
  c.judge.endpoints = (victim, survivor)
  c.judge.jetstream.max_prompt_tokens = PREFILL
  c.judge.max_new_tokens = 64   # the verdict schema's shortest answer is 39 byte tokens
  c.judge.timeout_s = 120.0
  c.judge.backoff_s = 0.05
  c.judge.pool.max_in_flight = IN_FLIGHT
  c.judge.pool.failure_threshold = 2
  c.judge.pool.cooldown_s = 3600.0   # out for the rest of the run: no probe revives it

  # SIGKILL the victim's process right after its KILL_AFTER-th answer, from the pool's
  # worker thread that got it: the other requests it holds then fail in transport.
  decode_ids = JetStreamClient.decode_ids
  lock, killed = threading.Lock(), threading.Event()
  seen = {"victim_answers": 0, "pool": None}

  def counting_decode_ids(self, token_ids, max_tokens):
    out = decode_ids(self, token_ids, max_tokens)
    if self.address == victim:
      with lock:
        seen["victim_answers"] += 1
        if seen["victim_answers"] == KILL_AFTER:
          os.kill(victim_proc.pid, signal.SIGKILL)
          victim_proc.wait()
          killed.set()
    return out

  monkeypatch.setattr(JetStreamClient, "decode_ids", counting_decode_ids)
  # The run's pool, kept for its counters after the run (train.run closes nothing of it).
  init = PoolClient.__init__

  def keeping_init(self, *args, **kwargs):
    init(self, *args, **kwargs)
    seen["pool"] = self

  monkeypatch.setattr(PoolClient, "__init__", keeping_init)

  t0 = time.time()
  summary = train.run(c, str(tmp_path / "run"))
  wall = time.time() - t0
  run_dir = tmp_path / "run"
  rows = [json.loads(line) for line in (run_dir / run_files.METRICS).read_text().splitlines()]
  stats = seen["pool"].stats()
  print(f"\nrun with a server killed mid-run: {wall:.0f} s; pool {stats}")

  # The kill was real, and mid-run: the victim's process is gone (SIGKILL), and it fell
  # during the first step (its row already shows the victim out).
  assert killed.is_set() and victim_proc.returncode == -signal.SIGKILL
  # The run finished.
  assert summary["steps"] == 2 and len(rows) == 2
  assert json.loads((run_dir / run_files.SUMMARY).read_text())["steps"] == 2
  # No cell lost or defaulted: the learner's, the critic's and the held-out evaluations'
  # unscored records are all empty, and the learner judged every cell of its steps.
  for row in rows:
    assert row[run_files.UNSCORED][run_files.COUNT] == 0, row[run_files.UNSCORED]
    assert row[run_files.UNSCORED][run_files.CELLS] == 2 * c.rollout.num_samples * CRITERIA
    assert row[run_files.CRITIC_UNSCORED][run_files.COUNT] == 0, row[run_files.CRITIC_UNSCORED]
  for who in (run_files.LEARNER, run_files.CRITIC):
    assert summary[run_files.UNSCORED][who][run_files.COUNT] == 0, summary[run_files.UNSCORED]
  for evaluation in (summary[run_files.HELDOUT_START], summary[run_files.HELDOUT_END]):
    assert evaluation[run_files.UNSCORED][run_files.COUNT] == 0
  # The pool's health, as each metrics row logs it: the victim out from step 1 on, the
  # survivor up and never failing.
  first, last = (row[run_files.ENDPOINTS] for row in (rows[0], rows[-1]))
  assert first[victim]["state"] == "open" and first[victim]["opened"] == 1
  assert first[victim]["transport_failures"] >= 1
  assert last[victim] == stats[victim]   # out since: not one request more
  assert last[survivor]["state"] == "closed" and last[survivor]["transport_failures"] == 0
  # The victim answered its KILL_AFTER (and any it sent as it died), nothing after.
  assert last[victim]["successes"] >= KILL_AFTER
  assert last[victim]["successes"] == seen["victim_answers"]
  # How many moved: every request the victim failed was answered by the survivor.
  moved = last[survivor]["moved_in"]
  assert moved == last[victim]["moved_out"] == last[victim]["transport_failures"] >= 1
  assert first[survivor]["moved_in"] >= 1 and last[victim]["moved_in"] == 0
  print(f"cells moved to {survivor}: {moved}")
