"""Time index queries, donors, rubric sync and save/load of the whole memory."""

import os

import numpy as np
import pytest

import harnessrl_jax.harness as H
import harnessrl_jax.memory as M
from harnessrl_jax.data.schema import Criterion, Message, Task
from harnessrl_jax.errors import HarnessError
from tests.memory.test_memory_semantic import fake_embedder

IDS = ("good", "bad")       # "bad" is a penalty criterion: met = the bad behaviour
WEIGHTS = (75.0, -25.0)


def draw(step, good, bad, rewards, **kw):
  return M.Draw("t", step, IDS, WEIGHTS, np.array([good, bad]), rewards, **kw)


def test_history_reach_saturation_and_changes():
  ti = M.TimeIndex()
  ti.add(draw(0, [0, 0, -1], [1, 1, 1], [0.0, 0.1, 0.2], labels={"good": "blind"}))
  assert not ti.ever_reached("t", "good")
  assert not ti.ever_reached("t", "bad")     # every rollout did the bad thing
  ti.add(draw(3, [1, 0, 0], [0, 1, 0], [0.5, 0.1, 0.2]))
  ti.add(draw(5, [1, 1, -1], [0, 0, 0], [0.9, 0.8, 0.7],
              actions=[H.op_to_json(H.RubricReweight("t", "good", 10.0))],
              measurements=[{"delta": 4.2}]))
  ti.add(draw(9, [1, 1, 1], [0, 0, -1], [1.0, 1.0, 0.9]))
  assert ti.ever_reached("t", "good") and ti.ever_reached("t", "bad")
  h = ti.history("t", "good")
  assert h.steps.tolist() == [0, 3, 5, 9]
  np.testing.assert_allclose(h.satisfied_rate, [0.0, 1 / 3, 1.0, 1.0])
  assert h.labels == ("blind", None, None, None)
  # Penalty criterion: satisfied = NOT met.
  np.testing.assert_allclose(ti.history("t", "bad").satisfied_rate, [0.0, 2 / 3, 1.0, 1.0])
  assert ti.saturated_run("t", "good") == (2, 5)
  assert ti.saturated_run("t", "bad") == (2, 5)
  assert ti.last_change("t", "good") == 5 and ti.last_change("t", "bad") is None
  assert ti.recently_changed("t", "good", now=9, window=4)
  assert not ti.recently_changed("t", "good", now=10, window=4)
  assert ti.history("t", "nope").steps.size == 0 and ti.saturated_run("u", "x") == (0, None)
  with pytest.raises(HarnessError, match="step order"):
    ti.add(draw(8, [1, 1, 1], [0, 0, 0], [1.0, 1.0, 1.0]))
  with pytest.raises(HarnessError, match="labels"):
    draw(10, [1, 1, 1], [0, 0, 0], [1.0] * 3, labels={"good": "great"})
  with pytest.raises(HarnessError, match="shapes"):
    draw(10, [1, 1, 1], [0, 0, 0], [1.0] * 4)


def test_make_draw_marks_unscored_cells():
  d = M.make_draw("t", 1, IDS, WEIGHTS, scores=[[1, 0], [1, 1]],
                  scored=[[True, False], [True, True]], rewards=[0.5, 0.25])
  assert d.scores.tolist() == [[1, -1], [1, 1]]
  assert d.satisfied().tolist() == [[1, -1], [0, 0]]


def ex(text, reward, step):
  return M.Example(text, float(np.float32(reward)), step)  # rewards are stored as float32


def test_donors_are_best_satisfying_and_worst_violating():
  mem = M.Memory(M.memory_defaults(), fake_embedder())
  mem.add_draw(draw(0, [1, 0, 1], [0, 1, 0], [0.4, 0.1, 0.9]), ["r0", "r1", "r2"])
  assert mem.donors[("t", "good")] == (ex("r2", 0.9, 0), ex("r1", 0.1, 0))
  # Penalty: satisfying = not met -> best r2 (0.9); violating = met -> r1.
  assert mem.donors[("t", "bad")] == (ex("r2", 0.9, 0), ex("r1", 0.1, 0))
  mem.add_draw(draw(1, [1, 0, 0], [0, 0, 0], [0.95, 0.05, 0.9]), ["s0", "s1", "s2"])
  assert mem.donors[("t", "good")] == (ex("s0", 0.95, 1), ex("s1", 0.05, 1))
  # No violating response in draw 1 for "bad": its worst stays from draw 0.
  assert mem.donors[("t", "bad")] == (ex("s0", 0.95, 1), ex("r1", 0.1, 0))
  with pytest.raises(HarnessError, match="responses"):
    mem.add_draw(draw(2, [1, 0, 0], [0, 0, 0], [0.1] * 3), ["only one"])


def pool():
  return [Task("a", "medical", (Message("user", "q"),),
               (Criterion("a0", "state the dose in mg", 5.0),
                Criterion("a1", "recommend seeing a doctor", 2.0))),
          Task("b", "medical", (Message("user", "q"),),
               (Criterion("b0", "state the dose in mg please", 5.0),)),
          Task("c", "writing", (Message("user", "q"),),
               (Criterion("c0", "poem rhymes ABAB", 1.0),))]


def test_sync_rubrics_follows_the_harness_and_clears_stale_donors():
  h = H.from_tasks(pool())
  h = H.apply(h, H.RubricCreate("c", "n0", "mention the dose in mg", 1.0))
  mem = M.Memory(M.memory_defaults(), fake_embedder())
  assert mem.sync_rubrics(h) == 5
  assert mem.sync_rubrics(h) == 0
  near = mem.similar("a", "a0", eta=0.5)
  assert [(n.task_id, n.criterion_id) for n in near] == [("b", "b0"), ("c", "n0")]
  mem.add_draw(M.Draw("c", 0, ("c0", "n0"), (50.0, 50.0), [[1, 0], [1, 0]], [1.0, 0.0]),
               ["good poem", "bad poem"])
  assert mem.similar("a", "a0", eta=0.5)[1].best == ex("good poem", 1.0, 0)
  h2 = H.apply_all(h, [H.RubricRewrite("c", "n0", "rhyme scheme ABAB exactly"),
                       H.RubricReweight("a", "a1", 9.0)])
  assert mem.sync_rubrics(h2) == 1
  assert ("c", "n0") not in mem.donors and ("c", "c0") in mem.donors
  assert [(n.task_id, n.criterion_id) for n in mem.similar("a", "a0", eta=0.5)] == \
      [("b", "b0")]
  h3 = H.apply(h2, H.RubricDelete("c", "n0"))
  mem.sync_rubrics(h3)
  assert ("c", "n0") not in mem.semantic.keys() and len(mem.semantic) == 4


def test_memory_save_load_round_trip(tmp_path):
  cfg = M.memory_defaults()
  cfg.exact_max_size = 40  # make the saved index an HNSW graph
  cfg.approx_kind = "hnsw"
  emb = fake_embedder()
  rng = np.random.default_rng(0)
  words = ["dose", "mg", "doctor", "rhyme", "poem", "tone", "units", "cite", "safe", "brief"]
  tasks = [Task(f"t{i}", "science", (Message("user", "q"),), tuple(
      Criterion(f"c{j}", " ".join(rng.choice(words, 4)), float(rng.integers(1, 5)))
      for j in range(3))) for i in range(30)]
  h = H.from_tasks(tasks)
  mem = M.Memory(cfg, emb)
  mem.sync_rubrics(h)
  assert mem.semantic.kind == "hnsw"
  for step in range(3):
    for t in tasks[:10]:
      ids = tuple(c.id for c in h.criteria(t.id))
      scores = rng.integers(0, 2, (3, 4))
      mem.add_draw(M.Draw(t.id, step, ids, [c.weight for c in h.criteria(t.id)], scores,
                          rng.random(4).astype(np.float32), labels={"c0": "agree"},
                          actions=[H.op_to_json(H.SamplingLevelDown(t.id))],
                          measurements=[{"delta": float(step)}]),
                   [f"resp {step} {j}" for j in range(4)])
  path = tmp_path / "memory"
  mem.save(path)
  mem.save(path)  # overwriting is atomic and leaves no temporary directories behind
  assert sorted(os.listdir(tmp_path)) == ["memory"]
  back = M.Memory.load(path, cfg, emb)
  assert len(back.time) == 30 and back.donors == mem.donors
  for t in tasks:
    for c in ("c0", "c1", "c2"):
      assert back.similar(t.id, c, eta=0.3) == mem.similar(t.id, c, eta=0.3)
      a, b = back.time.history(t.id, c), mem.time.history(t.id, c)
      np.testing.assert_array_equal(a.satisfied_rate, b.satisfied_rate)
      assert a.labels == b.labels and back.time.last_change(t.id, c) == \
          mem.time.last_change(t.id, c)
  d0, d1 = back.time.draws("t3")[1], mem.time.draws("t3")[1]
  assert d0.to_json() == d1.to_json()
  with pytest.raises(HarnessError, match="not a saved memory"):
    M.Memory.load(tmp_path / "nothing", cfg, emb)
