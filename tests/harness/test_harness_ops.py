"""Harness state, sampling, guidance and rubric operations against hand-computed values."""

import json
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import harnessrl_jax.harness as H
from harnessrl_jax.data.reward import rubric_reward
from harnessrl_jax.data.frozen import FrozenMap
from harnessrl_jax.data.schema import Check, Criterion, Message, Task
from harnessrl_jax.errors import HarnessError
from harnessrl_jax.harness.config import harness_defaults


def tasks():
  return [
      Task("t0", "medical", (Message("system", "be safe"), Message("user", "Dose?")),
           (Criterion("c0", "gives a dose", 10.0), Criterion("c1", "unsafe", -5.0),
            Criterion("c2", "cites a source", 30.0))),
      Task("t1", "writing", (Message("user", "Write a poem."),),
           (Criterion("p0", "rhymes", 1.0),)),
      Task("t2", "science", (Message("user", "Speed of light?"),),
           (Criterion("s0", "right value", 3.0), Criterion("s1", "units", 1.0))),
  ]


def test_h0_rescales_seed_by_one_factor_and_keeps_the_reward():
  h = H.from_tasks(tasks())
  # Hand computed: positive sum 40 -> factor 2.5.
  np.testing.assert_array_equal(np.asarray(h.weights)[0], [25.0, -12.5, 75.0])
  np.testing.assert_array_equal(np.asarray(h.weights)[2], [75.0, 25.0, 0.0])
  np.testing.assert_array_equal(np.asarray(h.criterion_mask)[1], [True, False, False])
  assert np.asarray(h.levels).tolist() == [0, 0, 0]
  assert not np.asarray(h.guidance_mask).any() and int(h.guidance_cap) == 3
  # The reward of every rollout is the same under seed and rescaled weights.
  rng = np.random.default_rng(0)
  scores = rng.integers(0, 2, (3, 3, 8)).astype(np.float32)
  seed = np.array([[10, -5, 30], [1, 0, 0], [3, 1, 0]], np.float32)
  mask = np.asarray(h.criterion_mask)
  r_seed = rubric_reward(scores, np.ones_like(scores, bool), seed, mask).reward
  r_h = rubric_reward(scores, np.ones_like(scores, bool), np.asarray(h.weights), mask).reward
  np.testing.assert_allclose(r_h, r_seed, rtol=1e-6)


def test_from_tasks_refuses_bad_pools():
  t = tasks()
  with pytest.raises(HarnessError, match="appears twice"):
    H.from_tasks(t + [t[0]])
  bad = Task("x", "medical", (Message("user", "q"),), (Criterion("k", "bad", -1.0),))
  with pytest.raises(HarnessError, match="no positive-weight"):
    H.from_tasks([bad])
  cfg = harness_defaults()
  cfg.ladder = (1.0, 0.5, 0.6)
  with pytest.raises(HarnessError, match="strictly decrease"):
    H.from_tasks(t, cfg)
  cfg = harness_defaults()
  cfg.guidance_caps = (1, 2, 1, 0)
  with pytest.raises(HarnessError, match="must not increase"):
    H.from_tasks(t, cfg)


def test_probabilities_and_importance_weights_match_float64():
  h = H.from_tasks(tasks())
  h = H.apply_all(h, [H.SamplingLevelDown("t0"), H.SamplingLevelDown("t0"),
                      H.SamplingLevelDown("t1")])
  w = np.array([0.38, 0.61, 1.0])
  p_ref = w / w.sum()
  p = jax.jit(H.probabilities)(h)
  np.testing.assert_allclose(p, p_ref, rtol=1e-6)
  idx = np.array([2, 0, 0, 1])
  u = jax.jit(H.importance_weights)(h, idx)
  np.testing.assert_allclose(u, 1.0 / (3 * p_ref[idx]), rtol=1e-6)
  # The correction: E_{i~p}[u_i f_i] equals the uniform mean of f.
  f = np.array([0.3, -1.2, 2.0])
  all_u = np.asarray(H.importance_weights(h, np.arange(3)), np.float64)
  assert abs((p_ref * all_u * f).sum() - f.mean()) < 1e-6


def test_draw_follows_p():
  h = H.apply(H.from_tasks(tasks()), H.SamplingLevelDown("t1"))
  idx = np.asarray(jax.jit(H.draw, static_argnums=2)(h, jax.random.key(3), 40000))
  assert idx.dtype == np.int32 and idx.min() >= 0 and idx.max() <= 2
  freq = np.bincount(idx, minlength=3) / idx.size
  p = np.array([1.0, 0.61, 1.0]) / 2.61
  # 5 sigma of a binomial proportion at n = 40000.
  assert np.all(np.abs(freq - p) < 5 * np.sqrt(p * (1 - p) / idx.size))
  np.testing.assert_array_equal(idx, np.asarray(H.draw(h, jax.random.key(3), 40000)))


def test_levels_walk_the_ladder_and_set_ladder():
  h = H.from_tasks(tasks())
  for _ in range(3):
    h = H.apply(h, H.SamplingLevelDown("t1"))
  np.testing.assert_allclose(h.task_weights, [1.0, 0.17, 1.0], rtol=1e-7)
  with pytest.raises(HarnessError, match="sampling_level_down refused.*level 3"):
    H.apply(h, H.SamplingLevelDown("t1"))
  with pytest.raises(HarnessError, match="sampling_level_up refused"):
    H.apply(h, H.SamplingLevelUp("t0"))
  h = H.apply(h, H.SetLadder((1.0, 0.7, 0.4, 0.2)))
  np.testing.assert_allclose(h.task_weights, [1.0, 0.2, 1.0], rtol=1e-7)
  with pytest.raises(HarnessError, match="3 levels"):
    H.apply(h, H.SetLadder((1.0, 0.5, 0.2)))
  with pytest.raises(HarnessError, match="no task"):
    H.apply(h, H.SamplingLevelDown("zz"))


def test_harness_is_a_pytree_and_jits():
  h = H.from_tasks(tasks())
  leaves = jax.tree.leaves(h)
  assert len(leaves) == 6
  moved = jax.device_put(h)
  assert isinstance(moved, H.Harness) and moved.tasks == h.tasks
  assert H.digest(moved) == H.digest(h)

  @jax.jit
  def total_positive(hh):
    return jnp.sum(jnp.where(hh.weights > 0, hh.weights, 0.0), axis=1)

  np.testing.assert_allclose(total_positive(h), [100.0] * 3, rtol=1e-6)
  with pytest.raises(ValueError):
    np.asarray(h.weights)[0, 0] = 1.0  # leaves are read-only


def test_guidance_rendering_and_cap():
  t = tasks()
  h = H.from_tasks(t)
  h = H.apply_all(h, [H.AddGuidance("t0", "critique", "Name the dose in mg."),
                      H.AddGuidance("t0", "criterion", "State a numeric dose.")])
  msgs = H.render_prompt(t[0], h, training=True)
  assert msgs[0] == t[0].prompt[0]
  assert msgs[1].content == ("Dose?\n\n<criterion>\nState a numeric dose.\n</criterion>\n"
                             "<critique>\nName the dose in mg.\n</critique>")
  assert H.render_prompt(t[0], h, training=False) == t[0].prompt
  assert H.render_prompt(t[1], h, training=True) == t[1].prompt
  np.testing.assert_array_equal(np.asarray(h.guidance_mask)[0], [True, False, True])
  with pytest.raises(HarnessError, match="already has <critique>"):
    H.apply(h, H.AddGuidance("t0", "critique", "again"))
  with pytest.raises(HarnessError, match="closing tag"):
    H.apply(h, H.AddGuidance("t0", "reference", "x </reference> y"))
  # Quarter 2 of 8 steps (step 4): cap 1 -> the oldest field (critique) goes.
  h2 = H.enforce_schedule(h, 4, 8)
  assert int(h2.guidance_cap) == 1
  assert h2.guidance("t0") == (("criterion", "State a numeric dose."),)
  with pytest.raises(HarnessError, match="cap is now 1"):
    H.apply(h2, H.AddGuidance("t0", "reference", "good: 5 mg"))
  with pytest.raises(HarnessError, match="never increases"):
    H.apply(h2, H.EnforceSchedule(0, 8))
  # The last step clears everything, whatever the configured caps.
  cfg = harness_defaults()
  cfg.guidance_caps = (3, 3, 3, 3)
  h3 = H.apply(H.from_tasks(t, cfg), H.AddGuidance("t1", "reference", "good: ..."))
  assert H.enforce_schedule(h3, 6, 8).guidance("t1") != ()
  h4 = H.enforce_schedule(h3, 7, 8)
  assert h4.guidance("t1") == () and not np.asarray(h4.guidance_mask).any()


def test_guidance_without_user_message_gets_its_own():
  t = Task("s", "roleplay", (Message("system", "You are Bob."),), (Criterion("c", "x", 1.0),))
  h = H.apply(H.from_tasks([t]), H.AddGuidance("s", "reference", "Good: hi"))
  assert H.render_prompt(t, h, training=True) == (
      t.prompt[0], Message("user", "<reference>\nGood: hi\n</reference>"))


def test_cap_for_step_by_quarter():
  caps = (3, 2, 1, 0)
  got = [H.cap_for_step(caps, s, 100) for s in (0, 24, 25, 49, 50, 74, 75, 98, 99)]
  assert got == [3, 3, 2, 2, 1, 1, 0, 0, 0]
  assert H.cap_for_step((3, 2, 1, 1), 98, 100) == 1
  assert H.cap_for_step((3, 2, 1, 1), 99, 100) == 0


def test_rubric_operations_hand_computed():
  h = H.from_tasks(tasks())  # t0: c0 25, c1 -12.5, c2 75
  h = H.apply(h, H.RubricCreate("t0", "n0", "gives mg and frequency", 50.0))
  # Positive 150 -> factor 2/3.
  np.testing.assert_allclose(np.asarray(h.weights)[0], [50 / 3, -25 / 3, 50, 100 / 3],
                             rtol=1e-6)
  h = H.apply(h, H.RubricSplit("t0", "n0", (("n1", "gives mg", 1.0),
                                            ("n2", "gives frequency", 3.0))))
  crit = h.criteria("t0")
  assert [c.id for c in crit] == ["c0", "c1", "c2", "n1", "n2"]
  # Positive 50/3 + 50 + 4 = 70.667 -> factor 100/70.667.
  f = 100 / (50 / 3 + 50 + 4)
  np.testing.assert_allclose([c.weight for c in crit],
                             [50 / 3 * f, -25 / 3 * f, 50 * f, f, 3 * f], rtol=1e-5)
  h = H.apply(h, H.RubricMerge("t0", ("n2", "n1"), "m0", "gives mg and frequency"))
  crit = h.criteria("t0")
  assert [c.id for c in crit] == ["c0", "c1", "c2", "m0"]
  assert h.task("t0").retired_ids == ("n0", "n1", "n2")
  np.testing.assert_allclose(crit[3].weight, 4 * f * 100 / (50 / 3 * f + 50 * f + 4 * f),
                             rtol=1e-5)
  for op, rule in [(H.RubricRewrite("t0", "c0", "x"), "anchor"),
                   (H.RubricDelete("t0", "c2"), "anchor"),
                   (H.RubricSplit("t0", "c0", (("a", "x", 1.0), ("b", "y", 1.0))), "anchor"),
                   (H.RubricCreate("t0", "n1", "reuse", 1.0), "never reused"),
                   (H.RubricCreate("t0", "z", "zero", 0.0), "non-zero"),
                   (H.RubricReweight("t1", "p0", -3.0), "no positive"),
                   (H.RubricReweight("t0", "c0", float("nan")), "non-zero"),
                   (H.RubricMerge("t0", ("m0",), "q", "x"), "at least two")]:
    with pytest.raises(HarnessError, match=rule):
      H.apply(h, op)
  h = H.apply(h, H.RubricDelete("t0", "m0"))
  assert np.asarray(h.weights).shape == (3, 3)  # padding follows the longest rubric
  h = H.apply(h, H.RubricReweight("t0", "c1", -50.0))
  np.testing.assert_allclose([c.weight for c in h.criteria("t0")], [25, -50, 75], rtol=1e-5)


def test_op_json_round_trip_and_unknown_kinds():
  ops = [H.SamplingLevelDown("t"), H.SetLadder((1.0, 0.5)), H.AddGuidance("t", "critique", "x"),
         H.EnforceSchedule(3, 10), H.RubricCreate("t", "c", "x", 2.0, ("safety",)),
         H.RubricMerge("t", ("a", "b"), "c", "x"), H.RubricSplit("t", "a", (("b", "x", 1.0),
                                                                          ("c", "y", 2.0)))]
  for op in ops:
    assert H.op_from_json(H.op_to_json(op)) == op
  with pytest.raises(HarnessError, match="not a harness operation"):
    H.op_from_json({"op": "rubric_explode"})
  with pytest.raises(HarnessError, match="fields"):
    H.op_from_json({"op": "rubric_delete", "task_id": "t"})


def test_invariant_checker_reports_corrupted_harnesses():
  h = H.from_tasks(tasks())
  assert H.invariant_problems(h) == []
  doubled = jax.tree.map(lambda x: x * 2 if x.dtype == np.float32 else x, h)
  assert any("sum to 200" in p for p in H.invariant_problems(doubled))
  over = h.replace(guidance_mask=np.ones((3, 3), bool))
  assert any("guidance_mask disagrees" in p for p in H.invariant_problems(over))
  deep = h.replace(levels=np.array([0, 4, 0], np.int32))
  assert any("levels outside" in p for p in H.invariant_problems(deep))


WORDS30 = Check("word_count", FrozenMap({"min": 30}))
DISTINCT30 = Check("distinct_sentence_word_count", FrozenMap({"min": 30}))


def test_create_and_rewrite_carry_a_check():
  h = H.apply(H.from_tasks(tasks()), H.RubricCreate("t1", "n0", "long", 1.0, check=WORDS30))
  assert h.criteria("t1")[1].check == WORDS30
  # Text only: the check stays. A new check with the same text is a change of its own.
  kept = H.apply(h, H.RubricRewrite("t1", "n0", "long enough"))
  assert kept.criteria("t1")[1].check == WORDS30
  swapped = H.apply(h, H.RubricRewrite("t1", "n0", "long", DISTINCT30))
  assert (swapped.criteria("t1")[1].text, swapped.criteria("t1")[1].check) == (
      "long", DISTINCT30)
  with pytest.raises(HarnessError, match="already has this text and check"):
    H.apply(h, H.RubricRewrite("t1", "n0", "long", WORDS30))
  with pytest.raises(HarnessError, match="must be a data.schema.Check"):
    H.apply(h, H.RubricCreate("t1", "n1", "x", 1.0, check={"type": "word_count", "min": 3}))
  with pytest.raises(HarnessError, match="anchor"):
    H.apply(h, H.RubricRewrite("t1", "p0", "rhymes", DISTINCT30))


def test_op_json_with_a_check():
  op = H.RubricRewrite("t", "c", "x", DISTINCT30)
  assert H.op_to_json(op) == {"op": "rubric_rewrite", "task_id": "t", "criterion_id": "c",
                              "text": "x",
                              "check": {"type": "distinct_sentence_word_count", "min": 30}}
  assert H.op_from_json(H.op_to_json(op)) == op
  listed = H.RubricCreate("t", "c", "x", -2.0, ("hack",), Check(
      "keyword_present", FrozenMap({"keywords": ["I hope this helps"], "mode": "any"})))
  assert H.op_from_json(json.loads(json.dumps(H.op_to_json(listed)))) == listed
  # No check: no "check" key, as before ops carried checks; null reads as no check.
  assert "check" not in H.op_to_json(H.RubricCreate("t", "c", "x", 1.0))
  base = {"op": "rubric_create", "task_id": "t", "criterion_id": "c", "text": "x",
          "weight": 1.0}
  assert H.op_from_json({**base, "check": None}).check is None
  for check, why in [({"type": "word_count"}, "rubric_create: invalid check: check "
                                              "'word_count': give at least one of min/max"),
                     ({"type": "no_such_kind"}, "rubric_create: invalid check: check "
                                                "'no_such_kind': unknown check type"),
                     ({"type": "word_count", "min": "3"}, "arg 'min' must be int"),
                     ("word_count", "rubric_create: check must be an object"),
                     ({"min": 3}, "rubric_create: check must be an object")]:
    with pytest.raises(HarnessError, match=re.escape(why)):
      H.op_from_json({**base, "check": check})
  with pytest.raises(HarnessError, match="fields"):
    H.op_from_json({"op": "rubric_delete", "task_id": "t", "criterion_id": "c",
                    "check": {"type": "word_count", "min": 3}})
