"""Stored changes (history/stored.py): which days a run stores, which groups of a range read
them, and the SQL of both. Their rows are checked on real Spark in
tests/functional/test_history.py and tests/functional/test_cumulative_random.py."""

import re
from dataclasses import replace

import pytest
from test_history import COLS, TYPES, renderer, state
from test_view_layout import GROUPED

from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.base.values import ChainConfigError
from dbt.adapters.chaintable.batch.relation import ChainTableRelation
from dbt.adapters.chaintable.chain.catalog import Loaded
from dbt.adapters.chaintable.chain.state import ChainState
from dbt.adapters.chaintable.chain.tables import ChainTables
from dbt.adapters.chaintable.history import sql, stored
from dbt.adapters.chaintable.history.plan import plan_history

CN5, US5 = ("CN", "20250805"), ("US", "20250805")
TABLE = "s.t__changes"


def flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def test_a_run_stores_the_served_days_of_groups_with_a_day_before():
    s = state()  # CN: snapshots 01 and 04, deltas 02..05; US: snapshot 01, deltas 02..05
    serving = {CN5: "a", US5: "b", ("CN", "20250802"): "c"}
    both = {(("20250804",), ("20250805",)): [("CN",), ("US",)]}
    assert stored.targets(s, [CN5, US5], serving) == both
    # a day the cumulative delta does not serve is not stored
    assert stored.targets(s, [CN5, US5], {CN5: "a"}) == {(("20250804",), ("20250805",)): [("CN",)]}
    # a group's first day has no day before it: EU's day 02
    first = ChainState.build(
        GROUPED, [("CN", "20250801")], [("CN", "20250802"), ("EU", "20250802")], {"dt": "string"}
    )
    written = [("CN", "20250802"), ("EU", "20250802")]
    assert stored.targets(first, written, dict.fromkeys(written, "x")) == {
        (("20250801",), ("20250802",)): [("CN",)]
    }


def test_a_range_reads_stored_changes_of_groups_whose_one_delta_is_to_s_under_its_stamp():
    s = state()
    serving = {CN5: "a", US5: "b"}
    plan = plan_history(s, {"dt": "20250804"}, {"dt": "20250805"}, every_day=False)
    both = {CN5 + ("a.t1",), US5 + ("b.t1",)}
    assert stored.stored_groups(plan, serving, both) == {("CN",): "a.t1", ("US",): "b.t1"}
    # US's changes were stored under a stamp its day no longer has (its inputs renamed)
    old = {CN5 + ("a.t1",), US5 + ("old.t1",)}
    assert stored.stored_groups(plan, serving, old) == {("CN",): "a.t1"}
    # no C partition serves CN's day: nothing says its inputs are those the changes came from
    assert stored.stored_groups(plan, {US5: "b"}, both) == {("US",): "b.t1"}
    # two stores under one stamp (neither voided): neither is read
    twice = both | {US5 + ("b.t2",)}
    assert stored.stored_groups(plan, serving, twice) == {("CN",): "a.t1"}
    # two deltas of each group in (03, 05]: the last day's changes are not the range's
    longer = plan_history(s, {"dt": "20250803"}, {"dt": "20250805"}, every_day=False)
    assert stored.stored_groups(longer, serving, both) == {}


def test_a_write_in_place_voids_its_groups_stored_days_from_its_first_day_on():
    s = state()  # CN and US: days 01..05
    kept = [("CN", d, "x.t") for d in ("20250802", "20250803", "20250805")]
    kept += [("US", d, "y.t") for d in ("20250802", "20250804")]
    # a new newest day of CN (and a new group) writes nothing in place
    assert stored.written_in_place(s, [("CN", "20250806"), ("EU", "20250801")]) == {}
    # CN's day 03 written again (US's new day 09 is no write in place): CN from 03 on
    first = stored.written_in_place(s, [("CN", "20250803"), ("US", "20250809")])
    assert first == {("CN",): ("20250803",)}
    void = stored.with_void(s, {}, first)
    assert void == {"region=CN": "dt=20250803"}
    assert [p for p in kept if stored.is_void(s, void, p)] == [
        ("CN", "20250803", "x.t"),
        ("CN", "20250805", "x.t"),
    ]
    # a later write keeps each group's earliest day: one entry a group
    later = stored.with_void(s, void, {("CN",): ("20250805",), ("US",): ("20250804",)})
    assert later == {"region=CN": "dt=20250803", "region=US": "dt=20250804"}
    assert stored.with_void(s, later, {("CN",): ("20250802",)})["region=CN"] == "dt=20250802"
    # a backfill of a day a group never had, before a day it has: void from that day on
    gap = ChainState.build(GROUPED, [("US", "20250801")], [("US", "20250803")], {"dt": "string"})
    assert stored.written_in_place(gap, [("US", "20250802")]) == {("US",): ("20250802",)}
    assert stored.written_in_place(gap, [("US", "20250804")]) == {}


def test_the_table_the_insert_and_the_read_of_stored_changes():
    r = renderer()
    assert flat(stored.create_sql(r, TABLE)) == (
        "CREATE TABLE s.t__changes (`id` int, `v` string, `op` string, `seq` int, "
        "`ct__change` string, `ct__before` STRUCT<`id`: int, `v`: string, `op`: string, "
        "`seq`: int, `region`: string, `dt`: string>, `region` string, `dt` string, "
        "`ct__stamp` string) USING parquet OPTIONS ('partitionOverwriteMode' = 'dynamic') "
        "PARTITIONED BY (`region`, `dt`, `ct__stamp`)"
    )
    stamps = {("CN",): "a", ("US",): "b"}
    assert flat(stored.insert_sql(r, TABLE, "SELECT 1", stamps)) == (
        "INSERT OVERWRITE TABLE s.t__changes PARTITION (`region`, `dt`, `ct__stamp`) "
        "SELECT `id`, `v`, `op`, `seq`, `ct__change`, `ct__before`, `region`, `dt`, "
        "CASE WHEN (`region` = 'CN') THEN 'a' WHEN (`region` = 'US') THEN 'b' END AS "
        "`ct__stamp` FROM (SELECT 1) __cs"
    )
    assert stored.add_empty_sql(r, TABLE, [CN5 + ("a",)]) == (
        "ALTER TABLE s.t__changes ADD IF NOT EXISTS "
        "PARTITION (`region` = 'CN', `dt` = '20250805', `ct__stamp` = 'a')"
    )
    assert stored.add_empty_sql(r, TABLE, []) is None
    assert stored.read_sql(r, TABLE, ("20250805",), stamps) == (
        "SELECT `id`, `v`, `op`, `seq`, `region`, `dt`, `ct__change`, `ct__before` "
        "FROM s.t__changes WHERE ((`region` IN ('CN', 'US') AND `dt` = '20250805')) "
        "AND `ct__stamp` IN ('a', 'b')"
    )


def test_the_columns_digest_changes_with_a_column_or_a_type():
    cols = [("id", "int"), ("v", "string"), ("dt", "string")]
    digest = stored.columns_digest(cols)
    assert digest == stored.columns_digest([("ID", "INT"), ("v", "string"), ("dt", "string")])
    assert digest != stored.columns_digest([*cols, ("w", "string")])
    assert digest != stored.columns_digest([("id", "bigint"), *cols[1:]])


def _loaded(props):
    opts = GROUPED
    s = state()
    view = ChainTableRelation.create(schema="s", identifier="t", type="view")
    return Loaded(
        ChainTables.of(view),
        opts,
        tuple((c, TYPES.get(c, "string")) for c in COLS),
        {**opts.to_properties(), **props},
        tuple(sorted(s.snapshots)),
        tuple(sorted(s.deltas)),
        (CN5 + ("a",), US5 + ("b",)),
    )


class Listed(stored.ChangesStore):
    """A store whose table holds CN's day 05 under stamp a."""

    def __init__(self):
        pass

    def stored(self, loaded):
        return {CN5 + ("a.t",)}


def test_a_range_reads_its_stored_groups_from_t_changes_and_the_others_from_the_branches():
    loaded = _loaded({"chaintable.store-changes": "true"})
    plan = plan_history(loaded.state(), {"dt": "20250804"}, {"dt": "20250805"}, every_day=False)
    serving = {CN5: "a", US5: "b"}
    text = flat(Listed().changes_sql(loaded, plan, serving))
    r = renderer()
    us_only = flat(sql.changes(r, plan.restricted([("US",)]), serving))
    cn_stored = flat(stored.read_sql(r, TABLE, ("20250805",), {("CN",): "a.t"}))
    assert text == f"SELECT * FROM ({cn_stored}) __sc0 UNION ALL SELECT * FROM ({us_only}) __sc1"
    assert "'CN'" not in us_only
    # every group stored: no read of the branches at all
    every = Listed()
    every.stored = lambda loaded: {CN5 + ("a.t",), US5 + ("b.t",)}  # type: ignore[method-assign]
    both = flat(stored.read_sql(r, TABLE, ("20250805",), {("CN",): "a.t", ("US",): "b.t"}))
    assert flat(every.changes_sql(loaded, plan, serving)) == f"SELECT * FROM ({both}) __sc0"
    # none stored: chain_changes as without the store
    none = Listed()
    none.stored = lambda loaded: None  # type: ignore[method-assign]
    assert none.changes_sql(loaded, plan, serving) == sql.changes(r, plan, serving)


def test_storing_changes_needs_the_cumulative_delta():
    base = {"partition_by": ["dt"], "primary_key": ["id", "dt"], "chain_store_changes": True}
    assert ChainOptions.from_config("t", base).store_changes is True
    assert (
        ChainOptions.from_config("t", {**base, "chain_store_changes": False}).store_changes is False
    )
    with pytest.raises(
        ChainConfigError,
        match=re.escape("chain_incremental model 't': chain_store_changes needs cumulative_delta"),
    ):
        ChainOptions.from_config("t", {**base, "cumulative_delta": False})
    opts = ChainOptions.from_config("t", base)
    assert opts.to_properties()["chaintable.store-changes"] == "true"
    assert ChainOptions.from_properties("t", opts.to_properties()).store_changes is True
    off = ChainOptions.from_config("t", {**base, "chain_store_changes": False})
    assert "chaintable.store-changes" not in off.to_properties()


def test_unused_stored_partitions_are_the_voided_and_those_whose_cumulative_partition_went():
    listed = [CN5 + ("a.t1",), US5 + ("b.t1",), ("CN", "20250804", "c.t1"), US5 + ("old.t0",)]
    cumulative = [CN5 + ("a",), US5 + ("b",), ("CN", "20250804", "c")]
    assert stored.unused(listed, cumulative, []) == [US5 + ("old.t0",)]
    assert stored.unused(listed, cumulative, [CN5 + ("a.t1",)]) == [
        CN5 + ("a.t1",),
        US5 + ("old.t0",),
    ]
    # a day compacted (its cumulative partition dropped): its stored changes go too
    assert stored.unused(listed, cumulative[:2], []) == [
        ("CN", "20250804", "c.t1"),
        US5 + ("old.t0",),
    ]
    # a store just added CN's day 05 again: the one before goes, whatever its stamp
    fresh = CN5 + ("a.t2",)
    assert stored.unused([*listed, fresh], cumulative, [], [fresh]) == [
        CN5 + ("a.t1",),
        US5 + ("old.t0",),
    ]


class Recorded:
    """A catalog that records what a store sets and runs."""

    def __init__(self):
        self.props, self.sent = {}, []
        self.runner = type("R", (), {"run": lambda _, sql: self.sent.append(sql)})()

    def set_properties(self, relation, props):
        self.props.update(props)


def test_a_write_in_place_records_its_void_days_and_reads_skip_them():
    catalog = Recorded()
    store = stored.ChangesStore(catalog)
    store.listed = lambda loaded: [CN5 + ("a.t",), US5 + ("b.t",)]  # type: ignore[method-assign]
    on = {"chaintable.store-changes": "true", "chaintable.changes-columns": "d"}
    loaded = _loaded(on)
    loaded = replace(loaded, opts=replace(loaded.opts, store_changes=True))
    assert store.stored(loaded) == {CN5 + ("a.t",), US5 + ("b.t",)}
    # a new newest day: nothing recorded, nothing sent
    assert store.before_write(loaded, [("CN", "20250806")]) is loaded
    assert catalog.props == {} and catalog.sent == []
    # CN's day 04 written again: CN is void from 04 on, US is not
    after = store.before_write(loaded, [("CN", "20250804")])
    assert catalog.props == {"chaintable.changes-void": '{"region=CN":"dt=20250804"}'}
    assert store.stored(after) == {US5 + ("b.t",)}
    # a chain without a t__changes record voids nothing
    assert store.before_write(_loaded({}), [("CN", "20250804")]).props == _loaded({}).props
