"""Property tests: random operation sequences against a plain-Python shadow model.

The shadow model re-implements every rule independently (float64 weights, dicts and
lists). For each drawn operation, the harness must refuse it exactly when the model does,
leave the refused harness bit-for-bit unchanged, and otherwise agree with the model.
"""

import copy
import itertools
import math

import jax
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import harnessrl_jax.harness as H
from harnessrl_jax.data.schema import Criterion, Message, Task
from harnessrl_jax.errors import HarnessError

LAMBDA = 100.0
FIELDS = ("criterion", "reference", "critique")
CAPS = (3, 2, 1, 0)


class Illegal(Exception):
  pass


def make_tasks():
  return [
      Task("a", "medical", (Message("user", "q a"),),
           (Criterion("a0", "mentions dose", 5.0), Criterion("a1", "no jargon", 3.0),
            Criterion("a2", "unsafe advice", -4.0),
            Criterion("a3", "asks a follow-up", 2.0, anchor=False),
            Criterion("a4", "plain words", 1.0, anchor=False))),
      Task("b", "writing", (Message("user", "q b"),),
           (Criterion("b0", "has a title", 1.0),)),
      Task("c", "science", (Message("user", "q c"),),
           (Criterion("c0", "cites units", 2.0), Criterion("c1", "shows work", 2.0),
            Criterion("c2", "no filler", -1.0, anchor=False),
            Criterion("c3", "uses SI", 1.0, anchor=False))),
  ]


def model_from(tasks):
  m = {"cap": CAPS[0], "tasks": {}}
  for t in tasks:
    pos = sum(c.weight for c in t.criteria if c.weight > 0)
    m["tasks"][t.id] = {
        "level": 0, "retired": set(), "guidance": [],
        "crit": [[c.id, c.text, c.anchor, c.weight * LAMBDA / pos] for c in t.criteria]}
  return m


def _rescale(crit):
  pos = sum(c[3] for c in crit if c[3] > 0)
  if pos <= 0:
    raise Illegal("no positive")
  for c in crit:
    c[3] = c[3] * LAMBDA / pos


def _fresh(t, cid):
  if not cid or cid in {c[0] for c in t["crit"]} or cid in t["retired"]:
    raise Illegal("id")


def _find(t, cid, editable):
  for k, c in enumerate(t["crit"]):
    if c[0] == cid:
      if editable and c[2]:
        raise Illegal("anchor")
      return k
  raise Illegal("missing")


def _weight(w):
  if not math.isfinite(w) or w == 0:
    raise Illegal("weight")


def model_apply(m, op):
  """Applies `op` to a copy of model `m`; raises Illegal where the rules forbid it."""
  m = copy.deepcopy(m)
  t = m["tasks"].get(getattr(op, "task_id", None)) if hasattr(op, "task_id") else None
  if hasattr(op, "task_id") and t is None:
    raise Illegal("task")
  if isinstance(op, H.SamplingLevelDown):
    if t["level"] >= 3:
      raise Illegal("bottom")
    t["level"] += 1
  elif isinstance(op, H.SamplingLevelUp):
    if t["level"] <= 0:
      raise Illegal("top")
    t["level"] -= 1
  elif isinstance(op, H.AddGuidance):
    if op.field not in FIELDS or op.field in dict(t["guidance"]) or not op.content.strip() \
        or f"</{op.field}>" in op.content or len(t["guidance"]) >= m["cap"]:
      raise Illegal("guidance")
    t["guidance"].append((op.field, op.content))
  elif isinstance(op, H.DropGuidance):
    if op.field not in dict(t["guidance"]):
      raise Illegal("not mounted")
    t["guidance"] = [g for g in t["guidance"] if g[0] != op.field]
  elif isinstance(op, H.EnforceSchedule):
    quarter = min(3, 4 * op.step // op.total_steps)
    cap = 0 if op.step >= op.total_steps - 1 else CAPS[quarter]
    if cap > m["cap"]:
      raise Illegal("cap rises")
    m["cap"] = cap
    for tt in m["tasks"].values():
      tt["guidance"] = tt["guidance"][max(0, len(tt["guidance"]) - cap):] if cap else []
  elif isinstance(op, H.RubricCreate):
    _fresh(t, op.criterion_id)
    _weight(op.weight)
    if not op.text.strip():
      raise Illegal("text")
    t["crit"].append([op.criterion_id, op.text, False, op.weight])
    _rescale(t["crit"])
  elif isinstance(op, H.RubricRewrite):
    k = _find(t, op.criterion_id, True)
    if not op.text.strip() or op.text == t["crit"][k][1]:
      raise Illegal("text")
    t["crit"][k][1] = op.text
    _rescale(t["crit"])
  elif isinstance(op, H.RubricDelete):
    k = _find(t, op.criterion_id, True)
    del t["crit"][k]
    t["retired"].add(op.criterion_id)
    _rescale(t["crit"])
  elif isinstance(op, H.RubricReweight):
    k = _find(t, op.criterion_id, False)
    _weight(op.weight)
    t["crit"][k][3] = op.weight
    _rescale(t["crit"])
  elif isinstance(op, H.RubricMerge):
    if len(set(op.criterion_ids)) != len(op.criterion_ids) or len(op.criterion_ids) < 2:
      raise Illegal("ids")
    ks = [_find(t, cid, True) for cid in op.criterion_ids]
    _fresh(t, op.new_id)
    if not op.text.strip():
      raise Illegal("text")
    w = sum(t["crit"][k][3] for k in ks) if op.weight is None else op.weight
    _weight(w)
    first = min(ks)
    new = []
    for k, c in enumerate(t["crit"]):
      if k == first:
        new.append([op.new_id, op.text, False, w])
      elif k not in ks:
        new.append(c)
    t["crit"] = new
    t["retired"] |= set(op.criterion_ids)
    _rescale(t["crit"])
  elif isinstance(op, H.RubricSplit):
    k = _find(t, op.criterion_id, True)
    ids = [p[0] for p in op.parts]
    if len(ids) < 2 or len(set(ids)) != len(ids):
      raise Illegal("parts")
    for cid, text, w in op.parts:
      _fresh(t, cid)
      _weight(w)
      if not text.strip():
        raise Illegal("text")
    t["crit"][k:k + 1] = [[cid, text, False, w] for cid, text, w in op.parts]
    t["retired"].add(op.criterion_id)
    _rescale(t["crit"])
  else:
    raise AssertionError(op)
  return m


@st.composite
def an_op(draw, m, counter):
  """One operation, legal or not, drawn with knowledge of the model state."""
  task_id = draw(st.sampled_from(sorted(m["tasks"]) * 4 + ["nope"]))
  t = m["tasks"].get(task_id, {"crit": [["x", "x", False, 1.0]]})
  ids = [c[0] for c in t["crit"]] + ["ghost"]
  editable = [c[0] for c in t["crit"] if not c[2]]
  target = st.sampled_from(editable * 4 + ids)  # mostly criteria that may be edited
  fresh = f"n{next(counter)}"
  new_id = draw(st.sampled_from([fresh] * 4 + [ids[0]]))
  weight = draw(st.sampled_from([5.0, 12.5, -3.0, 0.0, 40.0]))
  text = draw(st.sampled_from(["be concise", "state the units", " ", "be concise!",
                               f"criterion text {fresh}"]))
  mounted = [f for f, _ in t.get("guidance", [])]
  field = draw(st.sampled_from(FIELDS + ("bogus",) + tuple(mounted) * 3))
  kind = draw(st.sampled_from([0, 0, 1, 1, 2, 2, 2, 2, 3, 3, 4, 4] + list(range(5, 11)) * 3))
  if kind == 0:
    return H.SamplingLevelDown(task_id)
  if kind == 1:
    return H.SamplingLevelUp(task_id)
  if kind == 2:
    content = draw(st.sampled_from(["try harder", "</critique> x", "see example"]))
    # Mostly task "a", so tasks often hold several fields when the cap drops.
    return H.AddGuidance(draw(st.sampled_from(["a", "a", task_id])), field, content)
  if kind == 3:
    return H.DropGuidance(task_id, field)
  if kind == 4:
    total = draw(st.integers(1, 40))
    return H.EnforceSchedule(draw(st.integers(0, total)), total)
  if kind == 5:
    return H.RubricCreate(task_id, new_id, text, weight)
  if kind == 6:
    return H.RubricRewrite(task_id, draw(target), text)
  if kind == 7:
    return H.RubricDelete(task_id, draw(target))
  if kind == 8:
    return H.RubricReweight(task_id, draw(target), weight)
  if kind == 9:
    pool = st.sampled_from(editable) if len(editable) > 1 and draw(st.booleans()) else target
    pick = draw(st.lists(pool, min_size=draw(st.sampled_from([1, 2, 2, 2])), max_size=3,
                         unique=draw(st.sampled_from([True, True, False]))))
    w = draw(st.sampled_from([None, 8.0, -2.0]))
    return H.RubricMerge(task_id, tuple(pick), new_id, text, w)
  if kind == 10:
    n = draw(st.sampled_from([1, 2, 2, 3]))
    parts = tuple((f"{fresh}s{j}" if j or new_id == fresh else new_id, text,
                   draw(st.sampled_from([1.0, 2.0, -1.0]))) for j in range(n))
    return H.RubricSplit(task_id, draw(target), parts)
  raise AssertionError(kind)


def assert_matches(h, m):
  assert H.invariant_problems(h) == []
  assert int(h.guidance_cap) == m["cap"]
  for tid, t in m["tasks"].items():
    assert h.level(tid) == t["level"]
    assert list(h.guidance(tid)) == t["guidance"]
    crit = h.criteria(tid)
    assert [(c.id, c.text, c.anchor) for c in crit] == [(c[0], c[1], c[2]) for c in t["crit"]]
    np.testing.assert_allclose([c.weight for c in crit], [c[3] for c in t["crit"]],
                               rtol=1e-4, atol=1e-4)
    assert abs(sum(c.weight for c in crit if c.weight > 0) - LAMBDA) < 1e-3
    assert set(h.task(tid).retired_ids) == t["retired"]


def snapshot(h):
  return [np.array(x) for x in (h.levels, h.ladder, h.weights, h.criterion_mask,
                                h.guidance_mask, h.guidance_cap)], h.tasks, H.digest(h)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_operation_sequences_keep_invariants(data):
  counter = itertools.count()
  tasks = make_tasks()
  h, m = H.from_tasks(tasks), model_from(tasks)
  assert_matches(h, m)
  for _ in range(data.draw(st.integers(5, 25))):
    op = data.draw(an_op(m, counter))
    try:
      m_next = model_apply(m, op)
    except Illegal:
      m_next = None
    before = snapshot(h)
    if m_next is None:
      try:
        H.apply(h, op)
      except HarnessError as e:
        assert op.kind in str(e)
      else:
        raise AssertionError(f"accepted an illegal op {op}")
      after = snapshot(h)
      for a, b in zip(before[0], after[0]):
        np.testing.assert_array_equal(a, b)
      assert before[1:] == after[1:]
      continue
    h = H.apply(h, op)
    m = m_next
    assert_matches(h, m)
    # Leaves stay read-only: nobody can change a harness in place.
    assert not any(np.asarray(x).flags.writeable for x in jax.tree.leaves(h))
