#!/usr/bin/env bash
# Runs the main job on the embedded CPU default (creates .venv on first use).
# Extra args go to harnessrl_jax.train, e.g. --config.train.steps=2.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/launch/setup_venv.sh"
cd "$root"
# A persistent compilation cache: a rerun (another seed, a resumed run) loads the compiled
# programs instead of compiling them again (~80 s of a run on 2 CPU cores). Entries are keyed
# by the program and its compile options, so a cached program computes the same numbers.
export JAX_COMPILATION_CACHE_DIR="${JAX_COMPILATION_CACHE_DIR:-$root/.cache/jax}"
export JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="${JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS:-0}"
exec .venv/bin/python -m harnessrl_jax.train --config=configs/default.py \
  --workdir="${WORKDIR:-runs/default}" "$@"
