"""Session mode's set-up without Spark: the profile's catalog paths, the switch, and which of
Spark's log lines a failed statement shows (docs/design.md#quiet-spark)."""

from __future__ import annotations

import pytest

from dbt.adapters.chaintable.base import spark_log
from dbt.adapters.chaintable.connections import ChainTableCredentials

URL = "spark.hadoop.javax.jdo.option.ConnectionURL"
# dbt-spark's own setting, whatever the method
ANSI = {"spark.sql.ansi.enabled": "false"}


def creds(**kw) -> ChainTableCredentials:
    return ChainTableCredentials(host="localhost", schema="ods", **kw)


def test_catalog_paths_become_spark_settings_and_the_profiles_own_win():
    c = creds(method="session", warehouse_dir="/d/wh", metastore_dir="/d/ms")
    assert c.server_side_parameters == {
        "spark.sql.warehouse.dir": "/d/wh",
        URL: "jdbc:derby:;databaseName=/d/ms;create=true",
        **ANSI,
    }
    c = creds(
        method="session",
        warehouse_dir="/d/wh",
        metastore_dir="/d/ms",
        server_side_parameters={"spark.sql.warehouse.dir": "/own", "spark.ui.enabled": "false"},
    )
    assert c.server_side_parameters == {
        "spark.sql.warehouse.dir": "/own",
        URL: "jdbc:derby:;databaseName=/d/ms;create=true",
        "spark.ui.enabled": "false",
        **ANSI,
    }
    # over thrift the server owns its catalog: nothing added
    assert creds(method="thrift", port=10000, warehouse_dir="/d/wh").server_side_parameters == ANSI
    assert creds(method="session").server_side_parameters == ANSI


@pytest.mark.parametrize(
    ("value", "level"),
    [(None, None), ("", None), ("warn", "WARN"), (" ERROR ", "ERROR"), ("1", "")],
)
def test_switch_level(monkeypatch, value, level):
    if value is None:
        monkeypatch.delenv(spark_log.ENV_SWITCH, raising=False)
    else:
        monkeypatch.setenv(spark_log.ENV_SWITCH, value)
    assert spark_log._switch_level() == level


def test_no_jvm_of_ours_with_spark_connect(monkeypatch):
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    assert spark_log._ours_to_start({})
    assert not spark_log._ours_to_start({"spark.remote": "sc://h:15002"})
    monkeypatch.setenv("SPARK_REMOTE", "sc://h:15002")
    assert not spark_log._ours_to_start({})


def test_failure_lines_are_messages_written_since_the_statement_began(monkeypatch, tmp_path):
    log = tmp_path / "spark.log"
    log.write_text("26/11/25 10:00:00 WARN Old: before the statement\n")
    monkeypatch.setattr(spark_log._State, "log_file", log)
    monkeypatch.setattr(spark_log._State, "failures", 0)
    start = spark_log.offset()
    with open(log, "a") as f:
        f.write(
            "26/11/25 10:00:01 ERROR Executor: Exception in task 0.0 in stage 0.0 (TID 0)\n"
            "org.apache.spark.SparkRuntimeException: [USER_RAISED_EXCEPTION] bad row 1\n"
            "\tat org.apache.spark.sql.errors.QueryExecutionErrors$.raiseError(X.scala:1)\n"
            "\t... 12 more\n"
            "Caused by: java.lang.RuntimeException: inner\n"
            "\n"
        )
        f.writelines(f"26/11/25 10:00:02 WARN TaskSetManager: Lost task {i}\n" for i in range(40))
    lines = spark_log.failure_lines(start)
    assert len(lines) == 30
    assert lines[-1] == "26/11/25 10:00:02 WARN TaskSetManager: Lost task 39"
    monkeypatch.setattr(spark_log, "_MAX_LINES", 1000)
    assert spark_log.failure_lines(start)[:3] == [
        "26/11/25 10:00:01 ERROR Executor: Exception in task 0.0 in stage 0.0 (TID 0)",
        "org.apache.spark.SparkRuntimeException: [USER_RAISED_EXCEPTION] bad row 1",
        "Caused by: java.lang.RuntimeException: inner",
    ]


def test_no_lines_without_a_quiet_jvm(monkeypatch):
    monkeypatch.setattr(spark_log._State, "log_file", None)
    assert spark_log.offset() == 0
    assert spark_log.failure_lines(0) == []


def test_a_session_on_a_shared_catalog_gives_other_readers_the_grace():
    from dbt.adapters.chaintable.base.runner import shared_catalog

    assert shared_catalog({"spark.hadoop.hive.metastore.uris": "thrift://127.0.0.1:9083"})
    url = "spark.hadoop.javax.jdo.option.ConnectionURL"
    assert shared_catalog({url: "jdbc:postgresql://127.0.0.1:5433/metastore"})
    assert not shared_catalog({url: "jdbc:derby:;databaseName=/x/metastore_db;create=true"})
    assert not shared_catalog({})


def test_an_unreachable_metastore_service_fails_fast_naming_the_setting():
    import socket

    from dbt_common.exceptions import DbtRuntimeError

    from dbt.adapters.chaintable.connections import check_metastore

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    key = "spark.hadoop.hive.metastore.uris"
    with pytest.raises(DbtRuntimeError) as e:
        check_metastore({key: f"thrift://127.0.0.1:{port}"}, timeout=1)
    assert f"no Hive metastore service answers at thrift://127.0.0.1:{port} (" in str(e.value)
    assert "spark.hadoop.hive.metastore.uris in the profile's server_side_parameters" in str(
        e.value
    )
    with pytest.raises(DbtRuntimeError, match="is not thrift://host:port"):
        check_metastore({key: "127.0.0.1:9083"})
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        ok = server.getsockname()[1]
        check_metastore({key: f"thrift://127.0.0.1:{port},thrift://127.0.0.1:{ok}"}, timeout=1)
    check_metastore({})


def test_the_quiet_log_configuration_ships_beside_the_module_that_names_it():
    """The JVM is pointed at this file; a missing one leaves Spark's log on dbt's console."""
    text = spark_log._CONFIG.read_text()
    assert "rootLogger.level = warn" in text
    assert "chaintable.spark.log" in text
