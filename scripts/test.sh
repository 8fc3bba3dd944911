#!/usr/bin/env bash
# Sets up .venv, runs the linters (scripts/lint.sh) and the whole test suite: unit tests (the pure core and the golden SQL, no Spark; fail fast), then functional
# tests (real dbt against real Spark: session mode, a Thrift Server and a standalone cluster
# started on 127.0.0.1 by the fixtures). Extra arguments go to pytest.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
bash scripts/setup.sh
export SPARK_LOCAL_IP=127.0.0.1 PYSPARK_PYTHON="$repo/.venv/bin/python"
# the classes a Spark driver loads, archived once per venv: each JVM the tests start maps them
# (scripts/jvm_archive.py: a driver's start 10 s -> 5 s). A new venv's archive takes ~28 s, made
# while the linters and the unit tests run (they use one core), in a process group of its own
# that a failure before the functional tier stops whole (its JVM included)
archive_out=$(mktemp)
setsid -w .venv/bin/python scripts/jvm_archive.py > "$archive_out" &
archive_pid=$!
trap '[ -z "$archive_pid" ] || kill -- -"$archive_pid" 2>/dev/null || true; rm -f "$archive_out"' EXIT
bash scripts/lint.sh
echo "lint: ruff and mypy passed"
set +e
# the fast tier first: the unit tests and the golden SQL (no Spark, seconds) stop the run at the
# first failure, before the functional tier's Spark sessions start
if [ "$#" = 0 ]; then
  .venv/bin/python -m pytest -q -x tests/unit
  rc=$?
  if [ "$rc" != 0 ]; then
    [ "$rc" = 5 ] && echo "test.sh: pytest collected no unit tests: failing" >&2
    exit 1
  fi
  # the functional tier: ours, then dbt's own adapter suites (tests/adapter, README: Development)
  # (the scale tier, a chain of 1,000 groups for ~16 minutes, runs on its own: README, Development)
  set -- -m "not scale" tests/functional tests/adapter
fi
CHAINTABLE_JVM_ARCHIVE=
wait "$archive_pid" && CHAINTABLE_JVM_ARCHIVE=$(cat "$archive_out")
archive_pid=  # reaped: its PID may be another process's by the end
export CHAINTABLE_JVM_ARCHIVE
# two workers, each test to whichever is free, but the tests of a server (Thrift Server,
# metastore service) all on one (tests/functional/conftest.py groups them, so it starts once).
# CHAINTABLE_TEST_WORKERS=0 runs in this process; CHAINTABLE_TEST_DURATIONS=0 lists every test's time
.venv/bin/python -m pytest -ra --durations="${CHAINTABLE_TEST_DURATIONS:-25}" -n "${CHAINTABLE_TEST_WORKERS:-2}" --dist loadgroup "$@"
rc=$?
set -e
# every landing shows the whole command's time beside the slowest tests above (the suite's
# budget is 20 minutes on a 2-core machine)
echo "test.sh: $((SECONDS / 60)) min $((SECONDS % 60)) s in all (setup, lint, unit and functional tiers)"
if [ "$rc" = 5 ]; then echo "test.sh: pytest collected no tests: failing" >&2; exit 1; fi
exit "$rc"
