"""Every entry point answers --help with its usage and exit status 0, touching no file."""

from __future__ import annotations

import os

import pytest

from harnessrl_jax import cli
from tests.fork_starts import start_all

# (module, help flag, what its usage must name: its main flag or argument)
COMMANDS = [
    ("harnessrl_jax.train", "--help", ("--config", "--workdir", "--coordinator_address")),
    ("harnessrl_jax.eval", "--help", ("--run", "--checkpoint")),
    ("harnessrl_jax.audit", "--help", ("RUN_DIR",)),
    ("harnessrl_jax.calibrate", "--help", ("--config", "--workdir")),
    ("harnessrl_jax.calibrate", "-h", ("--workdir",)),
    ("harnessrl_jax.experiment", "--help", ("--config", "--workdir", "--task_index",
                                            "--report_only")),
    ("harnessrl_jax.serve", "--help", ("--model", "--port")),
    ("harnessrl_jax.distributed", "--help", ("--then", "MODULE_ARGS")),
    ("harnessrl_jax.data.validate", "--help", ("FILE",)),
    ("harnessrl_jax.data.convert", "-h", ("--format", "IN", "OUT")),
    ("harnessrl_jax.eval.ifbench_verify", "--help", ("--mode", "--loose", "IN.jsonl",
                                                     "OUT.jsonl")),
]


@pytest.fixture(scope="module")
def answers(tmp_path_factory):
  """Every command, started from one process that imported the libraries once
  (tests/fork_starts.py); (module, flag) -> (exit status, stdout, stderr)."""
  cwd = tmp_path_factory.mktemp("cwd")
  results = start_all([(m, [flag], cwd) for m, flag, _ in COMMANDS])
  return dict(zip([(m, flag) for m, flag, _ in COMMANDS], results)), sorted(os.listdir(cwd))


@pytest.mark.parametrize("module,flag,names", COMMANDS,
                         ids=[f"{m.split('.', 1)[1]}{f}" for m, f, _ in COMMANDS])
def test_help_prints_usage_and_exits_0(answers, module, flag, names):
  rc, stdout, stderr = answers[0][(module, flag)]
  assert rc == 0, stdout + stderr
  for name in names:
    assert name in stdout, (name, stdout)
  assert "error" not in stderr.lower(), stderr


def test_help_touches_no_file(answers):
  assert answers[1] == []


@pytest.mark.parametrize("argv,wanted", [
    (["prog", "--help"], "short"),
    (["prog", "--config=x.py", "-h"], "short"),
    (["prog", "-?"], "short"),
    (["prog", "--helpshort"], "short"),
    (["prog", "--helpfull"], "full"),
    (["prog", "--helpfull", "--help"], "full"),
    (["prog", "--workdir=/tmp/run"], None),
    (["prog", "--then", "m", "--", "--help"], None),  # the help of the module it runs
    (["--help"], None),  # argv[0] is the program, never a flag
])
def test_help_wanted(argv, wanted):
  assert cli.help_wanted(argv) == wanted
