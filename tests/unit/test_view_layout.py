"""The chain view's layout: the newest delta-only chain values get literal branches, older ones
go through the mapping table, so the view's text is bounded by the newest few days (the
embedded Derby metastore refuses a view of more than 32,700 characters)."""
import datetime as dt

from dbt.adapters.chaintable.options import DEFAULT_VIEW_RECENT, ChainOptions
from dbt.adapters.chaintable.planner import ChainState
from dbt.adapters.chaintable.sqlgen import Renderer

GROUPED = ChainOptions(partition_by=("region", "dt"), chain_keys=("dt",),
                       primary_key=("id", "region", "dt"), sequence_field="seq",
                       rowkind_field="op")
HOURLY = ChainOptions(partition_by=("dt", "hour"), chain_keys=("dt", "hour"),
                      primary_key=("id", "dt", "hour"))
COLS = ["id", "v", "op", "seq", "region", "dt"]
MAP = ("s.t__chain_map", "20260101000000-abcd")


def weekly(days, groups=10):
    """A daily delta for every group, a snapshot every 7th day (weekly compaction)."""
    start = dt.date(2025, 1, 1)
    ds = [(start + dt.timedelta(days=i)).strftime("%Y%m%d") for i in range(days)]
    regions = [f"r{g:02d}" for g in range(groups)]
    snaps = [(r, d) for r in regions for i, d in enumerate(ds) if i % 7 == 0]
    deltas = [(r, d) for r in regions for d in ds[1:]]
    return ChainState.build(GROUPED, snaps, deltas, {"dt": "string"})


def renderer(opts=GROUPED, cols=COLS):
    return Renderer(opts, cols, {"id": "int", "seq": "int"}, "s.t__snapshot", "s.t__delta")


def test_newest_chain_values_keep_literal_branches_older_go_to_the_mapping():
    s = weekly(30, groups=2)
    literal, mapped = s.view_layout(3)
    assert [c for c, _ in literal] == [("20250127",), ("20250128",), ("20250130",)]  # 0129: snapshot
    every = [p for _, plans in s.view_branches() for p in plans]
    assert sorted(mapped + [p for _, plans in literal for p in plans],
                  key=lambda p: (p.chain, p.group)) == sorted(every, key=lambda p: (p.chain, p.group))
    assert {p.chain for p in mapped}.isdisjoint({c for c, _ in literal})
    assert s.view_layout(100) == (s.view_branches(), [])
    assert s.view_layout(0)[0] == []


def test_view_text_does_not_grow_with_history():
    r = renderer()
    sizes = {days: len(r.view(weekly(days).view_layout(DEFAULT_VIEW_RECENT), MAP))
             for days in (21, 60, 365)}
    assert sizes[21] < 32_700 and sizes[365] < 32_700
    assert max(sizes.values()) - min(sizes.values()) < 500, sizes
    # without the mapping (every delta-only day literal) a year would be far over the limit
    assert len(r.view((weekly(365).view_branches(), []))) > 10 * 32_700


def test_mapping_rows_are_the_planned_anchor_and_deltas():
    s = weekly(10, groups=1)
    _, mapped = s.view_layout(1)
    sql = renderer().map_insert("s.m", "v1", mapped)
    assert sql.startswith("INSERT INTO s.m PARTITION (`ct__version` = 'v1') VALUES ")
    # day 0103 of r00 reads snapshot 0101 and deltas 0102, 0103
    assert "('r00', '20250103', '20250101', 'snapshot')" in sql
    assert "('r00', '20250103', '20250102', 'delta')" in sql
    assert "('r00', '20250103', '20250103', 'delta')" in sql
    # day 0109 anchors on the snapshot of 0108; 0110, the newest, is the literal branch
    assert "('r00', '20250109', '20250108', 'snapshot')" in sql
    assert "'20250110'" not in sql
    assert sql.count("'snapshot')") == len(mapped)


def test_mapped_read_merges_per_target_and_orders_by_source_partition():
    sql = renderer().mapped_read(*MAP)
    # the target joins the key of the merge, the source partition orders it
    assert "PARTITION BY `id`, `region`, `ct__target_dt`" in sql
    assert "`seq` DESC NULLS LAST, `dt` DESC NULLS LAST" in sql
    assert "`ct__target_dt` AS `dt`" in sql
    assert "`ct__version` = '20260101000000-abcd' AND `ct__branch` = 'snapshot'" in sql


def test_multi_key_chains_map_every_chain_key():
    s = ChainState.build(HOURLY, [("20250801", "00")],
                         [("20250801", f"{h:02d}") for h in range(1, 6)], {})
    r = renderer(HOURLY, ["id", "v", "dt", "hour"])
    _, mapped = s.view_layout(1)
    assert [p.chain for p in mapped] == [("20250801", f"{h:02d}") for h in range(1, 5)]
    cols = [c for c, _ in r.map_columns()]
    assert cols == ["ct__target_dt", "ct__target_hour", "ct__source_dt", "ct__source_hour",
                    "ct__branch"]
    read = r.mapped_read(*MAP)
    assert "__b.`hour` = __m.`ct__source_hour`" in read and "`ct__target_hour` AS `hour`" in read


def test_default_keeps_a_week_of_literal_branches():
    assert DEFAULT_VIEW_RECENT == 7
