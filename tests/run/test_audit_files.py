"""The audit covers every record file of a run directory (issue 45): a run directory
written through the real writers (record_config, HistoryLog, MetricsWriter, the one append
helper, checkpoints pinned by the records ledger, summary.json) with records before and
after its last checkpoint; an edit, insertion, deletion, reorder or truncation of the first
or last record of each file fails the audit naming the file and the record; a kill's
cut-short tail is reported as a crash; under an audit key a full rewrite of every file,
the ledger and every head fails, while without one it passes (the documented limit). The
one list of workdir files agrees with train.py's docstring and docs/operational.md. The
end-to-end audit of a real tiny run (and resume after a kill) is in test_train_resume.py."""

import glob
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

from harnessrl_jax import audit, harness, run_files as rf, run_ledger as rl
from harnessrl_jax.data.splits import load_split
from harnessrl_jax.harness.history import HistoryLog, apply_logged
from harnessrl_jax.harness.ops import AddGuidance, SamplingLevelDown
from harnessrl_jax.run.checkpoint import RunCheckpoints, record_config
from harnessrl_jax.run.metrics import MetricsWriter
from repo_paths import REPO
from tests.run.test_audit import evidence, small_config

KEY = b"k" * 32


def build_run(tmp_path, key=None):
  """A three-step run (checkpoints after steps 1 and 2, step 3's records after the last),
  every record written through the run's writers under a registered ledger."""
  cfg = small_config(tmp_path)
  d = tmp_path / "run"
  d.mkdir()
  rl.register(rl.Ledger(str(d), key))
  try:
    record_config(cfg, str(d), resumed_at=None)
    tasks = load_split(cfg.data.train, (), field="train")
    h = harness.from_tasks(tasks, cfg.harness)
    log = HistoryLog(d / rf.HISTORY)
    writer = MetricsWriter(str(d))
    ck = RunCheckpoints(str(d), keep=5)
    ops = [SamplingLevelDown(tasks[0].id), AddGuidance(tasks[1].id, "critique", "Be brief."),
           SamplingLevelDown(tasks[2].id)]
    for step, op in enumerate(ops):
      h, _ = apply_logged(h, op, step=step, log=log, measurement=evidence(step))
      rows = [{"step": step, "task_id": t.id, "x": step * 10 + i} for i, t in enumerate(tasks[:2])]
      rl.append_jsonl(str(d / rf.CANDIDATES), [{**r, rf.VERDICT: rf.REJECTED} for r in rows])
      rl.append_jsonl(str(d / rf.ATTRIBUTIONS), [{**r, rf.LABEL: "blind"} for r in rows])
      rl.append_jsonl(str(d / rf.HELDOUT_RESPONSES),
                      [{"step": step + 1, "task_id": t.id, "response": f"r{step}"}
                       for t in tasks[:2]])
      rl.append_jsonl(str(d / rf.CONFIG_CHANGES),
                      [{"step": step, "field": "train.log_every", "old": step, "new": step + 1}])
      writer.write_groups([{"step": step, "task": i} for i in range(2)])
      if step < 2:
        meta = {"step": step + 1, "history_len": step + 1, "harness_digest": harness.digest(h),
                "harness": harness.canonical(h), rf.HISTORY_HEAD: log.head, "summary": {}}
        meta = rl.ledger_of(str(d / rf.LEDGER)).checkpoint(step + 1, meta)
        ck.save(step + 1, {"x": np.arange(3, dtype=np.float32)}, meta)
      # The step's row comes after its checkpoint, as in train.train_loop.
      writer.write({"step": step, "reward": 0.25 * step, "loss": 1.0 / (step + 1)})
    ck.close()
    rl.write_text(str(d / rf.SUMMARY), json.dumps({"steps": 3, "heldout_end": {"score": 40.0}}))
  finally:
    rl.unregister(str(d))
  return d


@pytest.fixture
def run_dir(tmp_path):
  return build_run(tmp_path)


def lines_of(path):
  return path.read_text(encoding="utf-8").splitlines(keepends=True)


def changed(line):
  obj = json.loads(line)
  obj["tampered"] = True
  return json.dumps(obj, sort_keys=True) + "\n"


def edit(lines, k):
  return lines[:k] + [changed(lines[k])] + lines[k + 1:]


def insert(lines, k):
  return lines[:k] + [changed(lines[k])] + lines[k:]


def delete(lines, k):
  return lines[:k] + lines[k + 1:]


def reorder(lines, k):
  j = k + 1 if k + 1 < len(lines) else k - 1
  out = list(lines)
  out[k], out[j] = out[j], out[k]
  return out


def truncate(lines, k):
  return lines[:k] + [lines[k][:len(lines[k]) // 2]]   # cut short, no newline


TAMPER = {"edit": (edit, "edited"), "insert": (insert, "inserted"),
          "delete": (delete, "deleted|missing"), "reorder": (reorder, "reordered"),
          "truncate": (truncate, "cut short")}
JSONL = [n for n in rf.LEDGERED_LINES if n != rf.HISTORY]   # the history: test_audit.py


def test_a_ledgered_run_passes(run_dir, capsys):
  out = audit.audit(str(run_dir))
  assert out["records"] == 3 and out["checkpoints"] == [1, 2]
  assert out["ledger"] > 30 and out["crash"] == [] and not out["keyed"]
  assert audit.main(["audit", str(run_dir)]) == 0
  assert "ledger entries (keyless) match every record file" in capsys.readouterr().out


@pytest.mark.parametrize("how", TAMPER)
@pytest.mark.parametrize("which", ["first", "last"])
@pytest.mark.parametrize("name", JSONL)
def test_each_tampering_of_each_record_file_fails_naming_file_and_record(run_dir, name, which,
                                                                       how):
  path = run_dir / name
  lines = lines_of(path)
  k = 0 if which == "first" else len(lines) - 1
  if how == "reorder" and lines[k] == lines[k + 1 if k + 1 < len(lines) else k - 1]:
    pytest.skip("two equal lines")
  fn, why = TAMPER[how]
  path.write_text("".join(fn(lines, k)), encoding="utf-8")
  with pytest.raises(audit.AuditFailure) as e:
    audit.audit(str(run_dir))
  message = str(e.value)
  assert re.match(rf"{re.escape(name)} (record|line) \d+", message), message
  assert re.search(why, message), message
  assert "\n" not in message


@pytest.mark.parametrize("name", rf.LEDGERED_FILES)
def test_whole_files_edited_or_deleted_fail(run_dir, name):
  path = run_dir / name
  text = path.read_text(encoding="utf-8")
  path.write_text(text.replace("4", "5", 1), encoding="utf-8")
  with pytest.raises(audit.AuditFailure, match=f"{name}: edited"):
    audit.audit(str(run_dir))
  path.unlink()
  if name == rf.SUMMARY:   # the last write of a run: absent looks as a kill before it
    assert "summary.json: its last ledger entry" in audit.audit(str(run_dir))["crash"][0]
  else:   # without its config.json a directory is no run the audit can read
    with pytest.raises(audit.HarnessError, match=f"no {rf.CONFIG}"):
      audit.audit(str(run_dir))


def meta_files(d, step):
  """Orbax's JSON of a checkpoint's metadata (checkpoints/<step>/meta/metadata)."""
  return glob.glob(str(d / rf.CHECKPOINTS / str(step) / "meta" / "metadata"))


def rewrite_meta(d, step, fn):
  for p in meta_files(d, step):
    with open(p, encoding="utf-8") as f:
      meta = json.load(f)
    with open(p, "w", encoding="utf-8") as f:
      json.dump(fn(meta), f)


def test_checkpoint_metadata_edited_fails(run_dir):
  """The issue's case: history_head rewritten in a checkpoint's metadata (here alone; with a
  rechained history the history check or this one fails first)."""
  rewrite_meta(run_dir, 1, lambda m: {**m, rf.HISTORY_HEAD: "f" * 64})
  with pytest.raises(audit.AuditFailure, match="checkpoint 1"):
    audit.audit(str(run_dir))


def test_ledger_deleted_or_edited_fails(run_dir):
  path = run_dir / rf.LEDGER
  lines = lines_of(path)
  path.write_text("".join(edit(lines, 3)), encoding="utf-8")
  with pytest.raises(audit.AuditFailure, match=f"{rf.LEDGER} entry 4"):
    audit.audit(str(run_dir))
  path.unlink()
  with pytest.raises(audit.AuditFailure, match="was deleted"):
    audit.audit(str(run_dir))


def test_a_kill_mid_write_is_reported_as_a_crash_not_tampering(tmp_path, capsys):
  """Ledger-first writes: a kill leaves the ledger's last entries without (complete)
  lines. The audit passes and says it saw a crash; the same cut earlier in the ledger
  fails. (Resume after a real SIGKILL: test_train_resume.py.)"""
  d = build_run(tmp_path)
  (d / rf.SUMMARY).unlink()   # the run was killed before its end ...
  ledger = rl.Ledger(str(d))
  entries, _ = rl.read_entries(str(d / rf.LEDGER))
  ledger.head, ledger.count = entries[-2]["hash"], len(entries) - 1
  with open(d / rf.LEDGER, encoding="utf-8") as f:
    kept = f.readlines()[:-1]
  (d / rf.LEDGER).write_text("".join(kept), encoding="utf-8")
  row = json.dumps({"step": 3, "reward": 0.5}, sort_keys=True)
  ledger.lines(rf.METRICS, [row])                       # ... while writing step 3's row
  with open(d / rf.METRICS, "a", encoding="utf-8") as f:
    f.write(row[:7])
  out = audit.audit(str(d))
  assert len(out["crash"]) == 1 and rf.METRICS in out["crash"][0]
  assert "a kill while writing" in out["crash"][0]
  assert audit.main(["audit", str(d)]) == 0
  assert "crash-truncated (not tampering): metrics.jsonl" in capsys.readouterr().out
  # The same cut line where later entries follow is tampering.
  ledger.lines(rf.GROUPS, ['{"step": 3}'])
  with open(d / rf.GROUPS, "a", encoding="utf-8") as f:
    f.write('{"step": 3}\n')
  with pytest.raises(audit.AuditFailure, match=f"{rf.METRICS} record 4: cut short"):
    audit.audit(str(d))


def forge(d, key, *, mac_key):
  """A forger's full rewrite: the first metrics row changed, and the whole ledger, and
  every checkpoint's ledger fields, recomputed (under `mac_key`: None for SHA-256)."""
  path = d / rf.METRICS
  lines = lines_of(path)
  forged_line = changed(lines[0])
  path.write_text("".join([forged_line] + lines[1:]), encoding="utf-8")
  entries, _ = rl.read_entries(str(d / rf.LEDGER))
  old_heads, prev, out, n_metrics = {}, rl.GENESIS, [], 0
  for e in entries:
    e = dict(e)
    if e["kind"] == rl.LINE and e["file"] == rf.METRICS:
      if n_metrics == 0:
        e["sha256"] = rl.sha256_text(forged_line.rstrip("\n"))
      n_metrics += 1
    old_heads[e["hash"]] = None
    e["mac"] = rl.MAC_PLAIN if mac_key is None else rl.MAC_HMAC
    e["prev"] = prev
    e["hash"] = rl.entry_hash(e, mac_key)
    prev = e["hash"]
    out.append(e)
  (d / rf.LEDGER).write_text("".join(rl.canonical(e) + "\n" for e in out), encoding="utf-8")
  for step in (1, 2):
    rewrite_meta(d, step, lambda m: {**m, rf.LEDGER_HEAD: out[m[rf.LEDGER_LEN] - 1]["hash"]})
  del key


def test_keyless_full_rewrite_passes_the_documented_limit(run_dir):
  """Without a key the chain proves consistency only: a forger who rewrites a record, the
  whole ledger and every head passes. docs/operational.md says so."""
  forge(run_dir, None, mac_key=None)
  assert audit.audit(str(run_dir))["ledger"] > 30
  doc = open(os.path.join(REPO, "docs/operational.md"), encoding="utf-8").read()
  assert "rewrites every file and every head" in " ".join(doc.replace("*", "").split())


@pytest.mark.parametrize("mac_key", [None, b"f" * 32], ids=["as_keyless", "other_key"])
def test_with_a_key_no_full_rewrite_passes(tmp_path, mac_key):
  d = build_run(tmp_path, key=KEY)
  assert audit.audit(str(d), KEY)["keyed"]
  with pytest.raises(audit.HarnessError, match="the ledger is keyed"):
    audit.audit(str(d))   # a keyed ledger is not audited without its key
  forge(d, KEY, mac_key=mac_key)
  with pytest.raises(audit.AuditFailure, match=f"{rf.LEDGER} entry 1"):
    audit.audit(str(d), KEY)


def test_audit_key_file_flag_and_environment(tmp_path, capsys, monkeypatch):
  d = build_run(tmp_path, key=KEY)
  key_file = tmp_path / "audit.key"
  key_file.write_bytes(KEY + b"\n")
  assert audit.main(["audit", str(d), f"--audit_key_file={key_file}"]) == 0
  assert "HMAC under the key" in capsys.readouterr().out
  monkeypatch.setenv(rl.KEY_ENV, str(key_file))
  assert audit.main(["audit", str(d)]) == 0
  (d / "inside.key").write_bytes(KEY)
  assert audit.main(["audit", str(d), f"--audit_key_file={d / 'inside.key'}"]) == 2
  assert "lies inside the workdir" in capsys.readouterr().err
  monkeypatch.delenv(rl.KEY_ENV)
  assert audit.main(["audit", str(d)]) == 2


def test_a_resume_cuts_the_ledger_back_and_keeps_later_rows(run_dir):
  """Ledger.resume + sync, as train.resume calls them: back to checkpoint 1, the lines the
  run kept past it enter the ledger again and the audit passes."""
  ck = RunCheckpoints(str(run_dir))
  meta = ck.meta(1)
  ck.close()
  for name in JSONL:   # what train.resume keeps: rows of steps before the checkpoint
    path = run_dir / name
    keep = [l for l in lines_of(path) if json.loads(l)["step"] < 1
            or (name == rf.HELDOUT_RESPONSES and json.loads(l)["step"] <= 1)]
    path.write_text("".join(keep), encoding="utf-8")
  hist = lines_of(run_dir / rf.HISTORY)[:1]
  (run_dir / rf.HISTORY).write_text("".join(hist), encoding="utf-8")
  shutil.rmtree(run_dir / rf.CHECKPOINTS / "2")
  (run_dir / rf.SUMMARY).unlink()
  ledger = rl.Ledger(str(run_dir))
  ledger.resume(meta)
  ledger.sync(rf.LEDGERED_LINES)
  assert ledger.count > meta[rf.LEDGER_LEN]   # step 0's row came after checkpoint 1
  out = audit.audit(str(run_dir))
  assert out["checkpoints"] == [1] and out["crash"] == []
  with pytest.raises(rl.LedgerError, match="audit key"):
    rl.Ledger(str(run_dir), KEY).resume(meta)


def test_the_one_list_of_workdir_files_agrees_with_train_and_docs():
  names = [n for n, _, _ in rf.WORKDIR_FILES]
  # In a process of its own: train.py defines absl flags other tests' modules define too.
  train_doc = subprocess.run(
      [sys.executable, "-c", "import harnessrl_jax.train as t; print(t.__doc__)"],
      cwd=REPO, capture_output=True, text=True, timeout=120, check=True).stdout
  assert train_doc.count(rf.workdir_listing()) == 1
  doc = open(os.path.join(REPO, "docs/operational.md"), encoding="utf-8").read()
  table = re.findall(r"^\| `([^`]+)` \| [^|]+ \| ([^|]+) \|$", doc, re.M)
  assert [n for n, _ in table] == names
  assert [how.strip() for _, how in table] == [how for _, _, how in rf.WORKDIR_FILES]
  # The audit checks every file the list says it covers, and no other.
  assert set(rf.LEDGERED_LINES) | set(rf.LEDGERED_FILES) == {
      n for n, _, how in rf.WORKDIR_FILES if how in ("lines", "file")}
