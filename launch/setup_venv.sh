#!/usr/bin/env bash
# Creates and fills .venv on first use; later calls only check that it is complete.
# Usage: source-free, idempotent: `bash launch/setup_venv.sh`.
# ACCEL=cpu (default) | cuda | tpu: cuda and tpu also install requirements-$ACCEL.txt (jax's
# GPU or TPU plugin at the project's jax version; for cuda, faiss-gpu in place of faiss-cpu).
# AOT=1 also installs requirements-aot.txt (--no-deps) into .venv/aot-plugins: the
# compile-only CUDA and TPU plugins `python -m harnessrl_jax.aot` compiles with on a machine
# without either (CI's tier).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
stamp="$venv/.requirements.sha256"
ACCEL="${ACCEL:-cpu}"
case "$ACCEL" in
  cpu) accel_req="" ;;
  cuda | tpu) accel_req="$root/requirements-$ACCEL.txt" ;;
  *) echo "error: ACCEL=$ACCEL: expected cpu, cuda or tpu" >&2; exit 2 ;;
esac
base=("$root/requirements.txt" "$root/requirements-serving.txt" "$root/requirements-nodeps.txt"
      "$root/pyproject.toml")
if [[ -z "$accel_req" ]]; then
  want="$(cat "${base[@]}" | sha256sum | cut -d' ' -f1)"
else
  # The accelerator and its file are part of the stamp: switching ACCEL sets the venv up again.
  want="$({ cat "${base[@]}" "$accel_req"; echo "ACCEL=$ACCEL"; } | sha256sum | cut -d' ' -f1)"
fi
AOT="${AOT:-0}"
if [[ "$AOT" == 1 ]]; then   # the compile-only plugins are part of the stamp too
  want="$({ echo "$want"; cat "$root/requirements-aot.txt"; echo AOT=1; } | sha256sum \
    | cut -d' ' -f1)"
fi
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  exit 0
fi
python="${PYTHON:-python3.11}"
command -v "$python" >/dev/null || python=python3
echo "setting up $venv (ACCEL=$ACCEL; first use; a few minutes)" >&2
[[ -x "$venv/bin/python" ]] || "$python" -m venv "$venv"
pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check)
# faiss-cpu and faiss-gpu both install the module `faiss`: with both present one's files
# overwrite the other's, so the one this accelerator does not use goes first.
drop() {
  if "$venv/bin/python" -m pip show --quiet "$1" >/dev/null 2>&1; then
    "$venv/bin/python" -m pip uninstall --quiet --yes "$1"
  fi
}
# torch first, pinned, so that transformers / sentence-transformers find it installed.
"${pip[@]}" "torch==2.13.0"
case "$ACCEL" in
  cpu)
    drop faiss-gpu
    "${pip[@]}" -r "$root/requirements.txt" ;;
  # One resolve with the accelerator's file, whose jax pins then hold for every jax package.
  tpu)
    "${pip[@]}" -r "$root/requirements.txt" -r "$accel_req" ;;
  cuda)
    drop faiss-cpu
    "${pip[@]}" -r <(grep -v '^faiss-cpu' "$root/requirements.txt") -r "$accel_req" ;;
esac
# Serving extras (JetStream server and client); the tests start a JetStream server.
"${pip[@]}" -r "$root/requirements-serving.txt"
"${pip[@]}" --no-deps -r "$root/requirements-nodeps.txt"
# The project itself, editable (pyproject.toml): importable from anywhere, no path edits.
"${pip[@]}" --no-deps -e "$root"
if [[ "$AOT" == 1 ]]; then
  # Beside the packages, not among them: jax would import them in every program
  # (harnessrl_jax/aot/topology.py PLUGINS_DIR says why); only the compile check looks there.
  "${pip[@]}" --no-deps --upgrade --target "$venv/aot-plugins" -r "$root/requirements-aot.txt"
fi
echo "$want" > "$stamp"
