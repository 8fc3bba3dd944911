"""`dbt run --threads 4` over eight chain models and models downstream of them
(docs/design.md#crash-safety-and-locking): every chain takes its own lock and renews it from its
own thread, the downstream models wait for theirs, and every day of every model equals the same
days run with `--threads 1` into another schema (threads_project.py). In one session (embedded
Derby), and over four of the chains on a Thrift Server; test_metastore.py runs them in dbt
processes on a Hive metastore service."""

from __future__ import annotations

import uuid

from helpers import ThriftProject
from threads_project import SERVER_CHAINS, SERVER_DAYS, run_and_compare, write_project

from dbt.adapters.chaintable.chain.catalog import READER_GRACE_ENV


def test_threads_4_over_eight_chains_equal_threads_1_in_a_session(project, threads_reference):
    p = project
    write_project(p.root)

    def run(day: str) -> None:
        p.dbt("run", "--threads", "4", vars={"dt": day, "sfx": "t4"})

    def read(qs: dict[str, str]) -> dict:
        return {k: [tuple(r) for r in p.spark.sql(q).collect()] for k, q in qs.items()}

    try:
        run_and_compare(run, read, p.schema, threads_reference)
    finally:
        p.spark.sql(f"DROP DATABASE IF EXISTS {p.schema}_t4 CASCADE")


def test_threads_4_equal_threads_1_on_a_thrift_server(
    thrift_server, tmp_path, threads_reference, monkeypatch
):
    # no reader of another session here: deletions need not wait the default 15 s for one
    # (tests/functional/test_shared_server.py tests the grace with readers)
    monkeypatch.setenv(READER_GRACE_ENV, "1")

    schema = "th_" + uuid.uuid4().hex[:8]
    p = ThriftProject(tmp_path / "proj", thrift_server, schema)
    write_project(p.root, SERVER_CHAINS)

    def run(day: str) -> None:
        p.dbt("run", "--threads", "4", vars={"dt": day, "sfx": "t4"})

    def read(qs: dict[str, str]) -> dict:
        return {k: p.sql(q) for k, q in qs.items()}

    try:
        run_and_compare(run, read, schema, threads_reference, SERVER_DAYS, SERVER_CHAINS)
    finally:
        p.sql(f"DROP DATABASE IF EXISTS {schema}_t4 CASCADE")
