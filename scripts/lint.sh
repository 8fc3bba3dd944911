#!/usr/bin/env bash
# Contributors' checks, as CI runs them (scripts/test.sh calls this first): ruff lint, ruff
# format (check only; `.venv/bin/ruff format .` applies it) and mypy on the adapter package.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
