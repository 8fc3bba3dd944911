"""What a user sees on the console: the `dbt` command in a process of its own (the pytest process
already holds a SparkSession), session method, so the adapter starts the JVM as a user's dbt
does (docs/design.md#quiet-spark).

- a normal run prints dbt's lines only: no JVM, log4j or Spark log line;
- a failing statement still shows Spark's error, and the lines Spark logged while it ran;
- `dbt init` offers the adapter and writes a chaintable profile from profile_template.yml, and
  with CHAINTABLE_SPARK_LOG=WARN the run of its starter project shows Spark's console log.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

DBT = str(Path(sys.executable).with_name("dbt"))
# every line dbt prints starts with its time stamp (colours off)
DBT_LINE = re.compile(r"^\d\d:\d\d:\d\d  ")
OK_MODEL = """
{{ config(materialized='chain_incremental', partition_by=['dt'], primary_key=['id', 'dt'],
          chain_partition={'dt': var('dt')}) }}
select * from values (1, 'a', '{{ var("dt") }}'), (2, 'b', '{{ var("dt") }}') as s(id, v, dt)
"""
# fails in a task at run time (a range is scanned by tasks; a VALUES list would be folded on the
# driver), so Spark's executor logs the error before the query fails
BAD_MODEL = """
{{ config(materialized='table') }}
select id, raise_error(concat('bad row ', cast(id as string))) as x from range(1, 3)
"""


def make_project(root: Path) -> Path:
    proj = root / "proj"
    (proj / "models").mkdir(parents=True)
    (proj / "dbt_project.yml").write_text(
        "name: c\nversion: '1.0'\nconfig-version: 2\nprofile: c\nmodel-paths: [models]\n"
    )
    params = {
        "spark.sql.warehouse.dir": str(root / "warehouse"),
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={root / 'metastore_db'};create=true",
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "2",
    }
    output = {"type": "chaintable", "method": "session", "host": "localhost", "schema": "c"}
    (proj / "profiles.yml").write_text(
        json.dumps(
            {"c": {"target": "t", "outputs": {"t": {**output, "server_side_parameters": params}}}}
        )
    )
    (proj / "models" / "ok_model.sql").write_text(OK_MODEL)
    (proj / "models" / "bad_model.sql").write_text(BAD_MODEL)
    return proj


def dbt(proj: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "CHAINTABLE_SPARK_LOG"}
    env.update(
        DERBY_SYSTEM_HOME=str(proj.parent),
        DBT_SEND_ANONYMOUS_USAGE_STATS="false",
        SPARK_LOCAL_IP="127.0.0.1",
    )
    return subprocess.run(
        [DBT, "--no-use-colors", *args, "--project-dir", str(proj), "--profiles-dir", str(proj)],
        env=env,
        cwd=proj.parent,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_console_is_dbt_only_and_failures_keep_sparks_error(tmp_path):
    proj = make_project(tmp_path)

    ok = dbt(proj, "run", "--select", "ok_model", "--vars", "{dt: '20250801'}")
    shown = ok.stdout + ok.stderr
    assert ok.returncode == 0, shown[-4000:]
    assert "OK created sql chain_incremental model c.ok_model" in ok.stdout
    foreign = [line for line in shown.splitlines() if line.strip() and not DBT_LINE.match(line)]
    assert foreign == [], "\n".join(foreign)
    for noise in ("log4j", "NativeCodeLoader", "incubator", " WARN ", "setLogLevel"):
        assert noise not in shown, noise

    bad = dbt(proj, "run", "--select", "bad_model")
    shown = bad.stdout + bad.stderr
    assert bad.returncode == 1, shown[-4000:]
    # Spark's own message, in dbt's error for the model ...
    assert "Failure in model bad_model" in shown
    assert "[USER_RAISED_EXCEPTION] bad row" in shown
    # ... and what Spark logged while the statement ran, with where the whole log is
    assert "Spark's log while the statement ran (all of it: " in shown
    logged = shown.split("Spark's log while the statement ran", 1)[1]
    assert re.search(r"ERROR Executor: Exception in task", logged), logged[:3000]
    # the builder's warning on every statement is not Spark's message for this failure
    assert "Using an existing Spark session" not in logged
    log_file = Path(re.search(r"all of it: (\S+)\)", shown).group(1))
    assert "USER_RAISED_EXCEPTION" in log_file.read_text()
    log_file.unlink()


def test_dbt_init_writes_a_chaintable_profile_and_the_switch_brings_sparks_log_back(tmp_path):
    """`dbt init` with its prompts answered on stdin (non-interactive): the adapter is offered,
    session is the first method, and the profile it writes runs the starter project. That run
    has CHAINTABLE_SPARK_LOG=WARN: Spark's console log is back, as without the adapter."""
    from dbt.version import _get_adapter_plugin_names

    adapters = list(_get_adapter_plugin_names())
    assert "chaintable" in adapters
    profiles = tmp_path / "profiles"
    warehouse, metastore = tmp_path / "state" / "warehouse", tmp_path / "state" / "metastore_db"
    # adapter, method [1] session, warehouse, metastore, schema (default ods), threads (default 1)
    answers = f"{adapters.index('chaintable') + 1}\n1\n{warehouse}\n{metastore}\n\n\n"
    env = {**os.environ, "DBT_SEND_ANONYMOUS_USAGE_STATS": "false", "SPARK_LOCAL_IP": "127.0.0.1"}
    out = subprocess.run(
        [DBT, "--no-use-colors", "init", "my_chain", "--profiles-dir", str(profiles)],
        cwd=tmp_path,
        env=env,
        input=answers,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "Desired method option (enter a number)" in out.stdout
    assert yaml.safe_load((profiles / "profiles.yml").read_text()) == {
        "my_chain": {
            "target": "dev",
            "outputs": {
                "dev": {
                    "type": "chaintable",
                    "method": "session",
                    "host": "localhost",
                    "warehouse_dir": str(warehouse),
                    "metastore_dir": str(metastore),
                    "schema": "ods",
                    "threads": 1,
                }
            },
        }
    }
    # the starter project's first model, built with that profile: the catalog is at the paths given
    run = subprocess.run(
        [
            DBT,
            "--no-use-colors",
            "run",
            "--select",
            "my_first_dbt_model",
            "--profiles-dir",
            str(profiles),
        ],
        cwd=tmp_path / "my_chain",
        env={**env, "DERBY_SYSTEM_HOME": str(tmp_path), "CHAINTABLE_SPARK_LOG": "WARN"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "OK created sql table model ods.my_first_dbt_model" in run.stdout
    assert (metastore / "service.properties").is_file()
    assert (warehouse / "ods.db" / "my_first_dbt_model").is_dir()
    assert not (tmp_path / "my_chain" / "metastore_db").exists()
    assert not (tmp_path / "my_chain" / "spark-warehouse").exists()
    # Spark's start and its WARN log on the console
    assert "Using Spark's default log4j profile" in run.stderr, run.stderr[:3000]
    assert re.search(r" WARN NativeCodeLoader: ", run.stderr), run.stderr[:3000]
    assert 'Setting Spark log level to "WARN"' in run.stderr
