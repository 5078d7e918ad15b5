"""Starts entry points (`python -m MODULE ARGS`) many times from one process that imported
the heavy libraries once: each start runs in a forked child, so it defines its flags and
parses them as a fresh process would, and its exit status and output are its own.

The refusal and --help tests start about 30 entry points; as separate processes each paid
~3 s of imports (jax, flax, orbax) before it could refuse anything. Tests call `start_all`;
it runs this file as a script:

  python tests/fork_starts.py < [{"module": ..., "args": [...], "cwd": ...}, ...] (JSON)
  -> [[exit status, stdout, stderr], ...] (JSON on stdout)
"""

from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys
import tempfile
import traceback

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# What the entry points import, but none of the entry modules themselves: a module imported
# here would have defined its flags already, and its start would then define them twice.
PRELOAD = ("jax", "flax.nnx", "optax", "orbax.checkpoint", "harnessrl_jax.config",
           "harnessrl_jax.run.step")


def start_all(starts) -> list[tuple[int, str, str]]:
  """[(exit status, stdout, stderr)] of `python -m MODULE *ARGS` run in CWD, for each
  (MODULE, ARGS, CWD) of `starts`, in order."""
  env = {**os.environ, "PYTHONPATH": REPO, "JAX_PLATFORMS": "cpu"}
  done = subprocess.run(
      [sys.executable, os.path.abspath(__file__)], cwd=REPO, env=env,
      input=json.dumps([{"module": m, "args": list(a), "cwd": str(c)} for m, a, c in starts]),
      capture_output=True, text=True, timeout=600, check=False)
  assert done.returncode == 0, done.stderr[-3000:]
  return [tuple(r) for r in json.loads(done.stdout)]


def start(module: str, args: list[str], cwd: str) -> list:
  """[exit status, stdout, stderr] of `python -m module *args` run in `cwd`."""
  with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
      code = 1
      try:
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        os.chdir(cwd)
        sys.argv = [module, *args]
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        code = 0
      except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
      except BaseException:  # pylint: disable=broad-except
        traceback.print_exc()
      finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)  # pylint: disable=protected-access
    _, status = os.waitpid(pid, 0)
    out.seek(0)
    err.seek(0)
    return [os.waitstatus_to_exitcode(status), out.read().decode(), err.read().decode()]


def main() -> None:
  starts = json.load(sys.stdin)
  for name in PRELOAD:
    __import__(name)
  results = [start(s["module"], s["args"], s["cwd"]) for s in starts]
  json.dump(results, sys.stdout)


if __name__ == "__main__":
  main()
