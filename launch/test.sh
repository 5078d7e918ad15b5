#!/usr/bin/env bash
# Runs the whole test suite (creates .venv on first use). Extra args go to pytest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/launch/setup_venv.sh"
cd "$root"
exec .venv/bin/python -m pytest tests -q "$@"
