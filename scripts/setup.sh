#!/usr/bin/env bash
# Creates .venv (Python 3.11) with the adapter installed in development mode, and checks Java 17.
# Idempotent: a second run only verifies. Used by scripts/test.sh and scripts/run_sample.sh.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"

if ! command -v java >/dev/null 2>&1; then
  echo "setup: installing Java 17 (openjdk-17-jre-headless)"
  if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq openjdk-17-jre-headless >/dev/null
  else sudo apt-get update -qq && sudo apt-get install -y -qq openjdk-17-jre-headless >/dev/null; fi
fi

py=${PYTHON:-python3.11}
command -v "$py" >/dev/null 2>&1 || py=python3
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $($py --version)"
  "$py" -m venv .venv
fi
stamp=.venv/.chaintable-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "setup: installing dbt-chaintable and its dependencies (a cold pyspark build takes ~1.5 min)"
  .venv/bin/python -m pip install -q --upgrade pip
  # compat mode: dbt's namespace packages (pkgutil.extend_path) find dbt/adapters/chaintable in the repo
  .venv/bin/python -m pip install -q -e ".[test,thrift,connect]" --config-settings editable_mode=compat
  touch "$stamp"
fi
# dbt lists adapters (`dbt init`, `dbt --version`) by globbing dbt/adapters/*/__version__.py in
# dbt-adapters' own folder, where an editable install puts nothing: link our version file there
# (imports still find the package in the repo, the folder holds no __init__.py)
site=$(.venv/bin/python -c 'import dbt.adapters.base, os; print(os.path.dirname(os.path.dirname(dbt.adapters.base.__file__)))')
if [ "$site" != "$repo/dbt/adapters" ]; then
  mkdir -p "$site/chaintable"
  ln -sf "$repo/dbt/adapters/chaintable/__version__.py" "$site/chaintable/__version__.py"
fi
.venv/bin/python -c "import dbt.adapters.chaintable, pyspark; print('setup: dbt-chaintable ready, pyspark', pyspark.__version__)"
