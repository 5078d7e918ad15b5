"""The accelerator install path as a user meets it, without a GPU, TPU, cluster or network:
launch/check_accel.py on jax 0.10.2's own requirement lines; launch/setup_venv.sh's ACCEL
choice, stamp and pip commands against a fake venv python that records them; and
launch/slurm_gpu.sh / launch/tpu_pod.sh stopping before srun / the pod command when the
venv lacks the plugin, with a fake srun and gcloud."""

import importlib.util
import os
import shutil
import subprocess

import pytest
from packaging.requirements import Requirement
from repo_paths import REPO


_spec = importlib.util.spec_from_file_location("check_accel",
                                               os.path.join(REPO, "launch", "check_accel.py"))
check_accel = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_accel)

# Requirement lines of jax 0.10.2 and its plugins, as their wheels declare them (abridged:
# the extras the check does not read are left out).
REQUIRES = {
    "jax": ["jaxlib<=0.10.2,>=0.10.1", "numpy>=2.0",
            'jaxlib<=0.10.2,>=0.10.2; extra == "tpu"', 'libtpu==0.0.42.*; extra == "tpu"',
            'requests; extra == "tpu"',
            'jaxlib<=0.10.2,>=0.10.2; extra == "cuda12"',
            'jax-cuda12-plugin[with-cuda]<=0.10.2,>=0.10.2; extra == "cuda12"'],
    "jax-cuda12-plugin": ["jax-cuda12-pjrt==0.10.2",
                          'nvidia-cublas-cu12>=12.1.3.1; sys_platform == "linux" and '
                          'extra == "with-cuda"'],
}
CUDA = {"jax": "0.10.2", "jaxlib": "0.10.2", "numpy": "2.4.0", "jax-cuda12-plugin": "0.10.2",
        "jax-cuda12-pjrt": "0.10.2", "nvidia-cublas-cu12": "12.9.3.13"}
TPU = {"jax": "0.10.2", "jaxlib": "0.10.2", "numpy": "2.4.0", "libtpu": "0.0.42.1",
       "requests": "2.34.2"}


def problem(accel, installed):
  return check_accel.problem(accel, version=installed.get,
                             requires=lambda n: [Requirement(r) for r in REQUIRES.get(n, [])])


def test_check_accel_passes_a_complete_install():
  assert problem("cuda", CUDA) is None
  assert problem("tpu", TPU) is None


@pytest.mark.parametrize("accel,installed,names", [
    ("cuda", {**CUDA, "jax-cuda12-plugin": "0.9.2"}, "jax-cuda12-plugin<=0.10.2,>=0.10.2"),
    ("cuda", {k: v for k, v in CUDA.items() if k != "jax-cuda12-pjrt"}, "jax-cuda12-pjrt"),
    ("cuda", {k: v for k, v in CUDA.items() if k != "nvidia-cublas-cu12"},
     "nvidia-cublas-cu12"),
    ("cuda", TPU, "jax-cuda12-plugin"),
    ("tpu", CUDA, "libtpu==0.0.42.*"),
    ("tpu", {**TPU, "libtpu": "0.0.52"}, "libtpu==0.0.42.*"),
    ("tpu", {}, "jax is not installed"),
])
def test_check_accel_names_what_is_missing_and_the_fix(accel, installed, names):
  msg = problem(accel, installed)
  assert names in msg and f"ACCEL={accel} bash launch/setup_venv.sh" in msg
  assert "\n" not in msg


# ---- launch/setup_venv.sh against a fake venv

FAKE_PYTHON = r"""#!/usr/bin/env bash
# Records each call; a process-substituted requirements file is recorded with its lines.
args=()
for a in "$@"; do
  if [[ $a == /dev/fd/* ]]; then args+=("{{$(tr '\n' ' ' < "$a")}}"); else args+=("$a"); fi
done
echo "${args[*]}" >> "$(dirname "$0")/../calls.log"
# `pip show NAME`: installed when NAME is in $INSTALLED
if [[ "$1 $2 $3" == "-m pip show" ]]; then [[ " $INSTALLED " == *" ${*: -1} "* ]]; exit; fi
exit 0
"""
REQUIREMENT_FILES = ("requirements.txt", "requirements-serving.txt",
                     "requirements-nodeps.txt", "requirements-cuda.txt",
                     "requirements-tpu.txt", "requirements-aot.txt", "pyproject.toml")


@pytest.fixture
def checkout(tmp_path):
  """A copy of the set-up script and requirement files, with a fake .venv/bin/python."""
  (tmp_path / "launch").mkdir()
  shutil.copy(os.path.join(REPO, "launch", "setup_venv.sh"), tmp_path / "launch")
  for name in REQUIREMENT_FILES:
    shutil.copy(os.path.join(REPO, name), tmp_path)
  (tmp_path / ".venv" / "bin").mkdir(parents=True)
  python = tmp_path / ".venv" / "bin" / "python"
  python.write_text(FAKE_PYTHON)
  python.chmod(0o755)
  return tmp_path


def setup(checkout, accel=None, installed="", aot=False):
  log = checkout / ".venv" / "calls.log"
  log.unlink(missing_ok=True)
  env = dict(os.environ, INSTALLED=installed)
  env.pop("ACCEL", None)
  env.pop("AOT", None)   # CI's tier sets it for the whole suite
  if accel is not None:
    env["ACCEL"] = accel
  if aot:
    env["AOT"] = "1"
  run = subprocess.run(["bash", str(checkout / "launch" / "setup_venv.sh")], env=env,
                       capture_output=True, text=True, timeout=60, check=False)
  calls = log.read_text().splitlines() if log.exists() else []
  return run, calls


def test_setup_venv_cpu_stamp_and_commands(checkout):
  # The default set-up: its stamp is the hash of the requirement files and pyproject.toml, so
  # a venv is set up again only when one of them changes; the project installs editable.
  stamp = checkout / ".venv" / ".requirements.sha256"
  want = subprocess.run("cat requirements.txt requirements-serving.txt "
                        "requirements-nodeps.txt pyproject.toml | sha256sum | cut -d' ' -f1",
                        shell=True, cwd=checkout, capture_output=True, text=True,
                        check=True).stdout
  stamp.write_text(want)
  run, calls = setup(checkout)
  assert run.returncode == 0 and calls == []
  stamp.unlink()
  run, calls = setup(checkout)
  assert run.returncode == 0, run.stderr
  installs = [c for c in calls if " install " in f" {c} "]
  assert [c.split("--disable-pip-version-check ")[1] for c in installs] == [
      "torch==2.13.0", f"-r {checkout}/requirements.txt",
      f"-r {checkout}/requirements-serving.txt",
      f"--no-deps -r {checkout}/requirements-nodeps.txt", f"--no-deps -e {checkout}"]
  assert stamp.read_text() == want


def test_setup_venv_aot_adds_the_compile_only_plugins_and_its_own_stamp(checkout):
  run, calls = setup(checkout)
  plain = (checkout / ".venv" / ".requirements.sha256").read_text()
  run, calls = setup(checkout, aot=True)   # a new stamp: the set-up runs again
  assert run.returncode == 0, run.stderr
  assert calls[-2].endswith(f"--no-deps -e {checkout}")
  assert calls[-1].endswith(f"--no-deps --upgrade --target {checkout}/.venv/aot-plugins "
                            f"-r {checkout}/requirements-aot.txt")
  assert (checkout / ".venv" / ".requirements.sha256").read_text() != plain
  run, calls = setup(checkout, aot=True)
  assert run.returncode == 0 and calls == []


def test_setup_venv_cuda_replaces_faiss_cpu_and_switching_sets_up_again(checkout):
  run, calls = setup(checkout, "cuda", installed="faiss-cpu")
  assert run.returncode == 0, run.stderr
  assert "-m pip uninstall --quiet --yes faiss-cpu" in calls
  joint = next(c for c in calls if "requirements-cuda.txt" in c)
  # one resolve: requirements.txt without faiss-cpu (a process-substituted copy) + the
  # CUDA file, after faiss-cpu is gone
  assert calls.index(joint) > calls.index("-m pip uninstall --quiet --yes faiss-cpu")
  listed = joint.split("{{")[1].split("}}")[0].split()
  assert "faiss-cpu>=1.12,<2" not in listed and "jax>=0.10.2,<0.13" in listed
  cuda_stamp = (checkout / ".venv" / ".requirements.sha256").read_text()
  assert setup(checkout, "cuda")[1] == []                    # done: nothing to do
  run, calls = setup(checkout, "tpu")                         # another ACCEL: again
  assert run.returncode == 0 and any("requirements-tpu.txt" in c for c in calls)
  assert not any("uninstall" in c for c in calls)             # no faiss-gpu installed
  run, calls = setup(checkout, "cpu", installed="faiss-gpu")
  assert "-m pip uninstall --quiet --yes faiss-gpu" in calls
  assert (checkout / ".venv" / ".requirements.sha256").read_text() != cuda_stamp
  # A changed accelerator file sets the venv up again too.
  setup(checkout, "cuda")
  with open(checkout / "requirements-cuda.txt", "a", encoding="utf-8") as f:
    f.write("# changed\n")
  assert setup(checkout, "cuda")[1] != []


def test_setup_venv_refuses_an_unknown_accel(checkout):
  run, calls = setup(checkout, "rocm")
  assert run.returncode == 2 and calls == []
  assert run.stderr.strip() == "error: ACCEL=rocm: expected cpu, cuda or tpu"


# ---- the launchers, with fake srun / gcloud

FAKE_TOOL = r"""#!/usr/bin/env bash
printf '%s\n' "$(basename "$0") ${*//$'\n'/ }" >> "$CALLS"   # one line per call
# the pod check (gcloud ... --worker=0) and the venv check fail when FAIL_CHECK=1
if [[ " $* " == *" --worker=0 "* || "$1" == */check_accel.py ]]; then
  [[ "$FAIL_CHECK" == 1 ]] && { echo "error: jax 0.10.2 on X needs Y" >&2; exit 2; }
fi
exit 0
"""


@pytest.fixture
def tools(tmp_path):
  bin_dir = tmp_path / "bin"
  bin_dir.mkdir()
  for name in ("srun", "gcloud", "python"):
    (bin_dir / name).write_text(FAKE_TOOL)
    (bin_dir / name).chmod(0o755)
  return bin_dir


def launch(script, tools, env, fail_check):
  calls = tools.parent / "calls.log"
  calls.unlink(missing_ok=True)
  env = dict(os.environ, PATH=f"{tools}:{os.environ['PATH']}", CALLS=str(calls),
             FAIL_CHECK=str(int(fail_check)), **env)
  run = subprocess.run(["bash", os.path.join(REPO, "launch", script), "--config.seed=1"],
                       env=env, capture_output=True, text=True, timeout=60, check=False)
  return run, calls.read_text().splitlines() if calls.exists() else []


SLURM = {"NODES": "2", "CONFIG": "configs/tiny.py", "WORKDIR": "/shared/runs/x"}


def test_slurm_gpu_checks_the_cuda_plugin_before_srun(tools):
  env = {**SLURM, "PYTHON": str(tools / "python")}
  run, calls = launch("slurm_gpu.sh", tools, env, fail_check=True)
  assert run.returncode == 2 and calls == [f"python {REPO}/launch/check_accel.py cuda"]
  assert run.stderr.strip() == "error: jax 0.10.2 on X needs Y"   # the check's one line
  run, calls = launch("slurm_gpu.sh", tools, env, fail_check=False)
  assert run.returncode == 0, run.stderr
  assert calls[0] == f"python {REPO}/launch/check_accel.py cuda"
  assert calls[1].startswith("srun --nodes=2 --ntasks-per-node=1 --gpus-per-node=8")
  assert calls[1].endswith("--config=configs/tiny.py --workdir=/shared/runs/x --config.seed=1")
  run, calls = launch("slurm_gpu.sh", tools, {**env, "CHECK_ACCEL": "0"}, fail_check=True)
  assert run.returncode == 0 and [c.split()[0] for c in calls] == ["srun"]


def test_tpu_pod_checks_worker_0_before_the_pod_command(tools):
  env = {"TPU_NAME": "pod", "ZONE": "z", "CONFIG": "configs/tiny.py",
         "WORKDIR": "gs://b/x", "REPO_DIR": "/r"}
  run, calls = launch("tpu_pod.sh", tools, env, fail_check=True)
  assert run.returncode == 2 and len(calls) == 1
  assert calls[0] == ("gcloud compute tpus tpu-vm ssh pod --zone=z --worker=0 "
                      "--command=cd /r && /r/.venv/bin/python launch/check_accel.py tpu")
  last = run.stderr.strip().splitlines()[-1]
  assert last.startswith("error: worker 0 of pod cannot run jax on its TPU")
  assert "--worker=all --command='cd /r && ACCEL=tpu bash launch/setup_venv.sh'" in last
  run, calls = launch("tpu_pod.sh", tools, env, fail_check=False)
  assert run.returncode == 0, run.stderr
  assert len(calls) == 2 and " --worker=all " in calls[1]
  assert "HARNESSRL_AUTO_CLUSTER=1 /r/.venv/bin/python -m harnessrl_jax.train" in calls[1]
  run, calls = launch("tpu_pod.sh", tools, {**env, "CHECK_ACCEL": "0"}, fail_check=True)
  assert run.returncode == 0 and len(calls) == 1 and " --worker=all " in calls[0]
