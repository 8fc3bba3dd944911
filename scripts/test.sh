#!/usr/bin/env bash
# Sets up .venv, runs the linters (scripts/lint.sh) and the whole test suite: unit tests (planner, no Spark), then functional
# tests (real dbt against real Spark: session mode, a Thrift Server and a standalone cluster
# started on 127.0.0.1 by the fixtures). Extra arguments go to pytest.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
bash scripts/setup.sh
bash scripts/lint.sh
echo "lint: ruff and mypy passed"
export SPARK_LOCAL_IP=127.0.0.1 PYSPARK_PYTHON="$repo/.venv/bin/python"
set +e
# two workers, each test to whichever is free, but the tests of the Thrift Server all on one
# (tests/functional/conftest.py groups them, so the server starts once); a file to a worker
# left one running alone for ~3 minutes at the end. CHAINTABLE_TEST_WORKERS=0 runs in this process
.venv/bin/python -m pytest -ra --durations=25 -n "${CHAINTABLE_TEST_WORKERS:-2}" --dist loadgroup "${@:-tests}"
rc=$?
set -e
if [ "$rc" = 5 ]; then echo "test.sh: pytest collected no tests: failing" >&2; exit 1; fi
exit "$rc"
