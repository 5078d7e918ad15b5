"""`python -m harnessrl_jax.audit` on hand-built run directories (no model needed): a
history of real harness operations, checkpoints that record the harness after some of
them, and tampered copies. The end-to-end audit of a real tiny run is in
test_train_resume.py."""

import json
import os

import numpy as np
import pytest

from harnessrl_jax import audit, harness
from harnessrl_jax.checkpoint import RunCheckpoints, guard_config
from harnessrl_jax.harness.history import HistoryLog, apply_logged
from harnessrl_jax.harness.ops import AddGuidance, RubricReweight, SamplingLevelDown
from harnessrl_jax.data.splits import load_split

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def small_config(tmp_path):
  from configs.tiny import get_config  # pylint: disable=g-import-not-at-top
  c = get_config()
  src = os.path.join(REPO, "data/train.jsonl")
  dst = tmp_path / "train.jsonl"
  with open(src, encoding="utf-8") as f:
    dst.write_text("".join(f.readlines()[:5]))
  c.data.train = str(dst)
  return c


def save_ckpt(ck, step, h, n_records):
  tree = {"x": np.arange(3, dtype=np.float32) + step}
  ck.save(step, tree, {"step": step, "history_len": n_records,
                       "harness_digest": harness.digest(h), "harness": harness.canonical(h),
                       "summary": {}})


@pytest.fixture
def run_dir(tmp_path):
  cfg = small_config(tmp_path)
  d = tmp_path / "run"
  guard_config(cfg, str(d))
  tasks = load_split(cfg.data.train, (), field="train")
  h = harness.from_tasks(tasks, cfg.harness)
  log = HistoryLog(d / audit.HISTORY)
  t0, t1 = tasks[0], tasks[1]
  ck = RunCheckpoints(str(d), keep=5)
  h, _ = apply_logged(h, SamplingLevelDown(t0.id), step=0, log=log)
  save_ckpt(ck, 1, h, 1)
  c = t1.criteria[0]
  h, _ = apply_logged(h, RubricReweight(t1.id, c.id, float(c.weight) * 2 + 1), step=1, log=log)
  h, _ = apply_logged(h, AddGuidance(t0.id, "critique", "Answer every part."), step=1,
                      log=log)
  save_ckpt(ck, 2, h, 3)
  ck.close()
  return d, h


def test_audit_passes_and_reports_the_final_digest(run_dir, capsys):
  d, h = run_dir
  out = audit.audit(str(d))
  assert out["records"] == 3 and out["checkpoints"] == [1, 2]
  assert out["digest"] == harness.digest(h)
  assert audit.main(["audit", str(d)]) == 0
  assert harness.digest(h) in capsys.readouterr().out


def rewrite_line(path, n, fn):
  lines = path.read_text().splitlines()
  obj = json.loads(lines[n])
  fn(obj)
  lines[n] = json.dumps(obj)
  path.write_text("\n".join(lines) + "\n")


def test_tampered_operation_fails_at_its_step(run_dir, capsys):
  d, _ = run_dir
  # Step 1's guidance text changed: the log still parses and applies, the digest does not.
  rewrite_line(d / audit.HISTORY, 2, lambda o: o["op"].update(content="Be brief."))
  with pytest.raises(audit.AuditFailure, match="first divergent step 1"):
    audit.audit(str(d))
  assert audit.main(["audit", str(d)]) == 1
  assert "first divergent step 1" in capsys.readouterr().err


def test_deleted_record_fails_at_the_next_step(run_dir):
  d, _ = run_dir
  path = d / audit.HISTORY
  lines = path.read_text().splitlines()
  path.write_text("\n".join(lines[1:]) + "\n")   # step 0's record removed
  with pytest.raises(audit.AuditFailure, match="first divergent step 1.*digest_before"):
    audit.audit(str(d))


def test_checkpoint_disagreeing_with_history_fails(run_dir, tmp_path):
  d, h = run_dir
  # A checkpoint whose recorded harness is not the replay's after its record count.
  ck = RunCheckpoints(str(d), keep=5)
  tasks = load_split(str(tmp_path / "train.jsonl"), (), field="train")
  save_ckpt(ck, 3, harness.from_tasks(tasks), 3)
  ck.close()
  with pytest.raises(audit.AuditFailure, match="checkpoint 3"):
    audit.audit(str(d))


def test_not_a_run_directory(tmp_path):
  assert audit.main(["audit", str(tmp_path)]) == 2
