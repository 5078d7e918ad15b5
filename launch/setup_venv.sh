#!/usr/bin/env bash
# Creates and fills .venv on first use; later calls only check that it is complete.
# Usage: source-free, idempotent: `bash launch/setup_venv.sh`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
stamp="$venv/.requirements.sha256"
want="$(cat "$root/requirements.txt" "$root/requirements-serving.txt" "$root/requirements-nodeps.txt" \
  | sha256sum | cut -d' ' -f1)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  exit 0
fi
python="${PYTHON:-python3.11}"
command -v "$python" >/dev/null || python=python3
echo "setting up $venv (first use; a few minutes)" >&2
[[ -x "$venv/bin/python" ]] || "$python" -m venv "$venv"
pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check)
# torch first, pinned, so that transformers / sentence-transformers find it installed.
"${pip[@]}" "torch==2.13.0"
"${pip[@]}" -r "$root/requirements.txt"
# Serving extras (JetStream server and client); the tests start a JetStream server.
"${pip[@]}" -r "$root/requirements-serving.txt"
"${pip[@]}" --no-deps -r "$root/requirements-nodeps.txt"
echo "$want" > "$stamp"
