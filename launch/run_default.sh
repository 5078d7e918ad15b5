#!/usr/bin/env bash
# Runs the main job on the embedded CPU default (creates .venv on first use).
# Extra args go to harnessrl_jax.train, e.g. --config.train.steps=2.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/launch/setup_venv.sh"
cd "$root"
exec .venv/bin/python -m harnessrl_jax.train --config=configs/default.py \
  --workdir="${WORKDIR:-runs/default}" "$@"
