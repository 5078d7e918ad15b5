#!/usr/bin/env bash
# Runs the whole test suite (creates .venv on first use). Extra args go to pytest, after
# ours: `-n 0` runs it in one process, `-n 4` in four.
# Two pytest-xdist workers, whole files to each (module fixtures stay in one process): most
# of the suite is single-threaded tracing, compiling and process start-up. Measured on a
# 2-core AMD EPYC (2026-12-01): 2016 tests in 12.7 min with two workers, machine otherwise
# idle; with one process the suite was not timed idle (22 min for 1004 tests, a training
# run beside it).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/launch/setup_venv.sh"
cd "$root"
exec .venv/bin/python -m pytest tests -q -n 2 --dist loadfile "$@"
