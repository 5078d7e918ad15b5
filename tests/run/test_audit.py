"""`python -m harnessrl_jax.audit` on hand-built run directories (no model needed): a
history of real harness operations with evolver-like evidence, checkpoints that record the
harness and the chain head after some of them, and tampered copies (any field of any
record, deleted and moved lines, forgeries that recompute the hashes). The end-to-end audit of a real tiny run is in
test_train_resume.py."""

import json
import os

import numpy as np
import pytest

from harnessrl_jax import audit, harness
from harnessrl_jax.run.checkpoint import RunCheckpoints, record_config
from harnessrl_jax.harness.history import GENESIS, HistoryLog, apply_logged, record_hash
from harnessrl_jax.harness.ops import AddGuidance, RubricReweight, SamplingLevelDown
from harnessrl_jax.data.splits import load_split
from harnessrl_jax.run_files import HISTORY_HEAD
from repo_paths import REPO



def small_config(tmp_path):
  from configs.tiny import get_config  # pylint: disable=g-import-not-at-top
  c = get_config()
  src = os.path.join(REPO, "data/train.jsonl")
  dst = tmp_path / "train.jsonl"
  with open(src, encoding="utf-8") as f:
    dst.write_text("".join(f.readlines()[:5]))
  c.data.train = str(dst)
  return c


def save_ckpt(ck, step, h, n_records, head):
  tree = {"x": np.arange(3, dtype=np.float32) + step}
  ck.save(step, tree, {"step": step, "history_len": n_records,
                       "harness_digest": harness.digest(h), "harness": harness.canonical(h),
                       HISTORY_HEAD: head, "summary": {}})


def evidence(step):
  """A measurement like the evolver's: the attributor's label and the critic's evidence."""
  return {"candidate": "rubric", "route": "rubric", "criterion_id": "c0",
          "label": {"criterion_id": "c0", "label": "spurious", "confidence": 0.75,
                    "evidence": ["both responses score alike"]},
          "critic": {"delta": 0.5 + step, "band": [0.1, 0.9], "reasons": ["(i) sign: ok"]}}


@pytest.fixture
def run_dir(tmp_path):
  cfg = small_config(tmp_path)
  d = tmp_path / "run"
  record_config(cfg, str(d), resumed_at=None)
  tasks = load_split(cfg.data.train, (), field="train")
  h = harness.from_tasks(tasks, cfg.harness)
  log = HistoryLog(d / audit.HISTORY)
  t0, t1 = tasks[0], tasks[1]
  ck = RunCheckpoints(str(d), keep=5)
  h, _ = apply_logged(h, SamplingLevelDown(t0.id), step=0, log=log, measurement=evidence(0))
  save_ckpt(ck, 1, h, 1, log.head)
  c = t1.criteria[0]
  h, _ = apply_logged(h, RubricReweight(t1.id, c.id, float(c.weight) * 2 + 1), step=1, log=log,
                      measurement=evidence(1))
  h, _ = apply_logged(h, AddGuidance(t0.id, "critique", "Answer every part."), step=1,
                      log=log, measurement=evidence(2))
  save_ckpt(ck, 2, h, 3, log.head)
  ck.close()
  return d, h


def test_audit_passes_and_reports_the_final_digest(run_dir, capsys):
  d, h = run_dir
  out = audit.audit(str(d))
  assert out["records"] == 3 and out["checkpoints"] == [1, 2]
  assert out["digest"] == harness.digest(h)
  assert audit.main(["audit", str(d)]) == 0
  assert harness.digest(h) in capsys.readouterr().out


def rewrite_lines(path, fn, *, rechain=False):
  """Rewrites the history's records with `fn(list of objects)`; `rechain` recomputes every
  prev and hash afterwards, as a forger who knows the (public) hash definition would."""
  objs = fn([json.loads(l) for l in path.read_text(encoding="utf-8").splitlines()])
  prev = GENESIS
  for obj in objs if rechain else ():
    obj["prev"] = prev
    obj["hash"] = prev = record_hash(obj)
  path.write_text("".join(json.dumps(o) + "\n" for o in objs), encoding="utf-8")


def edit(obj, where):
  *parents, last = where
  for k in parents:
    obj = obj[k]
  if isinstance(obj[last], list):
    obj, last = obj[last], 0
  v = obj[last]
  obj[last] = v + 1 if isinstance(v, (int, float)) else v + "x"


FIELDS = [("step",), ("op", "task_id"), ("digest_before",), ("digest_after",),
          ("measurement", "route"), ("measurement", "label", "label"),
          ("measurement", "label", "confidence"), ("measurement", "label", "evidence"),
          ("measurement", "critic", "delta"), ("measurement", "critic", "band"), ("prev",),
          ("hash",)]


@pytest.mark.parametrize("where", FIELDS, ids=".".join)
@pytest.mark.parametrize("line", [1, 2, 3], ids=["first", "middle", "last"])
def test_editing_any_field_of_any_record_fails_naming_its_line(run_dir, capsys, where, line):
  d, _ = run_dir
  if where == ("op", "task_id") and line == 2:
    where = ("op", "criterion_id")   # the reweight's first text field
  def change(objs):
    edit(objs[line - 1], where)
    return objs
  rewrite_lines(d / audit.HISTORY, change)
  with pytest.raises(audit.AuditFailure, match=f"chain breaks at line {line}:"):
    audit.audit(str(d))
  assert audit.main(["audit", str(d)]) == 1
  assert f"{audit.HISTORY}:{line}: " in capsys.readouterr().err


@pytest.mark.parametrize("change, line", [
    (lambda o: o[1:], 1), (lambda o: o[:1] + o[2:], 2), (lambda o: [o[1], o[0], o[2]], 1),
    (lambda o: o[:2] + [o[1], o[2]], 3)], ids=["delete-first", "delete-middle", "swap",
                                                "repeat"])
def test_deleting_or_reordering_lines_fails_naming_the_first_broken_line(run_dir, change,
                                                                         line):
  d, _ = run_dir
  rewrite_lines(d / audit.HISTORY, change)
  with pytest.raises(audit.AuditFailure,
                     match=f"chain breaks at line {line}:.*deleted, inserted or moved"):
    audit.audit(str(d))


def test_lines_cut_from_the_end_fail_against_the_checkpoint(run_dir):
  d, _ = run_dir
  rewrite_lines(d / audit.HISTORY, lambda o: o[:2])   # the chain itself still holds
  with pytest.raises(audit.AuditFailure, match="checkpoint 2 counts 3 history records.*only 2"):
    audit.audit(str(d))


def test_a_rechained_forgery_fails_at_the_replay_or_the_checkpoint_head(run_dir):
  d, _ = run_dir
  path = d / audit.HISTORY
  good = path.read_text(encoding="utf-8")
  # The guidance text changed and every hash recomputed: the replay's digest catches it.
  rewrite_lines(path, lambda o: [*o[:2], {**o[2], "op": {**o[2]["op"], "content": "Be brief."}}],
                rechain=True)
  with pytest.raises(audit.AuditFailure, match="first divergent step 1.*digest_after"):
    audit.audit(str(d))
  # The critic's Delta of the last record changed and rechained: no digest covers it, the
  # head checkpoint 2 stored does, naming the lines after checkpoint 1's.
  path.write_text(good, encoding="utf-8")
  rewrite_lines(path, lambda o: [*o[:2], {**o[2], "measurement": {
      **o[2]["measurement"], "critic": {**o[2]["measurement"]["critic"], "delta": 9.0}}}],
                rechain=True)
  with pytest.raises(audit.AuditFailure, match=r"checkpoint 2: history_head .* lines 2\.\.3 "
                                               "were rewritten"):
    audit.audit(str(d))


def test_checkpoint_disagreeing_with_history_fails(run_dir, tmp_path):
  d, _ = run_dir
  # A checkpoint whose recorded harness is not the replay's after its record count.
  ck = RunCheckpoints(str(d), keep=5)
  tasks = load_split(str(tmp_path / "train.jsonl"), (), field="train")
  save_ckpt(ck, 3, harness.from_tasks(tasks), 3, audit.audit(str(d))["head"])
  ck.close()
  with pytest.raises(audit.AuditFailure, match="checkpoint 3"):
    audit.audit(str(d))


def test_checkpoint_with_another_head_fails(run_dir):
  d, h = run_dir
  ck = RunCheckpoints(str(d), keep=5)
  save_ckpt(ck, 3, h, 3, GENESIS)
  ck.close()
  # Checkpoint 2 holds the chain's head after the same 3 records: 3's metadata is wrong.
  with pytest.raises(audit.AuditFailure, match=r"checkpoint 3: history_head 000000000000 "
                                               r"!= the chain's .*metadata was changed \(checkpoint 2"):
    audit.audit(str(d))


def test_checkpoint_without_a_head_fails(run_dir):
  d, h = run_dir
  ck = RunCheckpoints(str(d), keep=5)
  ck.save(3, {"x": np.zeros(3, np.float32)}, {
      "step": 3, "history_len": 3, "harness_digest": harness.digest(h),
      "harness": harness.canonical(h), "summary": {}})
  ck.close()
  with pytest.raises(audit.AuditFailure, match="checkpoint 3 stores no history_head"):
    audit.audit(str(d))


def test_not_a_run_directory(tmp_path):
  assert audit.main(["audit", str(tmp_path)]) == 2
