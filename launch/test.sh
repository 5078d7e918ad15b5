#!/usr/bin/env bash
# Runs the test suite, CI's tier (creates .venv on first use). Extra args go to pytest, after
# ours: `-n 0` runs it in one process, `-n 4` in four.
# Two pytest-xdist workers, whole files to each (module fixtures stay in one process), the
# longest files first (tests/conftest.py): most of the suite is single-threaded tracing,
# compiling and process start-up. CI's tier fits ~25 minutes on 2 cores, the end-to-end run
# with every LLM role on our JetStream server included. HARNESSRL_SLOW_TESTS=1 adds the slow
# tier (`@pytest.mark.slow`: second variants of a parity family, the 3-process multi-host
# driver run), as the whole suite before a release. docs/testing.md has what runs where and
# the suite's measured times.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/launch/setup_venv.sh"
cd "$root"
exec .venv/bin/python -m pytest tests -q -n 2 --dist loadfile "$@"
