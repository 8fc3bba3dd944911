"""Batches (docs/design.md#batches): chain models under dbt's microbatch runner, real dbt on real
Spark, exact rows.

One project holds, for every merge engine, a var-driven chain `v_<engine>` and the same model
with batches `b_<engine>`, and a downstream microbatch model `d` over `v_deduplicate`: five
var-driven runs (each also runs `d` for its day), then one range run of the batch models that
fails on the fourth day, `dbt retry`, the same range again and a rewrite; and `r_deduplicate`,
whose range's last batch fails after its publish, then `dbt retry`. A second project runs
a chain without flags (its current batch and `lookback`) and an hourly chain.
"""

from __future__ import annotations

import datetime as dt
import random

from helpers import read_days

# five days: the range's failure on the fourth leaves days before it written and one after it
# not written, retry writes the fourth and fifth, the rewrite both again; changes() gives every
# kind of change there is (tested in test_changes_give_every_kind_of_change)
DAYS = [f"202508{d:02d}" for d in range(1, 6)]
END = "2025-08-06"  # the event-time end of a range over DAYS (exclusive)
COLS = "id, v, w, n, seq, op"
ENGINES = {
    "deduplicate": "sequence_field='seq', rowkind_field='op'",
    "partial": "merge_engine='partial-update', sequence_field='seq', rowkind_field='op', "
    "partial_update_remove_record_on_delete=true, cumulative_delta=false",
    "aggregation": "merge_engine='aggregation', sequence_field='seq', rowkind_field='op', "
    "aggregate_functions={'n': 'sum'}, ignore_retract=['v', 'w'], cumulative_delta=false",
    "first": "merge_engine='first-row', rowkind_field='op', cumulative_delta=false",
}
# (the cumulative delta, built on write, is left to deduplicate: it doubles a run's cost, and
# every read equals merge-on-read either way, tests/functional/test_cumulative.py)
SOURCES = """
version: 2
sources:
  - name: raw
    schema: "{{ target.schema }}"
    tables:
      - name: changes
        config: {event_time: ts}
      - name: live
        config: {event_time: ts}
      - name: hours
        config: {event_time: ts}
"""
TIME = "partition_timestamp_pattern='$dt', partition_timestamp_formatter='yyyyMMdd'"
VAR_MODEL = (
    "{{{{ config(materialized='chain_incremental', partition_by=['dt'], primary_key=['id', 'dt'],"
    " chain_partition={{'dt': var('dt')}}, event_time='dt', " + TIME + ", {engine}) }}}}\n"
    "select " + COLS + ", dt from {{{{ source('raw', 'changes') }}}}"
    " where dt = '{{{{ var(\"dt\") }}}}'\n"
)
BATCH_CONFIG = (
    "materialized='incremental', incremental_strategy='microbatch', chain_table=true, "
    "event_time='dt', batch_size='{size}', begin='{begin}', lookback={lookback}"
)
BATCH_MODEL = (
    "{{{{ config("
    + BATCH_CONFIG
    + ", partition_by=['dt'], primary_key=['id', 'dt'], "
    + TIME
    + ", {engine}) }}}}\n"
    "select " + COLS + ", dt from {{{{ source('raw', '{source}') }}}}\n"
)
# downstream: one row per day of the chain, recomputed batch by batch from ref('v_deduplicate')
DOWNSTREAM = """
{{ config(materialized='incremental', incremental_strategy='microbatch', event_time='dt',
          batch_size='day', begin='2025-08-01', partition_by=['dt']) }}
select count(*) as keys, sum(n) as total, dt from {{ ref('v_deduplicate') }} group by dt
"""


def changes(days: list[str], seed: int = 37) -> list[tuple]:
    """Every key inserted on the first day, then each day five keys changed: an update, a
    delete or an insert, each with a sequence above all before it (one row per key and day)."""
    rnd, seq, rows = random.Random(seed), 0, []
    for i, day in enumerate(days):
        keys = range(1, 9) if i == 0 else sorted(rnd.sample(range(1, 9), 5))
        for k in keys:
            seq += 1
            op = "+I" if i == 0 else rnd.choice(["+U", "+U", "-D", "+I"])
            v, w = rnd.choice(["a", "b", None]), rnd.choice(["x", None])
            rows.append((k, v, w, rnd.randint(1, 9), seq, op, noon(day), day))
    return rows


def noon(day: str) -> dt.datetime:
    """Noon stays on its UTC day in any session time zone dbt's batch bounds are compared in."""
    return dt.datetime.strptime(day, "%Y%m%d").replace(hour=12)


def source(p, name: str, rows: list[tuple]) -> None:
    p.table(
        name, "id int, v string, w string, n int, seq int, op string, ts timestamp, dt string", rows
    )


def deduplicated(rows: list[tuple], day: str) -> list[tuple]:
    """The deduplicate engine's full state of `day`, brute force: a key's highest sequence up
    to the day wins, a winning -D removes it."""
    last: dict[int, tuple] = {}
    for r in sorted((r for r in rows if r[7] <= day), key=lambda r: r[4]):
        last[r[0]] = r
    return sorted(r[:6] for r in last.values() if r[5] != "-D")


def range_run(p, *select: str, vars=None, expect_ok=True, start="2025-08-01", end=END):
    return p.dbt(
        "run",
        "--select",
        *select,
        "--event-time-start",
        start,
        "--event-time-end",
        end,
        vars={"dt": DAYS[-1], **(vars or {})},
        expect_ok=expect_ok,
    )


def batches_logged(p, model: str) -> list[str]:
    """The batches of `model` dbt started in the last command, in order."""
    return [
        line.split("START batch ")[1].split(" of ")[0]
        for line in p.logs
        if "START batch " in line and line.split(" of ")[-1].split(" ")[0].endswith(f".{model}")
    ]


def same_chain(p, models: list[str], days: list[str] = DAYS) -> None:
    """Each batch chain `b_<engine>` of `models` holds the first of `days` as its snapshot and
    the others as deltas, as the var-driven chain `v_<engine>` does, and both read the same
    rows every day (one query: each chain read once, an arm per chain, up to the last day)."""
    for b in models:
        assert p.partitions(f"{b}__snapshot") == [f"dt={days[0]}"], b
        assert p.partitions(f"{b}__delta") == [f"dt={d}" for d in days[1:]], b
    chains = [m for b in models for m in (b, f"v_{b[2:]}")]
    union = " union all ".join(
        f"select {i} as chain, dt, {COLS} from {{s}}.{m} where dt <= '{days[-1]}'"
        for i, m in enumerate(chains)
    )
    reads: dict[str, list[tuple]] = {m: [] for m in chains}
    for row in p.rows(union):  # a key's row once a day: sorted by chain, day and key
        reads[chains[row[0]]].append(tuple(row[1:]))
    for b in models:
        assert reads[b] == reads[f"v_{b[2:]}"], b
        assert {r[0] for r in reads[b]} == set(days), b


def downstream(rows: list[tuple], days: list[str]) -> list[tuple]:
    """The rows of `d` recomputed from the chain's days, as `deduplicated` gives them."""
    return sorted(
        (len(keys), sum(r[3] for r in keys), day)
        for day in days
        for keys in [deduplicated(rows, day)]
    )


def last_batch_fails_after_its_publish(p, monkeypatch) -> None:
    """A range whose last batch fails after its publish, before the view is refreshed: its day
    is published, so `dbt retry` skips it as held, and the skip makes it read through the view
    (each day as the var-driven twin reads it, none empty)."""
    monkeypatch.setenv("CHAINTABLE_FAILPOINT", "publish.done:error")
    range_run(p, "r_deduplicate", expect_ok=False, end="2025-08-03")
    monkeypatch.delenv("CHAINTABLE_FAILPOINT")
    assert "failpoint publish.done" in p.log_text()
    assert p.partitions("r_deduplicate__delta") == [f"dt={DAYS[1]}"]
    p.dbt("retry")
    assert batches_logged(p, "r_deduplicate") == ["2025-08-02"]
    assert "batch 2025-08-02 (dt=20250802): skipped, the chain holds" in p.log_text()
    same_chain(p, ["r_deduplicate"], DAYS[:2])


def test_changes_give_every_kind_of_change():
    """After the first day, changes() updates, deletes and inserts keys both present and
    absent (a delete of an absent key, an update or insert of a deleted one), so each engine's
    chains meet every kind over DAYS; and it gives DAYS' first three days to a range of three."""
    rows, present, kinds = changes(DAYS), set(), set()
    for i, day in enumerate(DAYS):
        for r in (r for r in rows if r[7] == day):
            if i:
                kinds.add((r[5], r[0] in present))
            (present.discard if r[5] == "-D" else present.add)(r[0])
    assert kinds == {(op, alive) for op in ("+I", "+U", "-D") for alive in (True, False)}
    assert changes(DAYS[:3]) == [r for r in rows if r[7] <= DAYS[2]]


def test_backfill_equals_var_runs_for_every_engine_failure_retry_and_downstream(
    project, monkeypatch
):
    p = project
    p.artifacts = True  # dbt retry reads run_results.json
    rows = changes(DAYS)
    source(p, "changes", rows)
    p.file("models/sources.yml", SOURCES)
    for engine, config in ENGINES.items():
        p.model(f"v_{engine}", VAR_MODEL.format(engine=config))
        p.model(
            f"b_{engine}",
            BATCH_MODEL.format(
                size="day", begin="2025-08-01", lookback=0, engine=config, source="changes"
            ),
        )
    p.model("d", DOWNSTREAM)
    p.model(
        "r_deduplicate",
        BATCH_MODEL.format(
            size="day",
            begin="2025-08-01",
            lookback=0,
            engine=ENGINES["deduplicate"],
            source="changes",
        ),
    )
    var_models = [f"v_{e}" for e in ENGINES]
    batch_models = [f"b_{e}" for e in ENGINES]
    for i, day in enumerate(DAYS):
        nxt = (noon(day) + dt.timedelta(days=1)).strftime("%Y-%m-%d")
        range_run(
            p, *var_models, "d", vars={"dt": day}, start=noon(day).strftime("%Y-%m-%d"), end=nxt
        )
        # the downstream model equals its full recompute after every day (from the days that
        # the chain reads, as the assertion after the loop proves it does)
        assert p.rows("select keys, total, dt from {s}.d") == downstream(rows, DAYS[: i + 1])
    assert read_days(p, "v_deduplicate", COLS) == {d: deduplicated(rows, d) for d in DAYS}
    last_batch_fails_after_its_publish(p, monkeypatch)

    # a bad row on the fourth day (a null key): the range stops there, the days before it stay
    source(p, "changes", rows + [(None, "bad", None, 1, 999, "+I", noon(DAYS[3]), DAYS[3])])
    range_run(p, *batch_models, expect_ok=False)
    log = p.log_text()
    same_chain(p, batch_models, DAYS[:3])
    for model in batch_models:
        assert f"model '{model}', batch 2025-08-04 (dt=20250804)" in log
        assert (
            f"model '{model}', batch 2025-08-05 (dt=20250805): not written, batch 2025-08-04 "
            "failed before it" in log
        )
    assert "null" in log.lower()

    # dbt retry writes the failed day and those after it, and no day before
    source(p, "changes", rows)
    p.dbt("retry")
    for model in batch_models:
        assert batches_logged(p, model) == ["2025-08-04", "2025-08-05"]
    same_chain(p, batch_models)

    # the same range again writes nothing; var chain_rewrite writes the days again
    range_run(p, *batch_models)
    assert p.log_text().count("skipped, the chain holds") == 4 * len(DAYS)
    assert "): writing" not in p.log_text()
    range_run(p, "b_deduplicate", vars={"chain_rewrite": True}, start="2025-08-04")
    assert batches_logged(p, "b_deduplicate") == ["2025-08-04", "2025-08-05"]
    assert p.log_text().count("): writing") == 2
    same_chain(p, ["b_deduplicate"])


def test_daily_run_without_flags_lookback_and_hourly_batches(project):
    p = project
    p.file("models/sources.yml", SOURCES)
    today = dt.datetime.now(dt.UTC).date()
    days = [(today - dt.timedelta(days=n)).strftime("%Y%m%d") for n in (2, 1, 0)]

    def live(*rows: tuple) -> None:
        source(p, "live", [(k, v, None, 1, 1, "+I", noon(d), d) for k, v, d in rows])

    live((1, "a", days[0]), (2, "b", days[0]), (1, "a1", days[1]), (3, "c", days[2]))
    p.model(
        "daily",
        BATCH_MODEL.format(
            size="day",
            begin=(today - dt.timedelta(days=2)).isoformat(),
            lookback=1,
            engine="merge_engine='deduplicate'",
            source="live",
        ),
    )

    def state() -> dict[str, list[tuple]]:
        return {d: [r[:2] for r in rs] for d, rs in read_days(p, "daily", COLS).items()}

    # the first run (no chain yet) writes every batch from begin to now
    p.dbt("run", "--select", "daily")
    labels = [f"{d[:4]}-{d[4:6]}-{d[6:]}" for d in days]
    assert batches_logged(p, "daily") == labels
    assert p.partitions("daily__snapshot") == [f"dt={days[0]}"]
    assert p.partitions("daily__delta") == [f"dt={days[1]}", f"dt={days[2]}"]
    assert state() == {
        days[0]: [(1, "a"), (2, "b")],
        days[1]: [(1, "a1"), (2, "b")],
        days[2]: [(1, "a1"), (2, "b"), (3, "c")],
    }
    # a later run writes the current batch and lookback (1) before it, not the day before that
    live(
        (1, "a", days[0]),
        (2, "B", days[0]),
        (1, "a1", days[1]),
        (4, "late", days[1]),
        (3, "c2", days[2]),
    )
    p.dbt("run", "--select", "daily")
    assert batches_logged(p, "daily") == labels[1:]
    assert state() == {
        days[0]: [(1, "a"), (2, "b")],
        days[1]: [(1, "a1"), (2, "b"), (4, "late")],
        days[2]: [(1, "a1"), (2, "b"), (3, "c2"), (4, "late")],
    }

    # hours: one chain partition (dt, hour) per batch
    p.table(
        "hours",
        "id int, v string, ts timestamp, dt string, hour string",
        [
            (1, "h0", dt.datetime(2025, 8, 1, 0, 30), "20250801", "00"),
            (2, "h0", dt.datetime(2025, 8, 1, 0, 40), "20250801", "00"),
            (1, "h1", dt.datetime(2025, 8, 1, 1, 30), "20250801", "01"),
            (3, "h2", dt.datetime(2025, 8, 1, 2, 30), "20250801", "02"),
        ],
    )
    p.model(
        "hourly",
        "{{ config("
        + BATCH_CONFIG.format(size="hour", begin="2025-08-01", lookback=0)
        + ", partition_by=['dt', 'hour'], primary_key=['id', 'dt', 'hour'], "
        "partition_timestamp_pattern='$dt $hour:00:00', "
        "partition_timestamp_formatter='yyyyMMdd HH:mm:ss') }}\n"
        "select id, v, dt, hour from {{ source('raw', 'hours') }}\n",
    )
    p.dbt(
        "run",
        "--select",
        "hourly",
        "--event-time-start",
        "2025-08-01T00:00:00",
        "--event-time-end",
        "2025-08-01T03:00:00",
    )
    assert batches_logged(p, "hourly") == ["2025-08-01T00", "2025-08-01T01", "2025-08-01T02"]
    assert p.partitions("hourly__snapshot") == ["dt=20250801/hour=00"]
    assert p.partitions("hourly__delta") == ["dt=20250801/hour=01", "dt=20250801/hour=02"]
    assert p.rows("select hour, id, v from {s}.hourly") == [
        ("00", 1, "h0"),
        ("00", 2, "h0"),
        ("01", 1, "h1"),
        ("01", 2, "h0"),
        ("02", 1, "h1"),
        ("02", 2, "h0"),
        ("02", 3, "h2"),
    ]


LOOP_MODEL = (
    "{{ config(materialized='chain_incremental', event_time='dt', batch_size='day', "
    "begin='2025-08-01', partition_by=['dt'], primary_key=['id', 'dt'], "
    + TIME
    + ", "
    + ENGINES["deduplicate"]
    + ") }}\n"
    "select " + COLS + ", dt from {{ source('raw', 'changes') }}\n"
)


def test_chain_incremental_runs_its_batches_itself_failure_and_retry(project):
    """A chain_incremental model with batch_size runs a range's batches in one node, each as
    its var-driven twin's run of that day; a failed day stops it, dbt retry writes from it.
    The twin's days are `deduplicated`, which the backfill test above proves equal to them."""
    p = project
    p.artifacts = True  # dbt retry reads run_results.json
    days = DAYS[:3]
    rows = changes(days)
    p.file("models/sources.yml", SOURCES)
    p.model("l_deduplicate", LOOP_MODEL)

    # a null key on the second day: the first is published, the node fails naming the batch
    source(p, "changes", rows + [(None, "bad", None, 1, 999, "+I", noon(days[1]), days[1])])
    range_run(p, "l_deduplicate", expect_ok=False, end="2025-08-04")
    log = p.log_text()
    assert "model 'l_deduplicate', batch 2025-08-02 (dt=20250802)" in log
    assert "writes from 2025-08-02 on" in log
    assert "batch 2025-08-03 (dt=20250803): writing" not in log
    assert p.partitions("l_deduplicate__snapshot") == [f"dt={days[0]}"]
    assert p.partitions("l_deduplicate__delta") == []

    # dbt retry reruns the node with its flags: the day held is skipped, the rest written
    source(p, "changes", rows)
    p.dbt("retry")
    log = p.log_text()
    assert "batch 2025-08-01 (dt=20250801): skipped, the chain holds" in log
    assert log.count("): writing") == 2
    assert "2 batch(es) written, 1 skipped" in log
    # the var-driven twin's layout (a snapshot, then deltas) and its rows of every day
    assert p.partitions("l_deduplicate__snapshot") == [f"dt={days[0]}"]
    assert p.partitions("l_deduplicate__delta") == [f"dt={d}" for d in days[1:]]
    assert read_days(p, "l_deduplicate", COLS) == {d: deduplicated(rows, d) for d in days}
