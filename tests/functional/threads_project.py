"""The project of the `dbt run --threads 4` tests (test_threads.py, and test_metastore.py on a
Hive metastore service): eight chain models over one source and two models downstream of them,
and what each day of it reads as when run with `--threads 1` in a test process's session (the
`threads_reference` fixture of conftest.py), which every run with `--threads 4` must read as, in a
session or on a server."""

from __future__ import annotations

import fcntl
import json
import os
import textwrap
import uuid
from collections.abc import Callable
from pathlib import Path

from helpers import Project, session_output

SOURCE = "{{ ref('changes') }}"  # built by each run's own dbt, in its schema
CHAIN = """
{{{{ config(materialized='chain_incremental', partition_by={partition_by},
          primary_key={primary_key}, chain_partition={{'dt': var('dt')}}, {extra}) }}}}
select {cols} from {source} where dt = '{{{{ var("dt") }}}}'
"""
CHAINS = {
    "c_dedup": (
        "['region', 'dt']",
        "['id', 'region', 'dt']",
        "chain_partition_keys=['dt'], "
        "sequence_field='seq', rowkind_field='op', chain_compaction={'max_chain_length': 2}",
    ),
    "c_plain": ("['dt']", "['id', 'region', 'dt']", "cumulative_delta=false"),
    "c_partial": (
        "['region', 'dt']",
        "['id', 'region', 'dt']",
        "chain_partition_keys=['dt'], merge_engine='partial-update', sequence_field='seq'",
    ),
    "c_agg": (
        "['region', 'dt']",
        "['id', 'region', 'dt']",
        "chain_partition_keys=['dt'], merge_engine='aggregation', aggregate_functions={'n': 'sum'}",
    ),
    "c_first": ("['dt']", "['id', 'region', 'dt']", "merge_engine='first-row'"),
    "c_ratio": (
        "['region', 'dt']",
        "['id', 'region', 'dt']",
        "chain_partition_keys=['dt'], "
        "sequence_field='seq', chain_compaction={'max_cumulative_ratio': 0.2}",
    ),
    "c_bucketed": ("['dt']", "['id', 'region', 'dt']", "buckets=2, clustered_by=['id']"),
    "c_expiring": (
        "['region', 'dt']",
        "['id', 'region', 'dt']",
        "chain_partition_keys=['dt'], "
        "partition_timestamp_pattern='$dt', partition_timestamp_formatter='yyyyMMdd', "
        "partition_expiration_time='400 d', partition_expiration_check_interval='1 s', "
        "chain_compaction={'max_chain_length': 1}",
    ),
}
DOWNSTREAM = {
    # a daily aggregate over one chain's full day, and a day read through chain_read
    "d_counts": "{{ config(materialized='incremental', partition_by=['dt'], "
    "incremental_strategy='insert_overwrite') }}\n"
    "select region, count(*) as n, sum(n) as total, dt from {{ ref('c_dedup') }} "
    "where dt = '{{ var(\"dt\") }}' group by region, dt",
    "d_read": "{{ config(materialized='table') }}\n"
    "select * from {{ chain_read(ref('c_partial'), {'dt': var('dt')}) }}",
}
DAYS = ["20250801", "20250802", "20250803"]
ROWS = (
    [(i, f"v{i}", i, 10, "+I", r, DAYS[0]) for i in range(1, 9) for r in ("CN", "US")]
    + [(1, "a2", 5, 20, "+U", "CN", DAYS[1]), (2, "b2", 1, 21, "-D", "US", DAYS[1])]
    + [(3, "c2", 2, 22, "+U", "US", DAYS[1])]
    + [(1, "a3", 1, 30, "+U", "US", DAYS[2]), (9, "i3", 9, 31, "+I", "CN", DAYS[2])]
    + [(4, "d4", 3, 40, "+U", "CN", DAYS[2]), (5, "e4", 2, 41, "+U", "US", DAYS[2])]
    + [(6, "f4", 1, 42, "+U", "CN", DAYS[2])]
)


COLUMNS = "id, v, n, seq, op, region, dt"


PROJECT = """
name: chain_test
version: '1.0'
config-version: 2
profile: chain_test
model-paths: [models]
macro-paths: [macros]
models:
  chain_test:
    +schema: "{{ var('sfx') }}"
"""


def write_project(root: Path, chains: tuple[str, ...] = tuple(CHAINS)) -> None:
    """The project: its models (write_models); every model goes to the schema
    `<profile schema>_<var sfx>`."""
    (root / "dbt_project.yml").write_text(PROJECT)
    write_models(root / "models", chains)


def write_models(models: Path, chains: tuple[str, ...] = tuple(CHAINS)) -> None:
    """The source `changes` (a table model), the chains (all of CHAINS, or those named) and the
    downstream models, in the directory `models`."""
    models.mkdir(parents=True, exist_ok=True)
    values = ", ".join(
        "(" + ", ".join(repr(v) if isinstance(v, str) else str(v) for v in row) + ")"
        for row in ROWS
    )
    (models / "changes.sql").write_text(
        "{{ config(materialized='table') }}\nselect * from values "
        + values
        + " as s(id, v, n, seq, op, region, dt)\n"
    )
    for name in chains:
        partition_by, key, extra = CHAINS[name]
        sql = CHAIN.format(
            partition_by=partition_by, primary_key=key, extra=extra, cols=COLUMNS, source=SOURCE
        )
        (models / f"{name}.sql").write_text(textwrap.dedent(sql))
    for name, sql in DOWNSTREAM.items():
        (models / f"{name}.sql").write_text(sql)


def queries(schema: str, chains: tuple[str, ...] = tuple(CHAINS)) -> dict[str, str]:
    """What is compared: every model's rows and both branches' partitions."""
    out = {model: f"select * from {schema}.{model}" for model in [*chains, *DOWNSTREAM]}
    for model in chains:
        for branch in ("snapshot", "delta"):
            out[f"{model}__{branch}"] = f"SHOW PARTITIONS {schema}.{model}__{branch}"
    return out


def normalized(results: dict[str, list]) -> dict[str, list]:
    return {k: sorted((tuple(r) for r in rows), key=repr) for k, rows in results.items()}


def run_and_compare(
    run: Callable[[str], None],
    read: Callable[[dict[str, str]], dict],
    schema: str,
    reference: Callable[[], dict[str, dict[str, list]]],
    days: list[str] = DAYS,
    chains: tuple[str, ...] = tuple(CHAINS),
) -> None:
    """Each of `days` run with --threads 4 into `<schema>_t4`: after each day the schema reads as
    the reference (the contents after each day run with --threads 1) does for `chains` and the
    downstream models. The reference is asked for only once the days have run: on the other
    test worker it may still be building meanwhile."""
    got = {}
    for day in days:
        run(day)
        got[day] = normalized(read(queries(f"{schema}_t4", chains)))
    assert_reads_as_reference(got, reference)


def assert_reads_as_reference(
    got: dict[str, dict[str, list]], reference: Callable[[], dict[str, dict[str, list]]]
) -> None:
    """Each day of `got` ({day: normalized results of `queries`}) reads as that day of the
    reference does, query for query."""
    expected = reference()
    for day, reads in got.items():
        assert reads == {k: expected[day][k] for k in reads}, day


def shared_reference(
    spark, spark_root, tmp_path_factory
) -> Callable[[], dict[str, dict[str, list]]]:
    """A getter of every day of DAYS run with --threads 1 in a session: {day: contents after it},
    what every run with --threads 4 must read as, in a session or on a server. Its tests may run
    on both test workers (the servers' tests are grouped on one): the first to call it builds it,
    under a file lock in the directory the workers share, and the other reads what it wrote."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # this run's directory, above each worker's own
    built: dict[str, dict[str, list]] = {}

    def get() -> dict[str, dict[str, list]]:
        if built:
            return built
        with open(shared / "threads-reference.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            done = shared / "threads-reference.json"
            if done.exists():
                built.update(
                    {
                        day: {k: [tuple(r) for r in rows] for k, rows in contents.items()}
                        for day, contents in json.loads(done.read_text()).items()
                    }
                )
            else:
                built.update(build_reference(spark, spark_root, tmp_path_factory))
                done.write_text(json.dumps(built))
        return built

    return get


def build_reference(spark, spark_root, tmp_path_factory) -> dict[str, dict[str, list]]:
    p = Project(
        tmp_path_factory.mktemp("t1"),
        spark,
        session_output(spark_root),
        "r1_" + uuid.uuid4().hex[:8],
    )
    write_project(p.root)
    out = {}
    try:
        for day in DAYS:
            p.dbt("run", "--threads", "1", vars={"dt": day, "sfx": "t1"})
            qs = queries(f"{p.schema}_t1")
            out[day] = normalized({k: p.spark.sql(q).collect() for k, q in qs.items()})
    finally:
        spark.sql(f"DROP DATABASE IF EXISTS {p.schema}_t1 CASCADE")
    last = out[DAYS[-1]]
    # what the days prove: the policies compacted, expiration kept only the last day (every
    # day is 400 days old), the downstream models hold every day
    assert last["c_dedup__snapshot"] == [
        (f"region={r}/dt={d}",) for r in ("CN", "US") for d in DAYS[::2]
    ]
    assert last["c_expiring__snapshot"] == [(f"region={r}/dt={DAYS[-1]}",) for r in ("CN", "US")]
    assert sorted({r[-1] for r in last["d_counts"]}) == DAYS
    assert {r[-1] for r in last["d_read"]} == {DAYS[-1]}
    return out


# on a server, the first two days: a first load and a day of deltas (with the compaction and the
# expiration of `c_expiring`), over four of the chains and the models downstream of them, still
# more models than threads; how each merge engine and option runs beside the others is the
# session test's (all eight chains, three days)
SERVER_DAYS = DAYS[:2]
SERVER_CHAINS = ("c_dedup", "c_partial", "c_bucketed", "c_expiring")
