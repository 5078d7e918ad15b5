#!/usr/bin/env bash
# Runs the test suite, CI's tier (creates .venv on first use). Extra args go to pytest, after
# ours: `-n 0` runs it in one process, `-n 4` in four.
# Two pytest-xdist workers, whole files to each (module fixtures stay in one process), the
# longest files first (tests/conftest.py): most of the suite is single-threaded tracing,
# compiling and process start-up. CI's tier: HARNESSRL_SLOW_TESTS=1 adds the slow tier
# (`@pytest.mark.slow`: second variants of a parity family, the 3-process multi-host driver
# run, the end-to-end LLM roles on our JetStream server), as the whole suite before a release.
# Measured on a 2-core AMD EPYC, idle, on a day the host ran ~1.5x slower than on the
# morning of 2026-12-02 (when 2034 tests took 14.2 min): before the tier and the test-process
# settings in conftest.py 25.1 min (2209 passed); after them, on a fresh clone, 17.2 min
# (2173 passed, 69 skipped): still over CI's 15 minutes on such a day. docs/testing.md has
# what runs where and what would cut more.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/launch/setup_venv.sh"
cd "$root"
exec .venv/bin/python -m pytest tests -q -n 2 --dist loadfile "$@"
