"""The main job on configs/tiny.py end to end, exact resume after a real SIGKILL, and the
audit of the resulting run directories (pass on a good run, fail on a tampered history;
a resume refuses one too). Config changes at a resume: operational fields may change, are
logged with their step and change no number; experiment fields are refused with one line;
a start refused for a missing data file leaves the workdir to the corrected start.

Each run is a subprocess (`python -m harnessrl_jax.train`) on 8 training and 4 held-out
tasks of the bundled data; a persistent compilation cache shared by the runs keeps the
later processes from compiling again (it changes no numbers: the same programs run).
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from harnessrl_jax import train
from harnessrl_jax.eval import oracle
from tests.conftest import tiny_driver_data
from repo_paths import REPO



@pytest.fixture(scope="module")
def env_and_data(tmp_path_factory):
  root = tmp_path_factory.mktemp("train")
  env = tiny_driver_data(root)
  return root, env


def train_cmd(root, workdir):
  return [sys.executable, "-m", "harnessrl_jax.train", "--config=configs/tiny.py",
          f"--workdir={workdir}", f"--config.data.train={root / 'train.jsonl'}",
          f"--config.data.heldout={root / 'heldout.jsonl'}",
          "--config.train.oracle_groups_every=2"]


def run(cmd, env):
  return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def runs(env_and_data):
  """(uninterrupted run dir, killed-and-resumed run dir, kill info, resume log, the refused
  first start in the uninterrupted run's workdir)."""
  root, env = env_and_data
  a, b = root / "a", root / "b"
  refused = run(train_cmd(root, a) + [f"--config.data.heldout={root / 'missing.jsonl'}"], env)
  done = run(train_cmd(root, a), env)
  assert done.returncode == 0, done.stderr[-3000:]
  proc = subprocess.Popen(train_cmd(root, b), cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
  first = b / "checkpoints" / "1"
  deadline = time.time() + 600
  while not first.exists() and proc.poll() is None and time.time() < deadline:
    time.sleep(0.02)
  proc.send_signal(signal.SIGKILL)
  proc.wait()
  killed = {"returncode": proc.returncode, "finished": (b / "summary.json").exists(),
            "had_ckpt_1": first.exists()}
  # What a kill in the middle of step 2's save leaves behind, whatever the kill above hit:
  # a half-written Orbax directory, memory 2 already renamed into place, and cut lines.
  partial = b / "checkpoints" / "2.orbax-checkpoint-tmp" / "state"
  partial.mkdir(parents=True, exist_ok=True)
  (partial / "garbage").write_bytes(b"\0" * 100)
  if (b / "memory" / "1").exists() and not (b / "memory" / "2").exists():
    shutil.copytree(b / "memory" / "1", b / "memory" / "2")
  for name in ("harness_history.jsonl", "metrics.jsonl", "evolver_candidates.jsonl",
               "attributions.jsonl", "oracle_groups.jsonl"):
    with open(b / name, "a", encoding="utf-8") as f:
      f.write('{"step": 1, "cut by the ki')
  resumed = subprocess.run(train_cmd(root, b), cwd=REPO, env=env, capture_output=True,
                           text=True, timeout=600)
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  return a, b, killed, resumed.stdout + resumed.stderr, refused


def summary(run_dir):
  with open(run_dir / "summary.json", encoding="utf-8") as f:
    return json.load(f)


def restored_params(run_dir, step):
  # pylint: disable=g-import-not-at-top
  import jax
  import orbax.checkpoint as ocp
  from harnessrl_jax.run.checkpoint import RunCheckpoints
  # pylint: enable=g-import-not-at-top
  ck = RunCheckpoints(str(run_dir))
  # No target: the saved arrays as plain nested containers, independent of the driver.
  out = ck.manager.restore(step, args=ocp.args.Composite(state=ocp.args.StandardRestore()))
  ck.close()
  return jax.tree.leaves(out["state"]["params"])


def test_end_to_end_writes_a_complete_run(runs):
  a, *_ = runs
  s = summary(a)
  assert s["steps"] == 2
  assert s["heldout_start"]["score"] is not None and s["heldout_end"]["score"] is not None
  accepted = sum(v.get("accepted", 0) for v in s["updates"].values())
  assert accepted >= 1, s["updates"]           # at least one accepted evolver update
  with open(a / "metrics.jsonl", encoding="utf-8") as f:
    rows = [json.loads(l) for l in f]
  assert [r["step"] for r in rows] == [0, 1]
  assert all(np.isfinite(r["loss"]) for r in rows)
  # Each row is written once, complete: after its checkpoint, with the save's time.
  assert all(r["time"]["checkpoint_s"] > 0 for r in rows)
  with open(a / "harness_history.jsonl", encoding="utf-8") as f:
    assert len(f.readlines()) >= accepted
  assert sorted(os.listdir(a / "checkpoints")) == ["1", "2"]
  assert any(n.startswith("events.out.tfevents") for n in os.listdir(a / "tb"))
  # What the report and the oracle analysis read: mounted-guidance shares per step, and
  # the step's groups with their rewards.
  for r in rows:
    assert sorted(r["guidance"]) == ["criterion", "critique", "reference"]
    assert all(0.0 <= v <= 1.0 for v in r["guidance"].values())
  train_ids = [json.loads(l)["id"] for l in (a.parent / "train.jsonl").read_text().splitlines()]
  groups = oracle.read_groups(str(a / "oracle_groups.jsonl"))
  logged = [r for r in rows if train.due(r["step"] + 1, 2, len(rows))]
  assert [r["step"] for r in logged] == [1]     # train.oracle_groups_every = 2 of 2 steps
  assert [(g.step, g.task_id) for g in groups] == [
      (r["step"], train_ids[i]) for r in logged for i in r["tasks"]]
  assert all(len(g.responses) == 4 for g in groups)
  for r in logged:
    assert np.isclose(np.nanmean([g.rewards for g in groups if g.step == r["step"]]),
                      r["reward"], rtol=1e-9)
  report_md = (a / "report.md").read_text()
  assert "mean share of drawn tasks with the field mounted" in report_md
  assert (a / "reward_heldout.png").exists()


def test_killed_run_resumes_bit_identical(runs):
  a, b, killed, log, _ = runs
  assert killed["returncode"] == -signal.SIGKILL
  assert killed["had_ckpt_1"] and not killed["finished"], killed
  assert "resumed" in log or "checkpoint 1" in log
  sa, sb = summary(a), summary(b)
  assert sa["harness_digest"] == sb["harness_digest"]
  assert sa["params_sha256"] == sb["params_sha256"]
  pa, pb = restored_params(a, 2), restored_params(b, 2)
  assert len(pa) == len(pb) > 0
  for x, y in zip(pa, pb):
    assert np.asarray(x).tobytes() == np.asarray(y).tobytes()
  for name in ("harness_history.jsonl", "evolver_candidates.jsonl", "attributions.jsonl",
               "oracle_groups.jsonl"):
    assert (a / name).read_text() == (b / name).read_text(), name
  rows = lambda d: [(r["step"], r["reward"], r["loss"], r["tasks"]) for r in
                    map(json.loads, (d / "metrics.jsonl").read_text().splitlines())]
  assert rows(a) == rows(b)


def test_row_lost_between_save_and_write_is_restored(runs, env_and_data, tmp_path):
  """A kill after checkpoint 2's save but before step 1's row reached metrics.jsonl: the
  resume writes that row from the checkpoint (without the save's time, which it never
  measured) and loses nothing."""
  a, *_ = runs
  root, env = env_and_data
  c = tmp_path / "c"
  shutil.copytree(a, c)
  lines = (c / "metrics.jsonl").read_text().splitlines(keepends=True)
  (c / "metrics.jsonl").write_text("".join(lines[:-1]))
  out = subprocess.run(train_cmd(root, c), cwd=REPO, env=env, capture_output=True,
                       text=True, timeout=600)
  assert out.returncode == 0, out.stderr[-3000:]
  got = [json.loads(l) for l in (c / "metrics.jsonl").read_text().splitlines()]
  want = [json.loads(l) for l in lines]
  assert [r["step"] for r in got] == [0, 1]
  assert got[0] == want[0]
  assert got[1]["time"].get("checkpoint_s") is None
  strip = lambda r: {**r, "time": {k: v for k, v in r["time"].items() if k != "checkpoint_s"}}
  assert strip(got[1]) == strip(want[1])


def audit(run_dir):
  return subprocess.run([sys.executable, "-m", "harnessrl_jax.audit", str(run_dir)],
                        cwd=REPO, capture_output=True, text=True, timeout=300)


def test_audit_passes_on_good_runs(runs):
  a, b, *_ = runs
  for d in (a, b):
    out = audit(d)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "audit OK" in out.stdout and summary(d)["harness_digest"] in out.stdout


def last_evolver_record(objs):
  """The index of the last history record the evolver's critic accepted."""
  evolved = [i for i, o in enumerate(objs) if "critic" in o["measurement"]]
  assert evolved, "the run has no accepted evolver update to tamper with"
  return evolved[-1]


def write_tampered(path, lines, n, fn, rechain=False):
  """Writes `lines` (a history) to `path` with `fn` applied to record n; `rechain`
  recomputes every prev and hash, as a forger who knows the public definition would."""
  # pylint: disable-next=g-import-not-at-top
  from harnessrl_jax.harness.history import GENESIS, record_hash
  out = [json.loads(l) for l in lines]
  fn(out[n])
  prev = GENESIS
  for o in out if rechain else ():
    o["prev"] = prev
    o["hash"] = prev = record_hash(o)
  path.write_text("".join(json.dumps(o) + "\n" for o in out), encoding="utf-8")


def bump(obj, *keys):
  """Changes the field at `keys` (a string gets a letter, a number 1, a list an item)."""
  for key in keys[:-1]:
    obj = obj[key]
  v = obj[keys[-1]]
  obj[keys[-1]] = v + ["x"] if isinstance(v, list) else (
      v + "x" if isinstance(v, str) else v + 1)


def test_audit_fails_on_tampered_history(runs, tmp_path):
  """Any field of a real run's records edited (the issue's cases: the last record's step,
  the critic's Delta behind an accepted update, its label and evidence) fails the audit
  naming that line; so does a forgery that recomputes the hashes, at the checkpoint head."""
  # pylint: disable-next=g-import-not-at-top
  from harnessrl_jax import audit as audit_lib
  a, *_ = runs
  bad = tmp_path / "bad"
  shutil.copytree(a, bad)
  path = bad / "harness_history.jsonl"
  good = path.read_text(encoding="utf-8").splitlines()
  k = last_evolver_record([json.loads(l) for l in good])
  write_tampered(path, good, len(good) - 1, lambda o: bump(o, "step"))
  out = audit(bad)
  assert out.returncode == 1, (out.stdout, out.stderr[-2000:])
  assert f"chain breaks at line {len(good)}:" in out.stderr
  for keys in (("measurement", "critic", "delta"), ("measurement", "label", "label"),
               ("measurement", "label", "evidence"), ("op", "task_id"), ("digest_after",)):
    write_tampered(path, good, k, lambda o, keys=keys: bump(o, *keys))
    with pytest.raises(audit_lib.AuditFailure, match=f"chain breaks at line {k + 1}:"):
      audit_lib.audit(str(bad))
  write_tampered(path, good, k, lambda o: bump(o, "measurement", "critic", "delta"),
                 rechain=True)
  with pytest.raises(audit_lib.AuditFailure, match="history_head .* were rewritten"):
    audit_lib.audit(str(bad))


def test_resume_refuses_a_tampered_history(runs, env_and_data, tmp_path):
  """A rerun resumes from the last checkpoint only through an intact chain that ends at
  the head the checkpoint stored: an edited record and a rechained forgery are refused
  with one line, exit code 2."""
  a, *_ = runs
  root, env = env_and_data
  c = tmp_path / "c"
  shutil.copytree(a, c)
  path = c / "harness_history.jsonl"
  good = path.read_text(encoding="utf-8").splitlines()
  k = last_evolver_record([json.loads(l) for l in good])
  for rechain, says in ((False, f"harness_history.jsonl:{k + 1}: "), (True, "history_head")):
    write_tampered(path, good, k, lambda o: bump(o, "measurement", "critic", "delta"),
                   rechain)
    out = subprocess.run(train_cmd(root, c), cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 2, out.stderr[-3000:]
    err = [l for l in out.stderr.splitlines() if l.startswith("error: ")]
    assert len(err) == 1 and says in err[0], out.stderr[-3000:]


# Operational fields changed at the resume: (value in the uninterrupted run, new value).
CHANGED = {"judge.openai.base_url": ("http://127.0.0.1:8000/v1", "http://127.0.0.1:9/v1"),
           "judge.jetstream.address": ("127.0.0.1:9000", "127.0.0.2:9000"),
           "judge.max_unscored_share": (0.1, 0.5),
           "train.eval_every": (0, 1),
           "train.keep_checkpoints": (2, 1)}


@pytest.fixture(scope="module")
def changed(runs, env_and_data):
  """The uninterrupted run cut back to its first checkpoint (what a kill after it leaves)
  and resumed with the CHANGED fields: (run dir, resume output)."""
  a, *_ = runs
  root, env = env_and_data
  c = root / "changed"
  shutil.copytree(a, c)
  shutil.rmtree(c / "checkpoints" / "2")
  shutil.rmtree(c / "memory" / "2", ignore_errors=True)
  resumed = run(train_cmd(root, c) + [f"--config.{k}={new}" for k, (_, new) in CHANGED.items()],
                env)
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  return c, resumed.stdout


def test_refused_start_then_corrected_start(runs):
  a, *_, refused = runs
  assert refused.returncode == 2
  assert "error: config.data" in refused.stderr and "Traceback" not in refused.stderr
  assert "missing.jsonl" in refused.stderr
  assert summary(a)["steps"] == 2   # the corrected start ran in the same workdir


def test_changed_operational_fields_are_logged_with_their_step(runs, changed):
  a, *_ = runs
  c, out = changed
  for field, (old, new) in CHANGED.items():
    assert f"config.{field}: {old!r} -> {new!r} from step 1 on (operational;" in out, out
  with open(c / "config_changes.jsonl", encoding="utf-8") as f:
    rows = [json.loads(line) for line in f]
  assert rows == [{"step": 1, "field": k, "old": old, "new": new}
                  for k, (old, new) in sorted(CHANGED.items())]
  read = lambda d: json.loads((d / "config.json").read_text())
  assert read(c)["experiment_sha256"] == read(a)["experiment_sha256"]
  assert read(c)["config"]["judge"]["max_unscored_share"] == 0.5
  assert read(c)["config"]["train"]["keep_checkpoints"] == 1
  assert not (a / "config_changes.jsonl").exists()


def test_resume_with_changed_fields_equals_the_uninterrupted_run(runs, changed):
  a, *_ = runs
  c, _ = changed
  sa, sc = summary(a), summary(c)
  assert sc["params_sha256"] == sa["params_sha256"]
  assert sc["harness_digest"] == sa["harness_digest"]
  rows = lambda d: [(r["step"], r["reward"], r["loss"], r["tasks"]) for r in
                    map(json.loads, (d / "metrics.jsonl").read_text().splitlines())]
  assert rows(c) == rows(a) and len(rows(a)) == 2
  for name in ("harness_history.jsonl", "evolver_candidates.jsonl"):
    assert (a / name).read_text() == (c / name).read_text(), name
  assert sc["heldout_end"] == sa["heldout_end"]
  # keep_checkpoints = 1 took effect (eval_every's first due step, 2, is the end anyway)
  assert sorted(os.listdir(a / "checkpoints")) == ["1", "2"]
  assert sorted(os.listdir(c / "checkpoints")) == ["2"]


def test_changed_experiment_field_is_still_refused(changed, env_and_data):
  c, _ = changed
  root, env = env_and_data
  before = (c / "config.json").read_text()
  out = run(train_cmd(root, c) + ["--config.rl.learning_rate=0.5", "--config.judge.timeout_s=5"],
            env)
  assert out.returncode == 2, out.stderr[-3000:]
  assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
  assert "another experiment" in out.stderr and "rl.learning_rate: 0.001 -> 0.5" in out.stderr
  assert "timeout_s" not in out.stderr
  assert (c / "config.json").read_text() == before


def test_audit_covers_every_record_file_of_a_real_run(runs, tmp_path):
  """Issue 45 on a real run: the audit checks the records ledger, and an edit of the first
  or last record of each ledgered file the run wrote fails naming that file."""
  # pylint: disable=g-import-not-at-top
  from harnessrl_jax import audit as audit_lib
  from harnessrl_jax import run_files as rf
  # pylint: enable=g-import-not-at-top
  a, *_ = runs
  out = audit(a)
  assert out.returncode == 0 and "ledger entries (keyless) match every record file" in out.stdout
  for name in rf.LEDGERED_LINES:
    if name == rf.HISTORY or not (a / name).exists():
      continue
    for k in (0, -1):
      bad = tmp_path / f"{name}{k}"
      shutil.copytree(a, bad)
      lines = (bad / name).read_text(encoding="utf-8").splitlines(keepends=True)
      obj = json.loads(lines[k])
      obj["tampered"] = 1
      lines[k] = json.dumps(obj) + "\n"
      (bad / name).write_text("".join(lines), encoding="utf-8")
      with pytest.raises(audit_lib.AuditFailure, match=f"^{name} record"):
        audit_lib.audit(str(bad))
      shutil.rmtree(bad)
