"""The chain view's layout: the delta-only chain values after the newest snapshot (at most the
newest `recent`) get literal branches, older ones go through the mapping table, so the view's
text is bounded by the newest few days (the embedded Derby metastore refuses a view of more
than 32,700 characters)."""

import datetime as dt
import functools
import random
import re
import sqlite3

import pytest

from dbt.adapters.chaintable.base.keys import DEFAULT_VIEW_RECENT, P_VIEW_MAP
from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.base.partitions import ChainPlanError
from dbt.adapters.chaintable.chain.state import ChainState
from dbt.adapters.chaintable.view.compact import Known
from dbt.adapters.chaintable.view.fit import VIEW_BUDGET, plan_view
from dbt.adapters.chaintable.view.layout import mapped_runs, stored_in, view_branches, view_layout
from dbt.adapters.chaintable.view.sql import ViewSql

GROUPED = ChainOptions(
    partition_by=("region", "dt"),
    chain_keys=("dt",),
    primary_key=("id", "region", "dt"),
    sequence_field="seq",
    rowkind_field="op",
)
HOURLY = ChainOptions(
    partition_by=("dt", "hour"), chain_keys=("dt", "hour"), primary_key=("id", "dt", "hour")
)
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


def stored_hours():
    """Hours 0 and 10 of one day stored, the others deltas (an integral hour key)."""
    return ChainState.build(
        HOURLY,
        [("20250101", "0"), ("20250101", "10")],
        [("20250101", str(h)) for h in range(1, 12)],
        {"dt": "string", "hour": "int"},
    )


def int_days():
    """An integral day key: 1 and 10 stored, 2..12 deltas."""
    return ChainState.build(
        ChainOptions(partition_by=("d",), chain_keys=("d",), primary_key=("id", "d")),
        [("1",), ("10",)],
        [(str(d),) for d in range(2, 13)],
        {"d": "int"},
    )


def renderer(opts=GROUPED, cols=COLS):
    return ViewSql(opts, cols, {"id": "int", "seq": "int"}, "s.t__snapshot", "s.t__delta")


def test_days_after_the_newest_snapshot_keep_literal_branches_older_go_to_the_mapping():
    s = weekly(30, groups=2)  # snapshots 0101, 0108, ..., 0129
    literal, mapped = view_layout(s, 3)
    assert [c for c, _ in literal] == [("20250130",)]
    every = [p for _, plans in view_branches(s) for p in plans]
    assert sorted(
        mapped + [p for _, plans in literal for p in plans], key=lambda p: (p.chain, p.group)
    ) == sorted(every, key=lambda p: (p.chain, p.group))
    assert {p.chain for p in mapped}.isdisjoint({c for c, _ in literal})
    assert max(p.chain for p in mapped) == ("20250128",)
    assert view_layout(s, 0)[0] == []
    # without a compaction for a while: at most `recent` literal branches, the newest ones
    s = weekly(13, groups=2)  # snapshots 0101, 0108; deltas up to 0113
    assert [c for c, _ in view_layout(s, 7)[0]] == [(f"202501{d:02d}",) for d in range(9, 14)]
    assert [c for c, _ in view_layout(s, 3)[0]] == [(f"202501{d:02d}",) for d in range(11, 14)]
    no_snapshot = ChainState.build(
        GROUPED, [], [("r00", f"202501{d:02d}") for d in range(1, 10)], {"dt": "string"}
    )
    assert [c for c, _ in view_layout(no_snapshot, 2)[0]] == [("20250108",), ("20250109",)]


def test_a_daily_run_leaves_the_mapped_reads_as_they_were():
    """Adding the next day's deltas changes no mapped read: the mapping is reused, not
    rewritten (ViewWriter.refresh compares the rows' digest)."""
    r = renderer()
    before = weekly(12, groups=3)
    after = ChainState.build(
        GROUPED,
        before.snapshots,
        list(before.deltas) + [(f"r{g:02d}", "20250113") for g in range(3)],
        {"dt": "string"},
    )
    assert r.map_rows(view_layout(before, 7)[1]) == r.map_rows(view_layout(after, 7)[1])
    assert view_layout(before, 7)[0] != view_layout(after, 7)[0]


def test_mapped_runs_hold_every_mapped_day_and_no_stored_one():
    s = weekly(30, groups=2)  # snapshots 0101, 0108, 0115, 0122, 0129
    _, mapped = view_layout(s, 3)
    assert mapped_runs(s, mapped, 8) == [
        ("20250102", "20250107"),
        ("20250109", "20250114"),
        ("20250116", "20250121"),
        ("20250123", "20250128"),
    ]
    # past the cap the oldest runs merge into one: a wider range, still holding every day
    assert mapped_runs(s, mapped, 2) == [("20250102", "20250121"), ("20250123", "20250128")]
    assert mapped_runs(s, mapped, 1) == [("20250102", "20250128")]
    assert mapped_runs(s, [], 4) == []
    # a day stored for one group and mapped for another is inside (the anti join sorts it)
    one = ChainState.build(
        GROUPED,
        [("r00", "20250101"), ("r01", "20250101"), ("r00", "20250104")],
        [(r, f"2025010{d}") for r in ("r00", "r01") for d in range(2, 7)],
        {"dt": "string"},
    )
    _, mapped = view_layout(one, 1)
    assert mapped_runs(one, mapped, 8) == [("20250102", "20250105")]
    assert stored_in(one, mapped_runs(one, mapped, 8))
    # integral chain keys compare as numbers (9 before 10)
    hourly = stored_hours()
    _, mapped = view_layout(hourly, 1)
    assert mapped_runs(hourly, mapped, 8) == [("20250101", "20250101")]
    days = int_days()
    _, mapped = view_layout(days, 1)  # 11 is mapped too: past the one literal day kept
    assert mapped_runs(days, mapped, 8) == [("2", "9"), ("11", "11")]


def test_stored_partitions_inside_the_mapped_runs():
    s = weekly(30, groups=2)  # snapshots 0101, 0108, 0115, 0122, 0129
    _, mapped = view_layout(s, 3)
    assert not stored_in(s, mapped_runs(s, mapped, 8))
    # the merged oldest run spans the stored 0108 and 0115
    assert stored_in(s, mapped_runs(s, mapped, 2))
    assert not stored_in(s, [])
    # a stored hour of a mapped day
    hourly = stored_hours()
    _, mapped = view_layout(hourly, 1)
    assert stored_in(hourly, mapped_runs(hourly, mapped, 8))
    # integral keys compare as numbers: 10 is not between 2 and 9
    days = int_days()
    assert not stored_in(days, [("2", "9"), ("11", "11")])
    assert stored_in(days, [("2", "11")])


def test_without_stored_partitions_in_the_runs_the_view_has_no_anti_join_branch():
    s = weekly(20, groups=2)
    layout = view_layout(s, 3)
    runs = mapped_runs(s, layout[1], 4)
    assert not stored_in(s, runs)
    sql = renderer().view(layout, MAP, runs=runs, stored_in_runs=False)
    branches = sql.split("\nUNION ALL\n")
    cond = (
        "coalesce((`dt` >= '20250102' AND `dt` <= '20250107') "
        "OR (`dt` >= '20250109' AND `dt` <= '20250114') "
        "OR (`dt` >= '20250116' AND `dt` <= '20250117'), false)"
    )
    assert f"WHERE NOT {cond}" in branches[0]
    assert branches[1].split(" FROM ")[0].endswith("'20250118' AS `dt`")  # a literal one
    assert ") __x ON" not in sql  # no anti join against the mapping's targets
    assert sql.count("t__chain_map") == sql.split("\nUNION ALL\n")[-1].count("t__chain_map")
    assert branches[-1].endswith(f"__v WHERE {cond}")
    with_branch = renderer().view(layout, MAP, runs=runs).split("\nUNION ALL\n")
    assert len(with_branch) == len(branches) + 1
    assert with_branch[0] == branches[0]


def test_a_stored_day_between_mapped_days_prunes_the_mapped_branch():
    s = weekly(20, groups=2)  # snapshots 0101, 0108, 0115; 0116, 0117 mapped, 0118.. literal
    layout = view_layout(s, 3)
    sql = renderer().view(layout, MAP, runs=mapped_runs(s, layout[1], 4))
    runs = (
        "coalesce((`dt` >= '20250102' AND `dt` <= '20250107') "
        "OR (`dt` >= '20250109' AND `dt` <= '20250114') "
        "OR (`dt` >= '20250116' AND `dt` <= '20250117'), false)"
    )
    branches = sql.split("\nUNION ALL\n")
    assert f"WHERE NOT {runs}" in branches[0] and "ANTI JOIN" not in branches[0]
    assert f"WHERE {runs}" in branches[1] and "LEFT ANTI JOIN" in branches[1]
    assert branches[-1].endswith(f"__v WHERE {runs}")


def test_later_partitions_prune_the_mapped_branch_and_the_anti_join():
    s = weekly(12, groups=2)
    sql = renderer().view(view_layout(s, 7), MAP)
    upto = "coalesce(`dt` >= '20250102' AND `dt` <= '20250107', false)"
    branches = sql.split("\nUNION ALL\n")
    assert branches[0].startswith("SELECT `id`") and f"WHERE NOT {upto}" in branches[0]
    assert "ANTI JOIN" not in branches[0]
    assert f"WHERE {upto}" in branches[1] and "LEFT ANTI JOIN" in branches[1]
    assert branches[-1].endswith(f"__v WHERE {upto}")
    # snapshot after / up to the mapped, 0109..0112 (two parts each: the anchor rows the deltas
    # leave and the merged keys, each with its own projection), mapped
    assert len(branches) == 2 + 4 * 2 + 1
    assert [b.split(" FROM ")[0].endswith("'20250110' AS `dt`") for b in branches[4:6]] == [
        True,
        True,
    ]


def test_view_text_does_not_grow_with_history():
    r = renderer()
    sizes = {
        days: len(r.view(view_layout(weekly(days), DEFAULT_VIEW_RECENT), MAP))
        for days in (21, 60, 365)
    }
    assert sizes[21] < 32_700 and sizes[365] < 32_700
    assert sizes[365] <= sizes[21] + 500, sizes  # bounded by the literal days, not the history
    # the bound holds without compaction too: at most DEFAULT_VIEW_RECENT literal branches
    stuck = ChainState.build(
        GROUPED,
        [(f"r{g:02d}", "20250101") for g in range(10)],
        [
            (f"r{g:02d}", f"2025{m:02d}{d:02d}")
            for g in range(10)
            for m in range(1, 13)
            for d in range(2, 29)
        ],
        {"dt": "string"},
    )
    assert len(view_layout(stuck, DEFAULT_VIEW_RECENT)[0]) == DEFAULT_VIEW_RECENT
    # without the mapping (every delta-only day literal) a year would be far over the limit
    assert len(r.view((view_branches(weekly(365)), []))) > 10 * 32_700


def test_mapping_rows_are_the_planned_anchor_and_deltas():
    s = weekly(10, groups=1)
    _, mapped = view_layout(s, 1)
    sql = renderer().map_insert("s.m", "v1", mapped)
    assert sql.startswith(
        "INSERT INTO s.m PARTITION (`ct__version` = 'v1') (`region`, `ct__target_dt`, "
        "`ct__source_dt`, `ct__branch`, `ct__stamp`) VALUES "
    )
    # day 0103 of r00 reads snapshot 0101 and deltas 0102, 0103
    assert "('r00', '20250103', '20250101', 'snapshot', NULL)" in sql
    assert "('r00', '20250103', '20250102', 'delta', NULL)" in sql
    assert "('r00', '20250103', '20250103', 'delta', NULL)" in sql
    # day 0109 anchors on the snapshot of 0108; 0110, the newest, is the literal branch
    assert "('r00', '20250109', '20250108', 'snapshot', NULL)" in sql
    assert "'20250110'" not in sql
    assert sql.count("'snapshot', NULL)") == len(mapped)


def test_a_mapped_day_the_cumulative_delta_serves_maps_to_its_anchor_and_c_partition():
    s = weekly(10, groups=1)
    _, mapped = view_layout(s, 1)
    served = {("r00", "20250103"): "stamp0103"}
    sql = renderer().map_insert("s.m", "v1", mapped, served)
    assert "('r00', '20250103', '20250101', 'anchor', NULL)" in sql
    assert "('r00', '20250103', '20250103', 'cumulative', 'stamp0103')" in sql
    assert "('r00', '20250103', '20250102', 'delta', NULL)" not in sql
    assert "('r00', '20250103', '20250101', 'snapshot', NULL)" not in sql
    # the other days as before
    assert "('r00', '20250102', '20250102', 'delta', NULL)" in sql
    read = renderer().mapped_read(*MAP, served=True)
    assert read.count("\nUNION ALL\n") == 2  # the merged targets, then anchor rows, C rows
    assert "`ct__branch` = 'anchor'" in read and "`ct__branch` = 'cumulative'" in read
    assert "__b.`ct__stamp` = __m.`ct__stamp`" in read
    # the anchor's rows whose key (and target) the C partition holds are left out
    assert "LEFT ANTI JOIN" in read and "__a.`ct__target_dt` = __k.`ct__target_dt`" in read
    assert "\nUNION ALL\n" not in renderer().mapped_read(*MAP)
    # every target served: the merge on read is left out (no mapping row feeds it)
    only = renderer().mapped_read(*MAP, served=True, merged=False)
    assert only.count("\nUNION ALL\n") == 1
    assert "`ct__branch` = 'snapshot'" not in only and "`ct__branch` = 'delta'" not in only
    assert "row_number()" not in only
    assert only.split("\nUNION ALL\n") == read.split("\nUNION ALL\n")[1:]


def test_mapped_read_merges_per_target_and_orders_by_source_partition():
    sql = renderer().mapped_read(*MAP)
    # the target joins the key of the merge, the source partition orders it
    assert "PARTITION BY `id`, `region`, `ct__target_dt`" in sql
    assert "`seq` DESC NULLS LAST, `dt` DESC NULLS LAST" in sql
    assert "`ct__target_dt` AS `dt`" in sql
    assert "`ct__version` = '20260101000000-abcd' AND `ct__branch` = 'snapshot'" in sql
    # Spark cannot size the deltas joined to the mapping: their keys are broadcast by hint, as
    # a literal branch's are by size, so the anchor is not shuffled
    assert sql.count("/*+ BROADCAST(__d) */") == 2
    assert "BROADCAST" not in renderer().merged(("20250103",), view_layout(weekly(3), 1)[0][0][1])


def test_multi_key_chains_map_every_chain_key():
    s = ChainState.build(
        HOURLY, [("20250801", "00")], [("20250801", f"{h:02d}") for h in range(1, 6)], {}
    )
    r = renderer(HOURLY, ["id", "v", "dt", "hour"])
    _, mapped = view_layout(s, 1)
    assert [p.chain for p in mapped] == [("20250801", f"{h:02d}") for h in range(1, 5)]
    cols = [c for c, _ in r.map_columns()]
    assert cols == [
        "ct__target_dt",
        "ct__target_hour",
        "ct__source_dt",
        "ct__source_hour",
        "ct__branch",
        "ct__stamp",
    ]
    read = r.mapped_read(*MAP)
    assert "__b.`hour` = __m.`ct__source_hour`" in read and "`ct__target_hour` AS `hour`" in read


def fake_chain(snapshots, deltas):
    """(fake connections, adapter, relation `s.t`): a GROUPED chain whose branches hold the
    days `snapshots` and `deltas` of group `r`."""
    from tests.unit.fake_catalog import FakeConnections, fake_adapter

    conns = FakeConnections()
    for branch, days in (("snapshot", snapshots), ("delta", deltas)):
        conns.table(
            f"t__{branch}",
            columns=[(c, "string") for c in COLS],
            partition_by=("region", "dt"),
            props=GROUPED.to_properties(),
            partitions=[f"region=r/dt={d}" for d in days],
        )
    adapter = fake_adapter(conns)
    return conns, adapter, adapter.Relation.create(schema="s", identifier="t", type="view")


def test_a_view_refresh_keeps_a_week_of_literal_branches_by_default():
    """Without the property, the 7 newest delta-only days get a literal branch each; the older
    ones are read through the mapping table."""
    conns, adapter, rel = fake_chain(["20250101"], [f"202501{d:02d}" for d in range(2, 12)])
    adapter.chain_drop_partition(rel, {"region": "r", "dt": "20250111"}, "delta")  # refreshes
    (view,) = [
        q for q in conns.statements if q.startswith(("CREATE OR REPLACE VIEW", "ALTER VIEW"))
    ]
    literal_days = set(re.findall(r"'(\d{8})' AS `dt` FROM \(SELECT 1 AS __chain_guard\)", view))
    assert len(literal_days) == 7 == DEFAULT_VIEW_RECENT
    assert (
        next(q for q in conns.statements if q.startswith("INSERT INTO s.t__chain_map")).count(
            "'delta', NULL)"
        )
        == 1 + 2
    )  # days 0102 and 0103: their deltas since the anchor


MAP_COLUMNS = [
    ("region", "string"),
    ("ct__target_dt", "string"),
    ("ct__source_dt", "string"),
    ("ct__branch", "string"),
]
DESCRIBE_MAP = "DESCRIBE TABLE s.t__chain_map"
ADD_STAMP = "ALTER TABLE s.t__chain_map ADD COLUMNS (`ct__stamp` string)"


def mapping_refreshes(conns, adapter, rel, days):
    """The statements of each refresh that drops delta day `days[i]` (the newest), each writing a
    new mapping version (the newest mapped day moves to the literal branches)."""
    out = []
    for day in days:
        del conns.statements[:]
        adapter.chain_drop_partition(rel, {"region": "r", "dt": day}, "delta")
        assert [q for q in conns.statements if q.startswith("INSERT INTO s.t__chain_map")]
        out.append(list(conns.statements))
    return out


def a_chain_with_a_mapping_table(columns):
    """A chain whose mapping table `t__chain_map` has `columns` (and the version column) and
    holds the version its snapshot branch records, written by an earlier process."""
    conns, adapter, rel = fake_chain(["20250101"], [f"202501{d:02d}" for d in range(2, 16)])
    conns.table(
        "t__chain_map",
        columns=[*columns, ("ct__version", "string")],
        partition_by=("ct__version",),
        partitions=["ct__version=V0"],
    )
    conns.tables["s.t__snapshot"].props[P_VIEW_MAP] = "V0 0123456789abcdef"
    return conns, adapter, rel


def test_a_mapping_table_from_before_the_stamp_column_gets_it_once():
    """The refresh that first writes a version into a mapping table created before it had the
    stamp column (ViewWriter._mapping) asks for its columns and adds the column; a later one of
    the same process knows it has it and asks nothing."""
    conns, adapter, rel = a_chain_with_a_mapping_table(MAP_COLUMNS)
    first, second = mapping_refreshes(conns, adapter, rel, ["20250115", "20250114"])
    insert = next(i for i, q in enumerate(first) if q.startswith("INSERT INTO s.t__chain_map"))
    assert first.index(DESCRIBE_MAP) < first.index(ADD_STAMP) < insert
    assert first.count(DESCRIBE_MAP) == 1 and first.count(ADD_STAMP) == 1
    assert DESCRIBE_MAP not in second and ADD_STAMP not in second


def test_a_mapping_table_is_described_once_per_process_and_never_after_its_create():
    """A mapping table with the stamp column that another process wrote is described by the
    first refresh that writes a version into it, not by the later ones; nor is a table the
    refresh created itself, as after a full refresh dropped it."""
    conns, adapter, rel = a_chain_with_a_mapping_table([*MAP_COLUMNS, ("ct__stamp", "string")])
    first, second = mapping_refreshes(conns, adapter, rel, ["20250115", "20250114"])
    assert first.count(DESCRIBE_MAP) == 1 and ADD_STAMP not in first
    assert DESCRIBE_MAP not in second
    # a new process asks again
    (third,) = mapping_refreshes(conns, fake_adapter_of(conns), rel, ["20250113"])
    assert third.count(DESCRIBE_MAP) == 1 and ADD_STAMP not in third
    # the mapping table gone (a full refresh drops it): created again, with the column
    del conns.tables["s.t__chain_map"]
    adapter = fake_adapter_of(conns)
    created, later = mapping_refreshes(conns, adapter, rel, ["20250112", "20250111"])
    assert [q for q in created if q.startswith("CREATE TABLE IF NOT EXISTS s.t__chain_map")]
    assert DESCRIBE_MAP not in created and DESCRIBE_MAP not in later


def fake_adapter_of(conns):
    from tests.unit.fake_catalog import fake_adapter

    return fake_adapter(conns)


def test_a_hidden_snapshot_partition_that_is_also_literal_is_left_out_once():
    s = weekly(12, groups=1)  # snapshots 0101, 0108; 0109..0112 literal
    layout = view_layout(s, 7)
    sql = renderer().view(layout, MAP, hidden=[("r00", "20250112"), ("r00", "20250108")])
    first = sql.split("\nUNION ALL\n")[0]
    assert first.endswith(
        "AND NOT ((`region`, `dt`) IN (('r00', '20250109'), ('r00', '20250110'), "
        "('r00', '20250111'), ('r00', '20250112'), ('r00', '20250108')))"
    )


def test_a_drop_naming_a_column_that_is_no_partition_column_is_refused_before_any_change():
    """drop_chain_partition checks its spec as compact_chain does: a misspelt or extra key is
    an error naming the relation and the key, and nothing is refreshed or dropped."""
    conns, adapter, rel = fake_chain(["20250101"], ["20250102"])
    before = len(conns.statements)
    with pytest.raises(ChainPlanError) as err:
        adapter.chain_drop_partition(rel, {"region": "r", "dt": "20250102", "day": "x"}, "delta")
    assert err.value.msg.startswith("drop_chain_partition s.t: partition ")
    assert "names ['day'], which are not partition columns ['region', 'dt']" in str(err.value)
    with pytest.raises(ChainPlanError, match=r"missing \['region'\]"):
        adapter.chain_drop_partition(rel, {"dt": "20250102"}, "delta")
    # the operation's lock is taken and given back; nothing else is written
    changed = [
        q
        for q in conns.statements[before:]
        if q.startswith(("CREATE", "ALTER", "DROP", "INSERT")) and "t__chain_lock" not in q
    ]
    assert changed == []


# ---- the view's text within the metastore's limit (view/fit.py, view/compact.py) ---------------
def _fitted(s, hidden=(), served=False, recent=DEFAULT_VIEW_RECENT, opts=GROUPED, cols=COLS):
    """(plan, text, serving) of the view a refresh writes for state `s`."""
    types = {"id": "int", "seq": "int", **dict.fromkeys(opts.chain_keys, s.chain_types[0])}
    r = ViewSql(opts, cols, types, "s.t__snapshot", "s.t__delta")
    branches = _branches(s)
    plans = [p for _, day in branches for p in day]
    serving = {p.group + p.chain: f"{abs(hash(p)):016x}" for p in plans} if served else {}
    plan = plan_view(r, s, branches, recent, serving, sorted(hidden), MAP[0])
    return plan, plan.text(MAP, serving), serving


_BRANCHES: dict = {}


def _branches(s):
    """view_branches(s), planned once per state (10,000 groups take a second)."""
    if id(s) not in _BRANCHES:
        _BRANCHES[id(s)] = (s, view_branches(s))  # the state held: its id stays its own
    return _BRANCHES[id(s)][1]


@functools.cache
def many_groups(groups=10_000, delta_days=3):
    """A snapshot day for every group (and an older one, about to expire), then daily deltas."""
    regions = [f"region-{g:05d}" for g in range(groups)]
    days = [f"2025010{d}" for d in range(1, delta_days + 2)]
    s = ChainState.build(
        GROUPED,
        [(r, days[0]) for r in regions],
        [(r, d) for r in regions for d in days[1:]],
        {"dt": "string"},
    )
    return s, [(r, "20241231") for r in regions]


def every_read(s):
    return sorted((p.group, p.chain) for _, plans in _branches(s) for p in plans)


def test_a_view_of_10000_groups_fits_the_budget_and_reads_every_day():
    s, expiring = many_groups()
    literal = {}
    for hidden, served in (((), False), ((), True), (expiring, True), (expiring, False)):
        plan, text, _ = _fitted(s, hidden, served)
        assert len(text) <= VIEW_BUDGET, (len(hidden), served, len(text))
        # every delta-only day is read once, literal or mapped
        reads = [p for _, plans in plan.literal for p in plans] + plan.mapped
        assert sorted((p.group, p.chain) for p in reads) == every_read(s)
        assert not plan.hidden_mapped  # a whole day hidden: said by its chain value
        literal[bool(hidden), served] = len(plan.literal)
    # merged on read, the compact lists keep every literal branch; served, the stamps (one per
    # group and day) do not fit, so the days go through the mapping
    assert literal == {(False, False): 3, (False, True): 0, (True, False): 3, (True, True): 0}
    assert not served and len(hidden) == 10_000  # the last one: its text below
    # the expired day and the merged days, in two ranges: the stored day between is read
    assert text.split("\nUNION ALL\n")[0].endswith(
        "WHERE NOT (coalesce((`dt` = '20241231') OR (`dt` >= '20250102' AND `dt` <= '20250104'), "
        "false))"
    )


def test_hidden_partitions_that_no_chain_value_says_go_to_the_mapping():
    """Every other group's snapshot of a day hidden while the others keep theirs: no range
    says them, so the mapping holds them and the snapshot branch leaves them out by a join."""
    s, _ = many_groups()
    hidden = [(f"region-{g:05d}", "20250101") for g in range(0, 10_000, 2)]
    kept = s.without(snapshots=hidden)
    plan, text, serving = _fitted(kept, hidden)
    assert len(text) <= VIEW_BUDGET and plan.hidden_mapped
    rows = plan.map_rows(serving)
    assert "('region-00002', '20250101', '20250101', 'hidden', NULL)" in rows
    assert sum(r.endswith("'hidden', NULL)") for r in rows) == 5_000
    assert (
        "LEFT ANTI JOIN (SELECT DISTINCT `region`, `ct__target_dt` FROM (SELECT * FROM "
        "s.t__chain_map WHERE `ct__version` = '20260101000000-abcd' AND `ct__branch` = 'hidden'))"
    ) in text.split("\nUNION ALL\n")[0]
    assert "region-00002" not in text


def test_10000_partitions_of_history_fit_the_budget():
    days = [str(d) for d in range(1, 10_002)]
    opts = ChainOptions(partition_by=("d",), chain_keys=("d",), primary_key=("id", "d"))
    cols = ["id", "v", "d"]
    # no snapshot yet: each literal day would list every delta before it
    deltas = ChainState.build(opts, [], [(d,) for d in days], {"d": "int"})
    plan, text, _ = _fitted(deltas, opts=opts, cols=cols)
    assert len(text) <= VIEW_BUDGET and len(plan.mapped) == len(days)
    # 10,000 snapshots expired at once, the newest one kept
    every = ChainState.build(opts, [(d,) for d in days], [], {"d": "int"})
    kept = every.without(snapshots=[(d,) for d in days[:-1]])
    plan, text, _ = _fitted(kept, [(d,) for d in days[:-1]], opts=opts, cols=cols)
    assert len(text) <= VIEW_BUDGET and not plan.hidden_mapped
    assert text.endswith(
        "WHERE NOT (coalesce(`d` >= CAST('1' AS int) AND `d` <= CAST('10000' AS int), false))"
    )


def test_a_view_that_fits_is_written_as_before():
    s = weekly(12, groups=3)
    layout = view_layout(s, 7)
    runs = mapped_runs(s, layout[1], 4)
    hidden = [("r00", "20250108")]
    plan, text, _ = _fitted(s, hidden, recent=7)
    assert plan.renderer.known is None and not plan.hidden_mapped
    assert text == renderer().view(layout, MAP, {}, runs, stored_in(s, runs), hidden)
    # the same state in a tight budget: compact lists, then fewer literal branches
    r, branches = renderer(), view_branches(s)
    tight = plan_view(r, s, branches, 7, {}, hidden, MAP[0], budget=len(text) - 1)
    assert tight.renderer.known is not None
    assert len(tight.text(MAP, {})) < len(text)
    tighter = plan_view(r, s, branches, 7, {}, hidden, MAP[0], budget=len(text) // 2)
    assert len(tighter.text(MAP, {})) <= len(text) // 2
    assert 0 < len(tighter.literal) < len(layout[0])
    assert [c for c, _ in tighter.literal] == [c for c, _ in layout[0]][-len(tighter.literal) :]


def _selected(predicate, table, columns, types):
    """The partitions of `table` (values) that SQL `predicate` selects (sqlite)."""
    db = sqlite3.connect(":memory:")
    db.execute(f"CREATE TABLE p ({', '.join(f'`{c}` {types[c]}' for c in columns)})")
    db.executemany(f"INSERT INTO p VALUES ({', '.join('?' * len(columns))})", list(table))
    rows = db.execute(f"SELECT * FROM p WHERE {predicate}").fetchall()
    return {tuple(str(v) for v in row) for row in rows}


@pytest.mark.parametrize("kind", ["string", "int"])
def test_compact_lists_select_exactly_the_partitions_listed(kind):
    """Over random states: a compact list selects exactly its partitions of the branch it
    reads, and the snapshot branch's exclusion leaves out exactly the merged and hidden ones."""
    rng = random.Random(7)
    types = {"region": "TEXT", "dt": "TEXT" if kind == "string" else "INTEGER"}
    for _ in range(300):
        groups = [f"g{i}" for i in range(rng.randint(1, 4))]
        days = [str(d) for d in range(1, rng.randint(2, 12))]
        every = [(g, d) for g in groups for d in days]
        snaps = {p for p in every if rng.random() < 0.3}
        deltas = {p for p in every if rng.random() < 0.6}
        hidden = {p for p in snaps if rng.random() < 0.4}
        s = ChainState.build(GROUPED, snaps - hidden, deltas, {"dt": kind})
        r = ViewSql(GROUPED, COLS, {"dt": kind}, "s.t__snapshot", "s.t__delta")
        r = r.knowing(Known(s, frozenset(hidden)))
        for table in (s.snapshots | hidden, s.deltas):
            for part in (rng.sample(sorted(table), rng.randint(0, len(table))), sorted(table)):
                got = _selected(r.partitions_predicate(part), table, ["region", "dt"], types)
                assert got == set(part), (snaps, deltas, hidden, part)
        merged = [(g, d) for g, d in deltas - s.snapshots if rng.random() < 0.5]
        own = sorted(set(merged) | hidden)
        if own:
            table = s.snapshots | hidden
            got = _selected(r.not_in(own), table, ["region", "dt"], types)
            assert got == table - set(own), (snaps, deltas, hidden, own)
