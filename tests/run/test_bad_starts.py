"""Every start the user can fix is refused with one line on stderr naming the flag or field
and the fix, exit status 2 and no traceback, before a model loads: flags absl refuses, a
config file that is missing or raises, overrides of unknown fields or of the wrong type, and
values of the wrong type inside a tuple (config.validate's type check)."""

from __future__ import annotations

import os

import pytest

from harnessrl_jax.config import base_config, type_problems, validate
from harnessrl_jax.errors import ConfigError
from tests.fork_starts import start_all
from repo_paths import REPO

TINY = "--config=configs/tiny.py"
WORKDIR = "--workdir={tmp}/run"
# Config files that fail to load, each with the text its refusal must hold.
BAD_FILES = {
    "raises.py": ("c.train.steps = undefined_name\n", "line 6: NameError"),
    "unknown.py": ("c.train.stepz = 3\n", 'line 6: AttributeError: Key "stepz" does not exist'),
    "wrong_type.py": ("c.train.steps = 1.5\n", "line 6: TypeError: Could not override field"),
    "syntax.py": ("c.train.steps = (\n", "line 6: SyntaxError"),
}
# (id, module, arguments, texts the one error line must hold)
CASES = [
    ("tuple_of_int_given_a_word", "train", [TINY, WORKDIR, "--config.rollout.prompt_buckets=big"],
     ["config.rollout.prompt_buckets = ('big',)", "expected a tuple of integers"]),
    ("no_workdir", "train", [TINY], ["--workdir is required"]),
    ("no_config", "train", [WORKDIR], ["--config is required"]),
    ("missing_config_file", "train", ["--config=configs/tinny.py", WORKDIR],
     ["--config=configs/tinny.py: no such file", "e.g. --config=configs/tiny.py"]),
    ("missing_config_file_and_override", "train",
     ["--config=configs/tinny.py", WORKDIR, "--config.train.steps=3"],
     ["--config=configs/tinny.py: no such file"]),
    ("int_field_given_a_word", "train", [TINY, WORKDIR, "--config.rl.mesh.data=x"],
     ["--config.rl.mesh.data=x: expected an integer", "config.rl.mesh.data = 1"]),
    ("int_field_given_a_float", "train", [TINY, WORKDIR, "--config.train.steps=1.5"],
     ["--config.train.steps=1.5: expected an integer"]),
    ("bool_field_given_a_word", "train", [TINY, WORKDIR, "--config.evolver.enabled=maybe"],
     ["--config.evolver.enabled=maybe: expected true or false"]),
    ("section_given_a_value", "train", [TINY, WORKDIR, "--config.train=3"],
     ["--config.train=3: config.train is a section"]),
    ("unknown_field", "train", [TINY, WORKDIR, "--config.train.stepz=3"],
     ["--config.train.stepz=3: unknown field config.train.stepz", "did you mean steps"]),
    ("unknown_section", "train", [TINY, WORKDIR, "--config.trainz.steps=3"],
     ["unknown field config.trainz", "did you mean train"]),
    ("unknown_flag", "train", [TINY, WORKDIR, "--workdri=x"],
     ["--workdri: unknown flag", "did you mean workdir"]),
    ("stray_argument", "train", [TINY, WORKDIR, "--config.rollout.prompt_buckets=1,2", "3"],
     ["'3': unexpected argument"]),
    ("cluster_flag_given_a_word", "train", [TINY, WORKDIR, "--num_processes=x"],
     ["--num_processes=x: expected an integer"]),
    *[(f"config_file_{name[:-3]}", "train", ["--config={tmp}/" + name, WORKDIR],
       [f"/{name}: {text}"]) for name, (_, text) in BAD_FILES.items()],
    ("calibrate_tuple_of_int_given_a_word", "calibrate",
     [TINY, WORKDIR, "--config.rollout.prompt_buckets=big"], ["config.rollout.prompt_buckets"]),
    ("evaluate_no_run", "eval", [], ["--run is required"]),
    # --workdir checked before any model loads (issue 45); nothing in the path changes.
    ("workdir_is_a_file", "train", [TINY, "--workdir={tmp}/a_file"],
     ["/a_file: ", "/a_file is a file, not a directory"]),
    ("workdir_under_a_file", "train", [TINY, "--workdir={tmp}/a_file/run"],
     ["/a_file is a file, so no directory can be made under it"]),
    ("workdir_not_writable", "train", [TINY, "--workdir=/proc/harnessrl_run"],
     ["--workdir=/proc/harnessrl_run", "no directory can be made in /proc"]),
    ("workdir_of_another_experiment", "train", [TINY, "--workdir={tmp}/other_run",
                                                "--config.train.steps=7"],
     ["holds a run with another experiment", "train.steps"]),
    ("audit_key_file_missing", "train", [TINY, WORKDIR, "--audit_key_file={tmp}/no.key"],
     ["the audit key file", "/no.key cannot be read"]),
]


def other_run(workdir):
  """The workdir of a checkpointed run of configs/tiny.py as it is (train.steps differs
  from the case's), without training one: its config.json and one checkpoint."""
  # pylint: disable=g-import-not-at-top
  import numpy as np
  from configs.tiny import get_config
  from harnessrl_jax.run.checkpoint import RunCheckpoints, record_config
  # pylint: enable=g-import-not-at-top
  record_config(get_config(), str(workdir), resumed_at=None)
  ck = RunCheckpoints(str(workdir))
  ck.save(1, {"x": np.zeros(2, np.float32)}, {"step": 1})
  ck.close()


def test_bad_workdirs_change_nothing(answers):
  tmp = answers[1]
  assert (tmp / "a_file").read_text() == "not a directory\n"
  assert sorted(os.listdir(tmp / "other_run")) == ["checkpoints", "config.json"]
  assert not os.path.exists("/proc/harnessrl_run")


@pytest.fixture(scope="module")
def answers(tmp_path_factory):
  """Starts every case (forked from one process that imported the libraries once:
  tests/fork_starts.py); id -> (exit status, stdout, stderr)."""
  tmp = tmp_path_factory.mktemp("bad_starts")
  (tmp / "a_file").write_text("not a directory\n")
  other_run(tmp / "other_run")
  for name, (line, _) in BAD_FILES.items():
    (tmp / name).write_text("from harnessrl_jax.config import base_config\n\n\n"
                            "def get_config():\n  c = base_config()\n  " + line
                            + "  return c\n")
  return dict(zip([c[0] for c in CASES], start_all(
      [(f"harnessrl_jax.{module}", [a.format(tmp=tmp) for a in args], REPO)
       for _, module, args, _ in CASES]))), tmp


@pytest.mark.parametrize("key,module,args,texts", CASES, ids=[c[0] for c in CASES])
def test_bad_start_is_one_line_and_exit_2(answers, key, module, args, texts):
  del module, args
  rc, stdout, stderr = answers[0][key]
  lines = [l for l in stderr.splitlines() if l.strip()]
  assert rc == 2, stderr[-3000:]
  assert "Traceback" not in stderr
  assert len(lines) == 1 and lines[0].startswith("error: "), stderr
  for text in texts:
    assert text in lines[0], (text, lines[0])
  assert "loaded" not in stdout   # refused before the model


def test_refused_flags_write_nothing(answers):
  assert not (answers[1] / "run").exists()


def test_type_problems_name_every_wrong_field():
  c = base_config()
  c.rollout.prompt_buckets = ("big",)
  c.harness.ladder = (1, 0.5)           # an int where a float is expected is fine
  c.train.steps = None
  c.data.domains = ("medical", ("nested",))
  assert type_problems(c) == [
      "config.data.domains = ('medical', ('nested',)): expected a tuple of strings or "
      "numbers, like its default ()",
      "config.rollout.prompt_buckets = ('big',): expected a tuple of integers, like its "
      "default (64, 128, 256, 512)",
      "config.train.steps = None: expected an integer, like its default 10"]
  with pytest.raises(ConfigError, match=r"config\.train\.steps = None"):
    validate(c)


def test_every_bundled_config_has_base_config_types():
  import importlib  # pylint: disable=g-import-not-at-top
  for name in sorted(os.listdir(os.path.join(REPO, "configs"))):
    if name.endswith(".py") and not name.startswith("_"):
      module = importlib.import_module(f"configs.{name[:-3]}")
      cfg = module.get_config()
      if "experiment" in cfg:   # a grid's config: its runs load FILE:ARM
        for arm in cfg.experiment.arms:
          assert type_problems(module.get_config(arm)) == [], f"{name}:{arm}"
      else:
        assert type_problems(cfg) == [], name
