"""`Prefetched` (evolver/prefetch.py): requests drawn ahead in one call answer the same
single-conversation calls once; anything else reaches the sampler. The step-level
equivalence through the real rollout sampler is in tests/evolver/test_evolver_policy.py."""

import dataclasses

import jax

from harnessrl_jax.data.schema import Message
from harnessrl_jax.evolver import Critic, Evolver, RuleAttributor, RuleProposer
from harnessrl_jax.evolver.prefetch import Prefetched
from harnessrl_jax.harness import from_tasks
from tests.evolver import test_evolver_fixtures as fx


class KeyedSampler:
  """Answers as the rollout sampler keys its rows: one key -> row r of the call uses
  fold_in(key, r); a key per conversation -> sample j of conversation p uses
  fold_in(key[p], j). An answer names its conversation and its row key's bits."""

  def __init__(self):
    self.calls = []

  def __call__(self, chats, key, num_samples):
    self.calls.append(len(chats))
    out = []
    for p, chat in enumerate(chats):
      rows = []
      for j in range(num_samples):
        k = (jax.random.fold_in(key[p], j) if key.shape
             else jax.random.fold_in(key, p * num_samples + j))
        rows.append(f"{chat[-1].content}/{jax.random.key_data(k).tolist()}")
      out.append(rows)
    return out


def chat(text):
  return (Message("user", text),)


def test_a_request_is_answered_once_and_other_calls_reach_the_sampler():
  sampler = KeyedSampler()
  k0, k1 = jax.random.key(0), jax.random.key(1)
  pre = Prefetched(sampler, [chat("a"), chat("b")], [k0, k1], 2)
  assert sampler.calls == [2] and (pre.requested, pre.used) == (2, 0)
  # Drawn ahead: what the call alone returns, without calling the sampler again.
  assert pre([chat("b")], k1, 2) == KeyedSampler()([chat("b")], k1, 2)
  assert sampler.calls == [2] and pre.used == 1
  # Asked again, another key, another J, several conversations: the sampler answers.
  pre([chat("b")], k1, 2)
  pre([chat("a")], k1, 2)
  pre([chat("a")], k0, 3)
  pre([chat("a"), chat("b")], k0, 2)
  assert sampler.calls == [2, 1, 1, 1, 2] and pre.used == 1
  # A raw uint32[2] key names the same request as its typed form.
  assert pre([chat("a")], jax.random.key_data(k0), 2) == KeyedSampler()([chat("a")], k0, 2)
  assert sampler.calls == [2, 1, 1, 1, 2] and pre.used == 2


def test_a_fixed_batch_repeats_the_last_request():
  sampler = KeyedSampler()
  k0, k1 = jax.random.key(0), jax.random.key(1)
  pre = Prefetched(sampler, [chat("a"), chat("b")], [k0, k1], 2, pad_to=4)
  assert sampler.calls == [4] and pre.requested == 2
  assert pre([chat("b")], k1, 2) == KeyedSampler()([chat("b")], k1, 2)
  pre([chat("b")], k1, 2)   # the filler copies answer nothing more
  assert sampler.calls == [4, 1] and pre.used == 1


def test_nothing_to_draw_ahead_calls_nothing():
  sampler = KeyedSampler()
  pre = Prefetched(sampler, [], [], 2)
  assert sampler.calls == [] and pre.requested == 0
  assert pre([chat("a")], jax.random.key(0), 2) == KeyedSampler()([chat("a")], jax.random.key(0), 2)
  assert sampler.calls == [1]


class _AsksAModel(RuleProposer):
  repeatable = False   # as the LLM proposer: asking it ahead would cost a request


def test_only_repeatable_roles_are_asked_ahead():
  cfg = fx.settings()
  critic = Critic(None, cfg)
  rule = Evolver(cfg, attributor=RuleAttributor(cfg), proposer=RuleProposer(cfg),
                 critic=critic)
  llm = Evolver(cfg, attributor=RuleAttributor(cfg), proposer=_AsksAModel(cfg), critic=critic)
  off = Evolver(fx.settings(prefetch_resamples=False), attributor=RuleAttributor(cfg),
                proposer=RuleProposer(cfg), critic=critic)
  assert (rule.prefetch, llm.prefetch, off.prefetch) == (True, False, False)


def test_the_step_is_the_same_with_a_keyed_sampler():
  """With answers that depend on the key as the engine's do, drawing ahead changes no
  record and no digest, and saves the calls of round 0."""
  # Three tasks with a blind criterion (the guidance route's), and one without.
  blind = [dataclasses.replace(fx.BLIND, id=f"t-blind-{i}",
                               prompt=(Message("user", f"Question {i}?"),)) for i in range(3)]
  tasks = [*blind, fx.SPURIOUS]
  h = from_tasks(tasks)
  judge = fx.judge(with_llm=False)
  groups = fx.record(tasks, h, [fx.BLIND_RESPONSES] * 3 + [fx.SPURIOUS_RESPONSES], judge)
  out = {}
  for prefetch in (False, True):
    cfg = fx.settings(prefetch_resamples=prefetch)
    sampler = KeyedSampler()
    ev = Evolver(cfg, attributor=RuleAttributor(cfg), proposer=RuleProposer(cfg),
                 critic=Critic(judge, cfg, num_samples=4))
    res = ev.step(h, groups, step=0, key=jax.random.key(5), memory=fx.new_memory(h),
                  resample=sampler)
    out[prefetch] = res, sampler.calls
  (seq, seq_calls), (pre, pre_calls) = out[False], out[True]
  assert [r.to_json() for r in pre.records] == [r.to_json() for r in seq.records]
  assert pre.digest == seq.digest
  rounds = [r.round for r in seq.records if r.route == "guidance" and r.candidate is not None]
  assert rounds.count(0) == 3 and seq_calls == [1] * len(rounds)
  # Every round-0 guess was right (one shared call, filled up to one row group per task);
  # later rounds are sampled as before.
  assert pre_calls == [len(groups)] + [1] * (len(rounds) - rounds.count(0))
