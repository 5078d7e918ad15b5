"""Says whether this Python's jax can drive GPUs (cuda) or TPUs (tpu), from its installed
packages alone: the launchers run it where there is no accelerator to ask (a SLURM login
node; a TPU worker before the job, which must not hold the TPU).

    python launch/check_accel.py cuda|tpu

Exits 0, silent, when everything `jax[cuda12]` / `jax[tpu]` adds to jax is installed at the
versions this jax asks for (its plugin at jax's own version, the plugin's PJRT library and
CUDA wheels, libtpu); otherwise prints one line naming what is missing or mismatched and
the command that installs it, and exits 2. Needs no jax import, only package metadata.
"""

from __future__ import annotations

import importlib.metadata
import sys

EXTRA = {"cuda": "cuda12", "tpu": "tpu"}   # jax's extra for each ACCEL of setup_venv.sh


def installed_version(name: str) -> str | None:
  try:
    return importlib.metadata.version(name)
  except importlib.metadata.PackageNotFoundError:
    return None


def requirements(name: str) -> list:
  """The installed package's requirements (packaging Requirements)."""
  from packaging.requirements import Requirement   # noqa: PLC0415 (jax is checked first)
  return [Requirement(line) for line in importlib.metadata.requires(name) or []]


def _holds(req, extra: str) -> bool:
  return req.marker is None or req.marker.evaluate({"extra": extra})


def problem(accel: str, version=installed_version, requires=requirements) -> str | None:
  """None when jax[EXTRA[accel]] is complete, else what is wrong, as one line.

  `version(name)`: the installed version or None; `requires(name)`: its requirements.
  """
  fix = f"run `ACCEL={accel} bash launch/setup_venv.sh`"
  jax = version("jax")
  if jax is None:
    return f"jax is not installed in {sys.prefix}: {fix}"

  def mismatch(req) -> str | None:
    got = version(req.name)
    if got is not None and req.specifier.contains(got, prereleases=True):
      return None
    have = "is not installed" if got is None else f"is {got}"
    return (f"jax {jax} on {accel} needs {req.name}{req.specifier} but it {have} in "
            f"{sys.prefix}: {fix}")

  extra = EXTRA[accel]
  # What the extra adds to plain jax, then what those packages need themselves (with the
  # extras jax asks them for, e.g. the CUDA plugin's [with-cuda] wheels).
  for req in [r for r in requires("jax") if _holds(r, extra) and not _holds(r, "")]:
    if (msg := mismatch(req)) is not None:
      return msg
    for need in requires(req.name):
      if any(_holds(need, e) for e in ("", *req.extras)) and (msg := mismatch(need)):
        return msg
  return None


def main(argv: list[str]) -> int:
  if len(argv) != 2 or argv[1] not in EXTRA:
    print(f"usage: {argv[0]} {'|'.join(EXTRA)}", file=sys.stderr)
    return 2
  msg = problem(argv[1])
  if msg:
    print(f"error: {msg}", file=sys.stderr)
    return 2
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv))
