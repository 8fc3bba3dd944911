"""dbt's own features on chain models, real dbt on real Spark: pre- and post-hooks in every form
dbt accepts (chain_incremental and a chain with batches), `dbt run --empty` before a chain's
first load, `dbt run --sample` on a chain that holds the day, and an operation's misspelt
argument.

One project: `t` (hooks), `b` (the same hooks, batches under dbt's microbatch runner), `e`
(`--empty` first) and `s` (groups and chain_partition, then a sampled run); three runs build
what the tests read."""

from __future__ import annotations

import datetime as dt

import pytest
from helpers import module_project

pytestmark = pytest.mark.xdist_group("dbt_features")

SOURCES = """
version: 2
sources:
  - name: raw
    schema: "{{ target.schema }}"
    tables:
      - name: changes
        config: {event_time: ts}
"""


def audit(step: str, count_view: bool) -> str:
    """A hook's SQL: an audit row naming the step, `this`, how many rows of `this` came before
    it (the order the hooks ran in) and, after the write, the rows the view reads."""
    rows = "(select count(*) from {{ this }})" if count_view else "cast(null as bigint)"
    return (
        "insert into {{ target.schema }}.audit select '" + step + "', '{{ this }}', "
        "(select count(*) from {{ target.schema }}.audit where rel = '{{ this }}'), " + rows
    )


# every form dbt takes: a plain string (inside dbt's transaction), before_begin and after_commit
# (outside it), and a dict with `transaction`
HOOKS = (
    f'pre_hook=[before_begin("{audit("pre_out", False)}"), "{audit("pre_in", False)}"], '
    f'post_hook=["{audit("post_in", True)}", '
    f"{{'sql': \"{audit('post_out', True)}\", 'transaction': false}}]"
)
CHAIN = (
    "{{ config(materialized='chain_incremental', partition_by=['dt'], primary_key=['id', 'dt'], "
    + HOOKS
    + ") }}\n"
    "select id, v, dt from {{ source('raw', 'changes') }} where dt = '{{ var(\"dt\") }}'\n"
)
BATCHED = (
    "{{ config(materialized='incremental', incremental_strategy='microbatch', chain_table=true, "
    "event_time='dt', batch_size='day', begin='2025-08-01', partition_by=['dt'], "
    "primary_key=['id', 'dt'], partition_timestamp_pattern='$dt', "
    "partition_timestamp_formatter='yyyyMMdd', " + HOOKS + ") }}\n"
    "select id, v, dt from {{ source('raw', 'changes') }}\n"
)
# is_incremental() marks the rows it selects: the run after `--empty` must read it as false
EMPTY_FIRST = """
{{ config(materialized='chain_incremental', partition_by=['dt'], primary_key=['id', 'dt']) }}
select id, concat(v, '{{ "/inc" if is_incremental() else "" }}') as v, dt
from {{ source('raw', 'changes') }} where dt = '{{ var("dt") }}'
"""
# groups and chain_partition: day 0802 has rows in group 0 and an empty "no changes" partition
# in group 1
SAMPLED = """
{{ config(materialized='chain_incremental', partition_by=['g', 'dt'], primary_key=['id', 'g', 'dt'],
          chain_partition_keys=['dt'], chain_partition={'dt': var('dt')}) }}
select id, v, cast(id % 2 as string) as g, dt
from {{ source('raw', 'changes') }} where dt = '{{ var("dt") }}'
"""
ROWS = [(1, "a", "20250801"), (2, "b", "20250801"), (3, "c", "20250801")]
ROWS += [(2, "b2", "20250802"), (4, "d", "20250802")]


@pytest.fixture(scope="module")
def features(spark, spark_root, tmp_path_factory):
    """`e` run with --empty; then day 0801 of every model (`b`: batches 0801 and 0802), then
    day 0802 of `t` and `e`."""
    with module_project(spark, spark_root, tmp_path_factory, "features") as p:
        p.table(
            "changes",
            "id int, v string, ts timestamp, dt string",
            [(i, v, dt.datetime.strptime(d, "%Y%m%d").replace(hour=12), d) for i, v, d in ROWS],
        )
        p.spark.sql(
            f"create table {p.schema}.audit (step string, rel string, seq bigint, n bigint) "
            "using parquet"
        )
        p.file("models/sources.yml", SOURCES)
        p.model("t", CHAIN)
        p.model("b", BATCHED)
        p.model("e", EMPTY_FIRST)
        p.model("s", SAMPLED)
        p.dbt("run", "--empty", "--select", "e", vars={"dt": "20250801"})
        window = ("--event-time-start", "2025-08-01", "--event-time-end", "2025-08-03")
        p.dbt("run", *window, vars={"dt": "20250801"})
        p.dbt("run", "--select", "t", "e", "s", vars={"dt": "20250802"})
        yield p


def audit_rows(p, model: str) -> list[tuple]:
    return [
        r[1:]
        for r in p.rows(f"select seq, step, n from {{s}}.audit where rel = '{p.schema}.{model}'")
    ]


def test_hooks_run_in_dbts_order_once_per_run(features):
    """pre outside, pre inside, the write, post inside, post outside, with `this` the view:
    each run of `t` once, and `b`'s two batches as one run (dbt runs the pre-hooks before the
    first batch, the post-hooks after the last)."""
    p = features
    first = [("pre_out", None), ("pre_in", None), ("post_in", 3), ("post_out", 3)]
    day2 = [("pre_out", None), ("pre_in", None), ("post_in", 7), ("post_out", 7)]
    assert audit_rows(p, "t") == first + day2
    assert audit_rows(p, "b") == [("pre_out", None), ("pre_in", None)] + day2[2:]
    assert p.rows("select count(*) from {s}.audit") == [(12,)]
    assert p.partitions("b__snapshot") == ["dt=20250801"]
    assert p.partitions("b__delta") == ["dt=20250802"]


def test_first_load_after_empty_run_writes_the_snapshot_branch(features):
    """`dbt run --empty` creates the chain's branches without a partition; the first real run
    is still the chain's first load (snapshot branch, is_incremental() false), the next day a
    delta."""
    p = features
    assert p.partitions("e__snapshot") == ["dt=20250801"]
    assert p.partitions("e__delta") == ["dt=20250802"]
    assert p.rows("select id, v, dt from {s}.e__snapshot") == ROWS[:3]
    assert p.rows("select id, v from {s}.e where dt = '20250802'") == [
        (1, "a"),
        (2, "b2/inc"),
        (3, "c"),
        (4, "d/inc"),
    ]


def test_a_sampled_run_keeps_every_day_the_chain_holds(features):
    """`dbt run --sample` filters the source (event_time: ts) to its window: a window without
    day 0802 gives the model no rows. The sampled run of 0802 writes no "no changes" partition,
    so every day reads as before (README: dbt conventions)."""
    p = features
    days = {
        "20250801": [(1, "a", "1"), (2, "b", "0"), (3, "c", "1")],
        "20250802": [(1, "a", "1"), (2, "b2", "0"), (3, "c", "1"), (4, "d", "0")],
    }

    def reads():
        return {d: p.rows(f"select id, v, g from {{s}}.s where dt = '{d}'") for d in days}

    delta = ["g=0/dt=20250802", "g=1/dt=20250802"]
    assert reads() == days
    assert p.partitions("s__delta") == delta
    window = "{'start': '2020-01-01', 'end': '2020-01-02'}"
    p.dbt("run", "--select", "s", "--sample", window, vars={"dt": "20250802"})
    assert "0 empty partition(s) to the delta branch (--empty or --sample" in p.log_text()
    assert reads() == days
    assert p.partitions("s__delta") == delta
    assert p.rows("select count(*) from {s}.s__delta") == [(2,)]


def test_operation_refuses_a_misspelt_argument(features):
    p = features
    p.run_op("compact_chain", {"modle": "t"}, expect_ok=False)
    log = p.log_text()
    assert "compact_chain: unknown argument 'modle'" in log, log[-3000:]
    assert "model, partition, overwrite, relation" in log
    p.run_op("expire_chain", {"model": "t", "dryrun": True}, expect_ok=False)
    assert "expire_chain of model 't': unknown argument 'dryrun'" in p.log_text()
