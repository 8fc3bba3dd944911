"""The batch planner (docs/design.md#batches): a batch's chain partition, when a batch is
skipped, which batches wait for a failed one, and the event-time filter of a chain's refs; with
properties over random times and formatters."""

import datetime as dt
import random

import pytest
from dbt.adapters.base.relation import EventTimeFilter

from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.base.timestamps import partition_time, partition_values
from dbt.adapters.chaintable.base.values import ChainConfigError
from dbt.adapters.chaintable.batch import loop, plan
from dbt.adapters.chaintable.batch.plan import BatchSpec, Ledger
from dbt.adapters.chaintable.batch.relation import ChainTableRelation, chain_time

DAY = {
    "incremental_strategy": "microbatch",
    "batch_size": "day",
    "partition_by": ["region", "dt"],
    "chain_partition_keys": ["dt"],
    "primary_key": ["id", "region", "dt"],
    "partition_timestamp_pattern": "$dt",
    "partition_timestamp_formatter": "yyyyMMdd",
}
HOUR = {
    **DAY,
    "batch_size": "hour",
    "partition_by": ["dt", "hour"],
    "chain_partition_keys": None,
    "primary_key": ["id", "dt", "hour"],
    "partition_timestamp_pattern": "$dt $hour:00:00",
    "partition_timestamp_formatter": "yyyyMMdd HH:mm:ss",
}
UTC = dt.UTC


def spec(config):
    return BatchSpec.of("t", ChainOptions.from_config("t", config), config)


def test_a_batch_writes_the_chain_partition_of_its_start():
    day = spec(DAY).batch(dt.datetime(2025, 8, 1, tzinfo=UTC))
    assert (day.label, dict(day.partition)) == ("2025-08-01", {"dt": "20250801"})
    assert day.describe() == "model 't', batch 2025-08-01 (dt=20250801)"
    hour = spec(HOUR).batch("2025-08-01T22:00:00+00:00")
    assert (hour.label, dict(hour.partition)) == ("2025-08-01T22", {"dt": "20250801", "hour": "22"})
    # an aware time in another zone is the same instant
    east = dt.timezone(dt.timedelta(hours=8))
    assert spec(DAY).batch(dt.datetime(2025, 8, 1, 8, tzinfo=east)).partition == {"dt": "20250801"}


@pytest.mark.parametrize(
    "change, message",
    [
        ({"incremental_strategy": "merge"}, "set incremental_strategy='microbatch'"),
        ({"batch_size": "month"}, "batch_size 'month' is not one of ['day', 'hour']"),
        ({"chain_partition": {"dt": "20250801"}}, "drop chain_partition"),
        (
            {"partition_timestamp_pattern": None, "partition_timestamp_formatter": None},
            "partition_timestamp_pattern and partition_timestamp_formatter name each batch",
        ),
        ({"partition_timestamp_pattern": "$region $dt"}, "must name every chain key ['dt']"),
    ],
)
def test_a_config_batches_cannot_work_with_is_refused_naming_the_model(change, message):
    with pytest.raises(ChainConfigError) as e:
        spec({**DAY, **change})
    assert "chain model 't' with batches: " in str(e.value) and message in str(e.value)


def test_an_hourly_batch_under_a_pattern_of_days_is_refused_naming_the_batch():
    with pytest.raises(ChainConfigError, match=r"chain model 't', batch 2025-08-01T22: no chain"):
        spec({**DAY, "batch_size": "hour"}).batch("2025-08-01T22:00:00+00:00")


@pytest.mark.parametrize(
    "held, ranged, rewrite, full_refresh, skipped",
    [
        (True, True, False, False, True),  # a range leaves the days the chain holds
        (False, True, False, False, False),  # and writes the ones it lacks
        (True, True, True, False, False),  # chain_rewrite writes them again
        (True, True, "true", False, False),
        (True, True, False, True, False),  # a full refresh rebuilds
        (True, False, False, False, False),  # no flags: current batch and lookback, rewritten
    ],
)
def test_only_a_range_skips_a_day_the_chain_holds(held, ranged, rewrite, full_refresh, skipped):
    batch = spec(DAY).batch("2025-08-04")
    reason = plan.skip_reason(batch, held, ranged, rewrite, full_refresh)
    assert (reason is not None) == skipped
    if skipped:
        assert reason.startswith("model 't', batch 2025-08-04 (dt=20250804): skipped")


def test_holds_looks_at_the_chain_keys_of_either_branch():
    s = spec(DAY)
    batch = s.batch("2025-08-04")
    assert plan.holds(s, [("EU", "20250804"), ("EU", "20250804")], batch)  # both branches
    assert not plan.holds(s, [("EU", "20250803")], batch)
    assert not plan.holds(s, [], batch)
    assert plan.ranged({"event_time_start": "2025-08-01"})
    assert not plan.ranged({"event_time_start": None, "event_time_end": None})


def test_a_day_held_by_some_groups_only_is_not_held():
    """A run of a day writes every group the chain knows, so a day some of them lack was left
    part-way and is written again; a group first seen later is not asked of it."""
    s = spec(DAY)
    batch = s.batch("2025-08-04")
    before = [("EU", "20250803"), ("US", "20250803")]
    assert not plan.holds(s, [*before, ("EU", "20250804")], batch)
    assert plan.holds(s, [*before, ("EU", "20250804"), ("US", "20250804")], batch)
    # a group whose first partition is later, or one only the snapshot branch has held
    later = [("APAC", "20250805"), ("EU", "20250805"), ("US", "20250805")]
    assert plan.holds(s, [*before, ("EU", "20250804"), ("US", "20250804"), *later], batch)
    assert not plan.holds(s, [("EU", "20250801"), ("US", "20250804")], batch)
    # hours: the group's earlier hour of the same day makes it known
    h = spec(
        {
            **HOUR,
            "partition_by": ["region", "dt", "hour"],
            "chain_partition_keys": ["dt", "hour"],
            "primary_key": ["id", "region", "dt", "hour"],
        }
    )
    one = h.batch("2025-08-01T22:00:00")
    assert not plan.holds(h, [("EU", "20250801", "21"), ("US", "20250801", "22")], one)
    assert plan.holds(h, [("EU", "20250801", "23"), ("US", "20250801", "22")], one)


def test_after_a_failed_batch_the_later_batches_of_the_invocation_are_refused():
    s, ledger = spec(DAY), Ledger()
    days = [s.batch(f"2025-08-0{d}") for d in (1, 2, 3)]
    ledger.begin("run1", days[0])
    ledger.finish("run1", days[0])
    ledger.begin("run1", days[1])  # fails: never finished
    with pytest.raises(ChainConfigError) as e:
        ledger.begin("run1", days[2])
    assert e.value.msg == (
        "model 't', batch 2025-08-03 (dt=20250803): not written, batch 2025-08-02 failed "
        "before it; dbt retry (or the same command again) writes from 2025-08-02 on"
    )
    ledger.begin("retry", days[1])  # another invocation (dbt retry) starts afresh
    other = BatchSpec.of("u", ChainOptions.from_config("u", DAY), DAY).batch("2025-08-03")
    ledger.begin("run1", other)  # and so does another model


def test_a_skipped_batch_refreshes_the_view_once_per_model_and_invocation():
    ledger = Ledger()
    assert ledger.view_behind("run1", "t")
    ledger.view_refreshed("run1", "t")
    assert not ledger.view_behind("run1", "t")
    assert ledger.view_behind("run1", "u") and ledger.view_behind("retry", "t")


def test_a_chains_event_time_filter_compares_its_keys_as_they_are_spelt():
    start, end = dt.datetime(2025, 8, 1, tzinfo=UTC), dt.datetime(2025, 8, 2, tzinfo=UTC)
    assert plan.event_time_filter(["dt"], "$dt", "yyyyMMdd", start, end) == (
        "dt >= '20250801' and dt < '20250802'"
    )
    assert plan.event_time_filter(
        ["dt", "hour"], "$dt $hour:00:00", "yyyyMMdd HH:mm:ss", start, None
    ) == ("concat(dt, ' ', hour, ':00:00') >= '20250801 00:00:00'")
    # a bound between partitions, or a formatter that does not sort, compares times
    noon = dt.datetime(2025, 8, 1, 12, tzinfo=UTC)
    assert plan.event_time_filter(["dt"], "$dt", "yyyyMMdd", noon, None) == (
        "to_timestamp(dt, 'yyyyMMdd') >= timestamp'2025-08-01 12:00:00'"
    )
    assert plan.event_time_filter(["dt"], "$dt", "dd-MM-yyyy", None, end) == (
        "to_timestamp(dt, 'dd-MM-yyyy') < timestamp'2025-08-02 00:00:00'"
    )


class Node:
    def __init__(self, **config):
        self.config = config


def test_only_a_chain_whose_event_time_is_a_chain_key_gets_the_chain_filter():
    chain = Node(materialized="chain_incremental", event_time="dt", **DAY)
    assert chain_time(chain) == {
        "chain_time_keys": "dt",
        "chain_time_pattern": "$dt",
        "chain_time_formatter": "yyyyMMdd",
    }
    assert chain_time(Node(materialized="incremental", chain_table=True, event_time="dt", **DAY))
    assert chain_time(Node(materialized="table", event_time="dt", **DAY)) == {}
    assert chain_time(Node(materialized="chain_incremental", event_time="ts", **DAY)) == {}
    over_groups = {**DAY, "partition_timestamp_pattern": "$region-$dt"}
    assert chain_time(Node(materialized="chain_incremental", event_time="dt", **over_groups)) == {}
    relation = ChainTableRelation.create(schema="s", identifier="t", **chain_time(chain))
    window = EventTimeFilter(field_name="dt", start=dt.datetime(2025, 8, 1, tzinfo=UTC))
    assert relation._render_event_time_filtered(window) == "dt >= '20250801'"
    plain = ChainTableRelation.create(schema="s", identifier="t")
    assert plain._render_event_time_filtered(window) == "dt >= '2025-08-01 00:00:00+00:00'"


FORMATTERS = [
    ("$dt", "yyyyMMdd", ["dt"], "day"),
    ("$dt", "yyyy-MM-dd", ["dt"], "day"),
    ("$dt", "dd/MM/yyyy", ["dt"], "day"),
    ("$dt $hour:00:00", "yyyyMMdd HH:mm:ss", ["dt", "hour"], "hour"),
    ("$dt $hour", "yyyy-MM-dd HH", ["dt", "hour"], "hour"),
    ("$dt-$hour", "yyyyMMdd-HH", ["dt", "hour"], "hour"),
]


@pytest.mark.parametrize("pattern, formatter, keys, size", FORMATTERS)
def test_random_batch_starts_give_partitions_whose_time_is_the_start(
    pattern, formatter, keys, size
):
    rnd = random.Random(f"{pattern}{formatter}")
    step = plan.SIZES[size]
    for _ in range(200):
        start = dt.datetime(2000, 1, 1) + step * rnd.randrange(
            0, 300_000 if size == "hour" else 12_000
        )
        values = partition_values(pattern, formatter, keys, start)
        assert values is not None and partition_time(pattern, formatter, values) == start
        # a time between two batch starts names no partition
        assert partition_values(pattern, formatter, keys, start + step / 2) is None


@pytest.mark.parametrize("pattern, formatter, keys, size", FORMATTERS)
def test_random_windows_keep_exactly_the_partitions_whose_time_lies_in_them(
    pattern, formatter, keys, size
):
    """Whichever form the filter takes, it keeps the partitions of [start, end)."""
    rnd = random.Random(f"window {pattern}{formatter}")
    step = plan.SIZES[size]
    base = dt.datetime(2025, 1, 1)
    parts = [partition_values(pattern, formatter, keys, base + step * i) for i in range(60)]
    for _ in range(100):
        lo, hi = sorted(rnd.sample(range(60), 2))
        start, end = base + step * lo, base + step * hi
        sql = plan.event_time_filter(keys, pattern, formatter, start, end)
        kept = [p for p in parts if _holds(sql, p, pattern, formatter)]
        assert kept == parts[lo:hi]


def _holds(sql: str, values: dict, pattern: str, formatter: str) -> bool:
    """Evaluate the filter on one partition in Python: text compared as text, or times."""
    out = True
    for clause in sql.split(" and "):
        op = ">=" if " >= " in clause else "<"
        expr, literal = clause.split(f" {op} ")
        if literal.startswith("timestamp'"):
            assert expr.startswith("to_timestamp(") and expr.endswith(f", '{formatter}')")
            value = partition_time(pattern, formatter, values)
            bound = dt.datetime.fromisoformat(literal[len("timestamp'") : -1])
            out &= value >= bound if op == ">=" else value < bound
        else:
            text, bound_text = _expr(expr, values), literal.strip("'")
            out &= text >= bound_text if op == ">=" else text < bound_text
    return out


def _expr(expr: str, values: dict) -> str:
    if not expr.startswith("concat("):
        return values[expr]
    args = [a.strip() for a in expr[len("concat(") : -1].split(", ")]
    return "".join(a[1:-1] if a.startswith("'") else values[a] for a in args)


def starts(size, now, args=None, begin=None, lookback=1, new_chain=False):
    return [
        s.isoformat() for s in plan.loop_starts(size, now, args or {}, begin, lookback, new_chain)
    ]


def test_a_looped_chain_names_its_batches_as_dbt_splits_a_microbatch_run():
    now = dt.datetime(2025, 8, 5, 13, 20, tzinfo=UTC)
    # flags: every batch start in [start, end), the start truncated, the end rounded up
    args = {"event_time_start": "2025-08-01 06:00:00", "event_time_end": "2025-08-03"}
    assert starts("day", now, args) == ["2025-08-01T00:00:00", "2025-08-02T00:00:00"]
    hours = {"event_time_start": "2025-08-01T22:00:00", "event_time_end": "2025-08-02T00:30:00"}
    assert starts("hour", now, hours) == [
        "2025-08-01T22:00:00",
        "2025-08-01T23:00:00",
        "2025-08-02T00:00:00",
    ]
    # a retry's flags are the same, whatever the chain holds
    assert starts("day", now, args, new_chain=True) == starts("day", now, args)
    # no flags: the current batch and lookback before it; a new chain from begin
    assert starts("day", now, lookback=1) == ["2025-08-04T00:00:00", "2025-08-05T00:00:00"]
    assert starts("hour", now, lookback=0) == ["2025-08-05T13:00:00"]
    assert starts("day", now, begin="2025-08-03", new_chain=True) == [
        "2025-08-03T00:00:00",
        "2025-08-04T00:00:00",
        "2025-08-05T00:00:00",
    ]
    # exactly on a batch's start, as dbt's: the batch that just ended is the current one
    midnight = dt.datetime(2025, 8, 5, tzinfo=UTC)
    assert starts("day", midnight, lookback=0) == ["2025-08-04T00:00:00"]
    with pytest.raises(ChainConfigError, match="needs `begin`"):
        starts("day", now, new_chain=True)


def test_a_looped_batch_keeps_the_models_rows_of_its_chain_partition():
    looped = {**HOUR, "incremental_strategy": None, "materialized": "chain_incremental"}
    one = spec(looped).batch("2025-08-01T22:00:00")
    assert plan.batch_sql("select * from t;\n", one) == (
        "select * from (\nselect * from t\n) as chain_batch "
        "where `dt` = '20250801' and `hour` = '22'"
    )
    day = spec(DAY).batch(dt.datetime(2025, 8, 1))
    assert plan.batch_sql("select 1 -- note", day).endswith(
        "select 1 -- note\n) as chain_batch where `dt` = '20250801'"
    )
    # chain_partition wins over batch_size; an incremental model's batches are dbt's
    assert loop.loops({"batch_size": "day"})
    assert not loop.loops({"batch_size": "day", "chain_partition": {"dt": "20250801"}})
    assert not loop.loops({"chain_partition": {"dt": "20250801"}})
