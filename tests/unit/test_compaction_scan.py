"""A compaction's one scan of what it wrote: the rows per group it logs and, where the cumulative
delta records them, the new anchors' highest sequences, from one statement (compaction/plan.py,
written_scan); the statement on the fake catalog, and the split of its rows."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from dbt.adapters.chaintable.base.keys import (
    P_ANCHOR_SEQUENCE,
    P_BRANCH,
    P_SNAPSHOT_GENERATIONS,
)
from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.compaction import compactor
from dbt.adapters.chaintable.compaction.plan import rows_per_group, written_scan
from dbt.adapters.chaintable.cumulative.plan import sequence_maxima
from tests.unit.fake_catalog import FakeConnections, fake_adapter
from tests.unit.test_golden_sql import COLUMNS, CONFIG
from tests.unit.test_golden_sql import setup as chain_setup

WHERE = "FROM s.t__snapshot WHERE (`region` IN ('CN', 'US') AND `dt` = '20250104')"
BOTH = (
    f"SELECT `region`, `dt`, count(*), max(CAST(`seq` AS BIGINT)) {WHERE} GROUP BY `region`, `dt`"
)
COUNT = f"SELECT `region`, count(*) {WHERE} GROUP BY `region`"


@pytest.fixture
def logged(monkeypatch) -> list[str]:
    lines: list[str] = []
    monkeypatch.setattr(compactor.logger, "info", lines.append)
    return lines


def scans(conns: FakeConnections) -> list[str]:
    """The queries of the snapshot branch's rows."""
    return [s for s in conns.statements if s.startswith("SELECT") and "FROM s.t__snapshot" in s]


def recorded(conns: FakeConnections) -> dict[str, Any]:
    """The anchors' record, each entry as (highest, whether its token is its partition's
    current one, the sequence field it was read from)."""
    props = conns.tables["s.t__snapshot"].props
    tokens = json.loads(props.get(P_SNAPSHOT_GENERATIONS, "{}"))
    return {
        path: (high, token == tokens.get(path), field)
        for path, (token, field, high) in json.loads(props.get(P_ANCHOR_SEQUENCE, "{}")).items()
    }


SEQ = "seq:bigint"  # the sequence field and its kind, which an entry names


def test_one_scan_gives_the_rows_written_and_the_new_anchors_highest_sequence(logged):
    """Both groups' partitions in one statement; the counts and maxima as a connection may give
    them back (Decimal, str); a partition of only NULL sequences is recorded as such."""
    conns, adapter, rel = chain_setup(recent=7)
    conns.answer(
        "count(*), max(CAST(",
        [("CN", "20250104", Decimal(10), "42"), ("US", "20250104", "5", None)],
    )
    assert adapter.chain_compact(rel, {"dt": "20250104"}) is True
    assert scans(conns) == [BOTH]
    assert "  wrote 10 row(s) for region=CN" in logged
    assert "  wrote 5 row(s) for region=US" in logged
    assert recorded(conns) == {
        "region=CN/dt=20250104": (42, True, SEQ),
        "region=US/dt=20250104": (None, True, SEQ),
    }


def test_a_partition_written_empty_is_neither_logged_nor_recorded(logged):
    conns, adapter, rel = chain_setup(recent=7)
    conns.answer("count(*), max(CAST(", [("CN", "20250104", 10, 42)])
    assert adapter.chain_compact(rel, {"dt": "20250104"}) is True
    assert [line for line in logged if "wrote" in line] == ["  wrote 10 row(s) for region=CN"]
    assert recorded(conns) == {"region=CN/dt=20250104": (42, True, SEQ)}


def test_a_publish_gives_its_partitions_new_tokens_before_it_switches_them(logged):
    """An entry recorded for a partition's old rows (99 for CN 0104 here, under token OLD) no
    longer counts once a publish writes the partition again: the new token comes before the
    partition is added, and the new rows' scan records their own entry. A record written late
    (a writer whose lease ran out) would still name the old token."""
    conns, adapter, rel = chain_setup(recent=7)
    table = conns.tables["s.t__snapshot"]
    table.props[P_SNAPSHOT_GENERATIONS] = (
        '{"region=CN/dt=20250101":"A","region=CN/dt=20250104":"OLD"}'
    )
    table.props[P_ANCHOR_SEQUENCE] = (
        f'{{"region=CN/dt=20250101":["A","{SEQ}",3],"region=CN/dt=20250104":["OLD","{SEQ}",99]}}'
    )
    conns.answer("count(*), max(CAST(", [("CN", "20250104", 10, 42)])
    assert adapter.chain_compact(rel, {"dt": "20250104"}) is True
    renewed = next(
        i
        for i, s in enumerate(conns.statements)
        if s.startswith("ALTER TABLE s.t__snapshot SET TBLPROPERTIES")
        and P_SNAPSHOT_GENERATIONS in s
    )
    added = next(
        i
        for i, s in enumerate(conns.statements)
        if s.startswith("ALTER TABLE s.t__snapshot ADD") and "20250104" in s
    )
    assert renewed < added
    tokens = json.loads(table.props[P_SNAPSHOT_GENERATIONS])
    assert tokens["region=CN/dt=20250101"] == "A"  # not written: its token stays
    assert tokens["region=CN/dt=20250104"] != "OLD"
    assert recorded(conns) == {
        "region=CN/dt=20250101": (3, True, SEQ),
        "region=CN/dt=20250104": (42, True, SEQ),
    }


def holding(adapter):
    """As the compaction that calls it does, under the chain's lock (a write outside it is
    refused): here a guard that always passes."""
    return adapter.chain.catalog.runner.guard(lambda: None)


def test_an_entry_of_another_sequence_field_or_token_is_scanned_again():
    """The sequence field renamed (or retyped) in place, or the partition written since under
    a token the entry does not name: the anchor is scanned, not trusted."""
    for entry in ([None, "seq2:bigint", 3], ["OLD", SEQ, 3], 3):
        conns, adapter, rel = chain_setup()
        conns.tables["s.t__snapshot"].props[P_ANCHOR_SEQUENCE] = json.dumps(
            {"region=CN/dt=20250101": entry}
        )
        conns.answer("max(CAST(", [("CN", "20250101", 30)])
        loaded = adapter.chain.catalog.load(rel)
        conns.statements.clear()
        with holding(adapter):
            _, highest = adapter.chain.accumulator.anchor_sequence_max(loaded, [("CN", "20250101")])
        assert (highest, len(scans(conns))) == ({("CN", "20250101"): 30}, 1), entry
        assert recorded(conns)["region=CN/dt=20250101"] == (30, True, SEQ)


@pytest.mark.parametrize(
    ("config", "columns"),
    [
        ({**CONFIG, "cumulative_delta": False}, COLUMNS),
        (CONFIG, [(c, "string" if c == "seq" else t) for c, t in COLUMNS]),
    ],
    ids=["no_cumulative_delta", "string_sequence"],
)
def test_without_a_highest_sequence_to_record_the_count_alone_is_scanned(logged, config, columns):
    conns, adapter, rel = chain_setup(recent=7, config=config, columns=columns)
    conns.answer("count(*) FROM s.t__snapshot", [("CN", 10), ("US", Decimal(5))])
    assert adapter.chain_compact(rel, {"dt": "20250104"}) is True
    assert scans(conns) == [COUNT]
    assert "  wrote 10 row(s) for region=CN" in logged
    assert "  wrote 5 row(s) for region=US" in logged
    assert P_ANCHOR_SEQUENCE not in conns.tables["s.t__snapshot"].props


def no_groups() -> tuple[FakeConnections, Any, Any]:
    """A chain of `dt` alone: snapshot 0101, deltas 0102-0103."""
    config = {**CONFIG, "partition_by": ["dt"], "primary_key": ["id", "dt"]}
    props = ChainOptions.from_config("t", config).to_properties()
    conns = FakeConnections()
    for branch, days in (("snapshot", ["20250101"]), ("delta", ["20250102", "20250103"])):
        conns.table(
            f"t__{branch}",
            columns=[c for c in COLUMNS if c[0] != "region"],
            partition_by=("dt",),
            props={**props, P_BRANCH: branch},
            partitions=[f"dt={d}" for d in days],
        )
    adapter = fake_adapter(conns)
    return conns, adapter, adapter.Relation.create(schema="s", identifier="t", type="view")


def test_a_chain_without_groups_scans_by_day_and_logs_an_empty_write_as_zero_rows(logged):
    """count(*) without GROUP BY gave one row, 0 for an empty partition; the scan by day gives
    none, and the log still says 0."""
    conns, adapter, rel = no_groups()
    assert adapter.chain_compact(rel, {"dt": "20250103"}) is True
    assert scans(conns) == [
        "SELECT `dt`, count(*), max(CAST(`seq` AS BIGINT)) FROM s.t__snapshot "
        "WHERE (`dt` = '20250103') GROUP BY `dt`"
    ]
    assert [line for line in logged if "wrote" in line] == ["  wrote 0 row(s) for all rows"]
    assert P_ANCHOR_SEQUENCE not in conns.tables["s.t__snapshot"].props


# ---- the anchors' record from the compaction's scan, as from a scan of its own ----------------
ANCHORS = [("CN", "20250101"), ("CN", "20250108"), ("US", "20250101")]


def record_before(conns: FakeConnections) -> None:
    """CN 0101 recorded under its token (no scan needed), CN 0108 under an old one (written
    again since), US 0101 not at all."""
    table = conns.tables["s.t__snapshot"]
    table.props[P_SNAPSHOT_GENERATIONS] = (
        '{"region=CN/dt=20250101":"A","region=CN/dt=20250108":"B"}'
    )
    table.props[P_ANCHOR_SEQUENCE] = json.dumps(
        {"region=CN/dt=20250101": ["A", SEQ, 3], "region=CN/dt=20250108": ["OLD", SEQ, 1]}
    )


@pytest.mark.parametrize(
    "truth",
    [
        {("CN", "20250101"): 30, ("CN", "20250108"): 8, ("US", "20250101"): 4},
        {("CN", "20250101"): 30, ("CN", "20250108"): None, ("US", "20250101"): 4},
        {("CN", "20250101"): 30, ("US", "20250101"): None},  # CN 0108 has no rows
        {("CN", "20250101"): 30},
    ],
    ids=["maxima", "null_maximum", "empty_partition", "empty_partitions"],
)
def test_the_scanned_maxima_are_recorded_as_a_scan_of_the_anchors_records_them(truth):
    """`truth`: each anchor's highest sequence, no entry for one without rows. A scan of its own
    covers only the anchors whose record is not current (CN 0108, US 0101): CN 0101 keeps its
    record (3) whatever the compaction's scan gave for it (30 here)."""
    results = []
    for scanned in (None, truth):
        conns, adapter, rel = chain_setup()
        record_before(conns)
        if scanned is None:
            rows = [(*a, truth[a]) for a in ANCHORS[1:] if a in truth]
            conns.answer("max(CAST(", rows)
        loaded = adapter.chain.catalog.load(rel)
        conns.statements.clear()
        with holding(adapter):
            _, highest = adapter.chain.accumulator.anchor_sequence_max(loaded, ANCHORS, scanned)
        results.append((highest, recorded(conns), len(scans(conns))))
    assert results[0][:2] == results[1][:2]
    assert results[1][0][("CN", "20250101")] == 3
    assert (results[0][2], results[1][2]) == (1, 0)


# ---- the split of the scan's rows ------------------------------------------------------------
def test_written_scan_sums_a_groups_partitions_and_keeps_each_partitions_maximum():
    rows = [
        ("CN", "20250104", "01", Decimal(3), "7"),
        ("US", "20250104", "01", 2, 9),
        ("CN", "20250104", "02", "4", None),
    ]
    counts, maxima = written_scan(rows, groups=1, keys=3)
    assert counts == {("CN",): 7, ("US",): 2}
    assert list(counts) == [("CN",), ("US",)]  # in the order the groups first come
    assert maxima == {
        ("CN", "20250104", "01"): 7,
        ("US", "20250104", "01"): 9,
        ("CN", "20250104", "02"): None,
    }
    assert all(type(n) is int for n in [*counts.values(), *maxima.values()] if n is not None)


def test_written_scan_of_no_rows():
    assert written_scan([], groups=1, keys=2) == ({}, {})
    assert written_scan([], groups=0, keys=1) == ({(): 0}, {})


def test_rows_per_group_of_a_count_without_groups():
    assert rows_per_group([], 0, at=0) == {(): 0}
    assert rows_per_group([(Decimal(0),)], 0, at=0) == {(): 0}
    assert rows_per_group([(12,)], 0, at=0) == {(): 12}
    assert rows_per_group([("20250104", "12", None)], 0, at=1) == {(): 12}


def test_rows_per_group_of_a_count_by_group():
    assert rows_per_group([("CN", 10), ("US", "5")], 1, at=1) == {("CN",): 10, ("US",): 5}


def test_sequence_maxima_takes_the_last_column_as_an_integer():
    rows = [("CN", "20250101", Decimal(5)), ("US", "20250101", None), (1, 20250102, "-3")]
    assert sequence_maxima(rows, 2) == {
        ("CN", "20250101"): 5,
        ("US", "20250101"): None,
        ("1", "20250102"): -3,
    }


@pytest.mark.parametrize("model", ["orders", "orders__delta", "orders__snapshot"])
def test_a_branch_names_its_own_chain_whatever_the_models_name(model):
    """A branch table's chain: its one suffix stripped (a model named `orders__delta` has the
    snapshot branch `orders__delta__snapshot`), so its publish gives its own partitions new
    tokens and takes its own lock."""
    from dbt.adapters.chaintable.chain.tables import ChainTables

    adapter = fake_adapter(FakeConnections())
    for branch in ("snapshot", "delta"):
        rel = adapter.Relation.create(schema="s", identifier=f"{model}__{branch}", type="table")
        tables = ChainTables.of_branch(rel)
        assert str(tables.view) == f"s.{model}"
        assert str(tables.branch(branch)) == str(rel)
