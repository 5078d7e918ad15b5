#!/usr/bin/env bash
# Runs the whole test suite (creates .venv on first use). Extra args go to pytest, after
# ours: `-n 0` runs it in one process, `-n 4` in four.
# Two pytest-xdist workers, whole files to each (module fixtures stay in one process): most
# of the suite is single-threaded tracing, compiling and process start-up, so two workers
# on two cores take about half the time of one (11 min for the suite on a 2-core AMD EPYC).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/launch/setup_venv.sh"
cd "$root"
exec .venv/bin/python -m pytest tests -q -n 2 --dist loadfile "$@"
