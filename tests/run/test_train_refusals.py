"""Configs that cannot run are refused before any model is loaded, with a message that
says what to change; another experiment in a workdir with a checkpoint is refused too, while
a refused start leaves nothing behind that refuses the corrected one."""

import socket
import subprocess
import sys

import numpy as np
import pytest

from harnessrl_jax import train
from harnessrl_jax.run.checkpoint import RunCheckpoints, record_config
from harnessrl_jax.config import validate
from harnessrl_jax.data.splits import load_split
from harnessrl_jax.errors import ConfigError
from harnessrl_jax.rl import mesh as rl_mesh
from repo_paths import REPO



def tiny():
  from configs.tiny import get_config  # pylint: disable=g-import-not-at-top
  return get_config()


@pytest.fixture(autouse=True)
def no_model(monkeypatch):
  """Every refusal must come before the model loads: loading it fails the test."""
  def boom(*a, **k):
    raise AssertionError("the model was loaded before the refusal")
  monkeypatch.setattr(train, "load_model_split", boom)


def free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def test_missing_data_file(tmp_path):
  c = tiny()
  c.data.train = str(tmp_path / "nope.jsonl")
  with pytest.raises(ConfigError, match=r"config\.data\.train.*no such file"):
    train.run(c, str(tmp_path / "run"))


def test_no_tasks_for_the_domains(tmp_path):
  c = tiny()
  c.data.domains = ("astrology",)
  with pytest.raises(ConfigError, match=r"no tasks.*data\.domains"):
    train.run(c, str(tmp_path / "run"))


def test_unreachable_openai_judge(tmp_path):
  c = tiny()
  c.judge.backend = "openai"
  c.judge.openai.model = "judge"
  c.judge.openai.base_url = f"http://127.0.0.1:{free_port()}/v1"   # nothing listens
  with pytest.raises(ConfigError, match=r"judge\.openai\.base_url.*cannot reach.*start"):
    train.run(c, str(tmp_path / "run"))


def test_unreachable_jetstream_judge(tmp_path):
  c = tiny()
  c.judge.backend = "hybrid"
  c.judge.llm_backend = "jetstream"
  c.judge.jetstream.address = f"127.0.0.1:{free_port()}"
  with pytest.raises(ConfigError, match=r"judge\.jetstream\.address.*cannot connect"):
    train.run(c, str(tmp_path / "run"))


def test_mesh_larger_than_the_devices(tmp_path):
  import jax  # pylint: disable=g-import-not-at-top
  c = tiny()
  c.rl.mesh.data = 2 * jax.device_count()
  c.rl.mesh.fsdp = 1
  with pytest.raises(ConfigError, match=rf"needs {2 * jax.device_count()} devices.*lower"):
    train.run(c, str(tmp_path / "run"))


def test_mesh_short_of_the_devices_of_several_processes():
  import jax  # pylint: disable=g-import-not-at-top
  # As one of 2 processes: a mesh of one device would leave the other devices idle.
  c = tiny()   # rl.mesh.fsdp = 1
  with pytest.raises(ConfigError, match=r"uses 1 of the 8 devices of 2 processes.*-1"):
    validate(c, device_count=8, process_count=2)
  c.rl.mesh.fsdp = -1
  validate(c, device_count=8, process_count=2)
  assert rl_mesh.mesh_for_devices(c.rl.mesh).size == jax.device_count()
  c.rl.mesh.fsdp = 1
  assert rl_mesh.mesh_for_devices(c.rl.mesh) is None   # one device: nothing to place


def test_refused_start_leaves_nothing_that_refuses_the_corrected_one(tmp_path):
  run = tmp_path / "run"
  c = tiny()
  c.data.domains = ("astrology",)
  with pytest.raises(ConfigError, match=r"no tasks"):
    train.run(c, str(run))
  c = tiny()
  c.judge.backend = "openai"
  c.judge.openai.model = "judge"
  c.judge.openai.base_url = f"http://127.0.0.1:{free_port()}/v1"   # nothing listens
  with pytest.raises(ConfigError, match=r"cannot reach"):
    train.run(c, str(run))
  assert not run.exists()   # no config.json, nor anything else
  # The corrected start (other experiment fields than both) passes every refusal: it
  # reaches the model load, which the no_model fixture turns into an AssertionError.
  with pytest.raises(AssertionError, match="model was loaded"):
    train.run(tiny(), str(run))


def test_other_experiment_in_a_workdir_with_a_checkpoint(tmp_path):
  run = str(tmp_path / "run")
  record_config(tiny(), run, resumed_at=None)
  ck = RunCheckpoints(run)
  ck.save(1, {"w": np.ones(2, np.float32)}, {"step": 1})
  ck.close()
  c2 = tiny()
  c2.rl.learning_rate = 0.5
  c2.judge.timeout_s = 5.0   # operational: not named
  with pytest.raises(ConfigError, match=r"another experiment.*differing fields: "
                                        r"rl\.learning_rate: 0\.001 -> 0\.5\. Use"):
    train.run(c2, run)
  c3 = tiny()
  c3.judge.max_unscored_share = 0.5
  c3.judge.openai.base_url = "http://127.0.0.1:9/v1"
  with pytest.raises(AssertionError, match="model was loaded"):   # accepted
    train.run(c3, run)


def test_command_line_prints_one_error_line(tmp_path):
  out = subprocess.run(
      [sys.executable, "-m", "harnessrl_jax.train", "--config=configs/tiny.py",
       f"--workdir={tmp_path / 'run'}", f"--config.data.heldout={tmp_path / 'x.jsonl'}"],
      cwd=REPO, capture_output=True, text=True, timeout=300)
  assert out.returncode == 2
  assert "error: config.data.heldout" in out.stderr and "Traceback" not in out.stderr


def test_heldout_subset_covers_every_domain():
  tasks = load_split("data/heldout.jsonl", (), field="heldout")
  sub = train.interleave_domains(tasks)[:5]
  assert len({t.domain for t in sub}) == 5
  assert sorted(t.id for t in train.interleave_domains(tasks)) == sorted(t.id for t in tasks)
