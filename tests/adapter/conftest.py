"""dbt's own adapter test suite (dbt-tests-adapter) against `chaintable` in session mode, as
tests/functional runs dbt: the fixtures of dbt.tests.fixtures.project, imported here so that
they serve this folder only (tests/functional has a `project` fixture of its own), with the
profile of tests/functional/helpers.py."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "functional"))
from dbt.tests.fixtures.project import *  # noqa: F403
from helpers import CHILD_JVM_OPTS, SESSION_JVM_OPTS, drop_temporary_views, session_params

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("DBT_SEND_ANONYMOUS_USAGE_STATS", "false")


@pytest.fixture(scope="session")
def spark_params(tmp_path_factory) -> dict[str, str]:
    """The parameters of this process's SparkSession. A test worker of scripts/test.sh runs
    tests/functional too, in one JVM whose catalog is fixed by whichever folder starts it
    first: a session already there is taken as it is, else one is started as
    tests/functional/conftest.py starts its own."""
    from pyspark.sql import SparkSession

    # the session tests/functional started is active in this (the main) thread
    active = SparkSession.getActiveSession()
    if active is None:
        root = tmp_path_factory.mktemp("spark_adapter")
        os.environ.setdefault("DERBY_SYSTEM_HOME", str(root))
        builder = SparkSession.builder.enableHiveSupport()
        for k, v in session_params(root).items():
            builder = builder.config(k, v)
        submit = os.environ.get("SPARK_SUBMIT_OPTS")
        os.environ["SPARK_SUBMIT_OPTS"] = SESSION_JVM_OPTS
        try:
            active = builder.getOrCreate()
        finally:
            os.environ["SPARK_SUBMIT_OPTS"] = submit or CHILD_JVM_OPTS
        active.sparkContext.setLogLevel("ERROR")
    return {k: active.conf.get(k, v) for k, v in session_params(Path("/unused")).items()}


@pytest.fixture(scope="class")
def dbt_profile_target(spark_params):
    return {
        "type": "chaintable",
        "method": "session",
        "host": "localhost",
        "threads": 1,
        "server_side_parameters": spark_params,
    }


@pytest.fixture(autouse=True)
def no_temporary_views_left():
    """What a test leaves in the shared session's temporary views is not the next one's
    (helpers.drop_temporary_views)."""
    yield
    drop_temporary_views()
