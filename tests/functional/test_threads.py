"""`dbt run --threads 4` over eight chain models and models downstream of them, in one session
(docs/design.md#crash-safety-and-locking): every chain takes its own lock and renews it from its
own thread, the downstream models wait for theirs, and every day of every model equals the same
days run with `--threads 1` into another schema."""

from __future__ import annotations

import textwrap

SOURCE = "{{ target.schema }}.changes"  # the profile's schema; the models go to <schema>_<sfx>
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
DAYS = ["20250801", "20250802", "20250803", "20250804"]
ROWS = (
    [(i, f"v{i}", i, 10, "+I", r, DAYS[0]) for i in range(1, 9) for r in ("CN", "US")]
    + [(1, "a2", 5, 20, "+U", "CN", DAYS[1]), (2, "b2", 1, 21, "-D", "US", DAYS[1])]
    + [(3, "c2", 2, 22, "+U", "US", DAYS[1])]
    + [(1, "a3", 1, 30, "+U", "US", DAYS[2]), (9, "i3", 9, 31, "+I", "CN", DAYS[2])]
    + [(4, "d4", 3, 40, "+U", "CN", DAYS[3]), (5, "e4", 2, 41, "+U", "US", DAYS[3])]
    + [(6, "f4", 1, 42, "+U", "CN", DAYS[3])]
)


def columns(partition_by: str) -> str:
    return "id, v, n, seq, op, region, dt"


def contents(p, schema: str) -> dict[str, list[tuple]]:
    out = {}
    for model in [*CHAINS, *DOWNSTREAM]:
        out[model] = sorted(
            (tuple(r) for r in p.spark.sql(f"select * from {schema}.{model}").collect()), key=repr
        )
    for model in CHAINS:
        for branch in ("snapshot", "delta"):
            out[f"{model}__{branch}"] = sorted(
                r[0] for r in p.spark.sql(f"SHOW PARTITIONS {schema}.{model}__{branch}").collect()
            )
    return out


def test_threads_4_over_eight_chains_equal_threads_1(project):
    p = project
    p.table(
        "changes", "id int, v string, n int, seq int, op string, region string, dt string", ROWS
    )
    # each run's models go to the schema of its var (`<schema>_t4`, `<schema>_t1`)
    p.file(
        "dbt_project.yml",
        textwrap.dedent("""
        name: chain_test
        version: '1.0'
        config-version: 2
        profile: chain_test
        model-paths: [models]
        macro-paths: [macros]
        models:
          chain_test:
            +schema: "{{ var('sfx') }}"
        """),
    )
    for name, (partition_by, key, extra) in CHAINS.items():
        p.model(
            name,
            CHAIN.format(
                partition_by=partition_by,
                primary_key=key,
                extra=extra,
                cols=columns(partition_by),
                source=SOURCE,
            ),
        )
    for name, sql in DOWNSTREAM.items():
        p.model(name, sql)
    schemas = {threads: f"{p.schema}_t{threads}" for threads in (4, 1)}
    try:
        for day in DAYS:
            for threads in schemas:
                p.dbt("run", "--threads", str(threads), vars={"dt": day, "sfx": f"t{threads}"})
            assert contents(p, schemas[4]) == contents(p, schemas[1]), day
        got = contents(p, schemas[4])
        # the policies compacted, the downstream models hold every day
        assert got["c_dedup__snapshot"] == [
            f"region={r}/dt={d}" for r in ("CN", "US") for d in DAYS[::2]
        ]
        # compacted daily, and every day before the last expired (all are 400 days old)
        assert got["c_expiring__snapshot"] == [f"region={r}/dt={DAYS[-1]}" for r in ("CN", "US")]
        assert sorted({r[-1] for r in got["d_counts"]}) == DAYS
        assert {r[-1] for r in got["d_read"]} == {DAYS[-1]}
    finally:
        for schema in schemas.values():
            p.spark.sql(f"DROP DATABASE IF EXISTS {schema} CASCADE")
