"""The cumulative delta's pure planning: which days it serves, what a write affects, what to
build from what, and what is garbage (no Spark, milliseconds)."""

from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.chain.state import ChainState
from dbt.adapters.chaintable.cumulative import plan as C

OPTS = ChainOptions(partition_by=("g", "dt"), chain_keys=("dt",), primary_key=("id", "g", "dt"))
COLS = ["id", "v", "g", "dt"]
DIGEST = C.options_digest(OPTS, COLS)


def state(snaps, deltas):
    return ChainState.build(OPTS, snaps, deltas, {"dt": "string"})


# x: snapshot 01, deltas 02-05; y: delta-only 01-03
S = state(
    [("x", "01")],
    [("x", "02"), ("x", "03"), ("x", "04"), ("x", "05"), ("y", "01"), ("y", "02"), ("y", "03")],
)


def stamp_of(s, part):
    return C.stamp(s.plan_read(part[:1], part[1:]), DIGEST)


def stored(s, parts):
    return [p + (stamp_of(s, p),) for p in parts]


def test_stamps_differ_by_partition_inputs_options_and_columns():
    p = S.plan_read(("x",), ("03",))
    assert C.stamp(p, DIGEST) == C.stamp(p, DIGEST)
    assert len({C.stamp(S.plan_read(("x",), (d,)), DIGEST) for d in ("02", "03", "04")}) == 3
    # the same inputs in another group: another stamp (one IN list of stamps stays exact)
    assert C.stamp(S.plan_read(("y",), ("02",)), DIGEST) != C.stamp(p, DIGEST)
    other = state([("x", "01")], [("x", "02"), ("x", "025"), ("x", "03")])
    assert C.stamp(other.plan_read(("x",), ("03",)), DIGEST) != C.stamp(p, DIGEST)
    assert C.options_digest(OPTS, COLS + ["w"]) != DIGEST
    seq = ChainOptions(
        partition_by=("g", "dt"),
        chain_keys=("dt",),
        primary_key=("id", "g", "dt"),
        sequence_field="v",
    )
    assert C.options_digest(seq, COLS) != DIGEST


def test_serving_needs_the_stamp_of_the_current_plan():
    cum = C.Cumulative(S, stored(S, [("x", "02"), ("x", "03")]) + [("x", "04", "old")], DIGEST)
    plans = S.delta_only()
    assert sorted(cum.serving(plans)) == [("x", "02"), ("x", "03")]
    # a delta backfilled before 03 changes 03's plan: 03 is no longer served, 02 still is
    later = state([("x", "01")], list(S.deltas) + [("x", "025")])
    cum = C.Cumulative(later, stored(S, [("x", "02"), ("x", "03")]), DIGEST)
    assert sorted(cum.serving(later.delta_only())) == [("x", "02")]
    # a snapshot compacted at 03: 03 reads the snapshot, 04 has a new anchor
    compacted = state([("x", "01"), ("x", "03")], S.deltas)
    cum = C.Cumulative(compacted, stored(S, [("x", "03"), ("x", "04")]), DIGEST)
    assert cum.serving(compacted.delta_only()) == {}


def test_garbage_is_what_serves_no_day():
    compacted = state([("x", "01"), ("x", "03")], S.deltas)
    parts = stored(S, [("x", "02"), ("x", "03"), ("x", "04")]) + [("y", "02", "junk")]
    cum = C.Cumulative(compacted, parts, DIGEST)
    # 03, compacted, keeps the C of its delta-only read (anchor 01 + 02, 03): compaction with
    # overwrite reads it; 04 now has the anchor 03
    assert cum.garbage() == sorted([("x", "04", stamp_of(S, ("x", "04"))), ("y", "02", "junk")])
    assert cum.serving([compacted.plan_read(("x",), ("03",), use_snapshot=False)]) == {
        ("x", "03"): stamp_of(S, ("x", "03"))
    }
    # a snapshot without a delta at its day: nothing to keep
    only = state([("x", "01"), ("x", "06")], S.deltas)
    assert ("x", "06", "s") in C.Cumulative(only, [("x", "06", "s")], DIGEST).garbage()


def test_a_write_affects_its_days_and_every_later_day_read_through_it():
    assert S.plan_read(("x",), ("05",)).deltas == (("02",), ("03",), ("04",), ("05",))
    cum = C.Cumulative(S, [], DIGEST)
    assert cum.affected([("x", "03")]) == [("x", "03"), ("x", "04"), ("x", "05")]
    assert cum.affected([("x", "05")]) == [("x", "05")]  # a daily run: only its day
    assert cum.affected([("x", "01")]) == [("x", "02"), ("x", "03"), ("x", "04"), ("x", "05")]
    assert cum.affected([("y", "02")]) == [("y", "02"), ("y", "03")]


def test_builds_chain_from_the_previous_day_when_it_serves():
    cum = C.Cumulative(S, stored(S, [("x", "02"), ("x", "03")]), DIGEST)
    builds = cum.builds([("x", "05"), ("x", "04")], incremental_ok=True)
    assert [(b.plan.chain, b.previous, b.deltas) for b in builds] == [
        (("04",), ("03",), (("04",),)),
        (("05",), ("04",), (("05",),)),
    ]
    assert builds[0].previous_stamp == stamp_of(S, ("x", "03"))
    assert builds[1].previous_stamp == builds[0].stamp == stamp_of(S, ("x", "04"))
    # the previous day has no cumulative partition: from the anchor and every delta
    cum = C.Cumulative(S, [], DIGEST)
    (b,) = cum.builds([("x", "04")], incremental_ok=True)
    assert (b.previous, b.deltas) == (None, (("02",), ("03",), ("04",)))
    # the first day after the anchor, and a merge that needs every row: every delta
    (b,) = cum.builds([("x", "02")], incremental_ok=True)
    assert (b.previous, b.deltas) == (None, (("02",),))
    cum = C.Cumulative(S, stored(S, [("x", "03")]), DIGEST)
    (b,) = cum.builds([("x", "04")], incremental_ok=False)
    assert (b.previous, b.deltas) == (None, (("02",), ("03",), ("04",)))
    # a snapshot day is not built
    assert C.Cumulative(S, [], DIGEST).builds([("x", "01")], True) == []


def test_which_merges_can_be_built_from_the_day_before():
    def opts(**kw):
        return ChainOptions(
            partition_by=("dt",), chain_keys=("dt",), primary_key=("id", "dt"), **kw
        )

    assert C.incremental(opts(), ["v"]) and C.incremental(opts(sequence_field="s"), ["v"])
    assert C.incremental(opts(merge_engine="partial-update"), ["v"])
    assert not C.incremental(opts(merge_engine="partial-update", sequence_field="s"), ["v"])
    agg = dict(merge_engine="aggregation", sequence_field="s")
    assert C.incremental(opts(**agg, aggregate_functions={"v": "sum"}), ["v"])
    assert not C.incremental(opts(**agg, aggregate_functions={"v": "listagg"}), ["v"])
    assert not C.incremental(opts(**agg), ["v"])  # last_non_null_value by default
    assert not C.incremental(
        opts(**agg, rowkind_field="k", aggregate_functions={"v": "sum"}), ["v"]
    )
    assert not C.needs_anchor(opts()) and not C.needs_anchor(opts(rowkind_field="k"))
    assert C.needs_anchor(opts(sequence_field="s"))
    assert C.needs_anchor(opts(merge_engine="first-row"))


def test_a_write_in_place_makes_the_kept_partitions_of_compacted_days_stale():
    # 03 compacted (snapshot 01 and 03): C(03) is kept for compaction with overwrite, and its
    # delta-only read is anchor 01 + deltas 02, 03
    compacted = state([("x", "01"), ("x", "03")], S.deltas)
    kept = [("x", "03")]
    delta_only_plan = compacted.plan_read(("x",), ("03",), use_snapshot=False)
    parts = [("x", "03", C.stamp(delta_only_plan, DIGEST))]
    cum = C.Cumulative(compacted, parts, DIGEST)
    assert cum.garbage() == []
    assert cum.kept_affected("snapshot", [("x", "01")]) == parts  # the anchor rewritten
    assert cum.kept_affected("delta", [("x", "02")]) == parts  # a delta of its read rewritten
    assert cum.kept_affected("delta", [("x", "03")]) == parts
    assert cum.kept_affected("delta", [("x", "01")]) == []  # not a delta of its read
    assert cum.kept_affected("snapshot", [("x", "03")]) == []  # its own snapshot: no input
    assert cum.kept_affected("delta", [("x", "04"), ("y", "02")]) == []  # later, other groups
    assert kept == [p[:2] for p in parts]


def test_sequence_groups_build_from_the_day_before_only_where_that_is_exact():
    def opts(**kw):
        return ChainOptions(
            partition_by=("dt",),
            chain_keys=("dt",),
            primary_key=("id", "dt"),
            merge_engine="partial-update",
            sequence_groups=((("g1",), ("a", "b")),),
            **kw,
        )

    assert C.incremental(opts(), ["a", "b"])
    assert C.incremental(opts(aggregate_functions={"b": "sum"}), ["a", "b"])
    assert C.incremental(opts(rowkind_field="k", ignore_delete=True), ["a", "b"])
    # a late row may fall before the state's winner; a tombstone would have to carry the
    # group's retractions; an order-sensitive function needs every row in group order
    assert not C.incremental(opts(sequence_field="s"), ["a", "b"])
    assert not C.incremental(opts(rowkind_field="k"), ["a", "b"])
    assert not C.incremental(opts(aggregate_functions={"b": "first_value"}), ["a", "b"])
    assert not C.incremental(opts(aggregate_functions={"a": "last_non_null_value"}), ["a", "b"])
    assert C.options_digest(opts(), COLS) != C.options_digest(
        opts().__class__(**{**opts().__dict__, "sequence_groups": ((("g1",), ("a",)),)}), COLS
    )


def test_only_deduplicate_with_an_ordinal_sequence_can_leave_the_anchor_out():
    seq = ChainOptions(
        partition_by=("dt",), chain_keys=("dt",), primary_key=("id", "dt"), sequence_field="Seq"
    )
    assert C.ordinal_sequence_type(seq, {"seq": "BIGINT"}) == "bigint"
    assert C.ordinal_sequence_type(seq, {"seq": "int"}) == "int"
    assert C.ordinal_sequence_type(seq, {"SEQ": "timestamp"}) == "timestamp"
    assert C.ordinal_sequence_type(seq, {"seq": "date"}) == "date"
    for other in ("string", "double", "decimal(10,2)", "timestamp_ntz"):
        assert C.ordinal_sequence_type(seq, {"seq": other}) is None
    assert C.ordinal_sequence_type(OPTS, {"seq": "int"}) is None  # no sequence field
    for engine in ("first-row", "partial-update", "aggregation"):
        opts = ChainOptions(
            partition_by=("dt",),
            chain_keys=("dt",),
            primary_key=("id", "dt"),
            sequence_field="seq",
            merge_engine=engine,
        )
        assert C.ordinal_sequence_type(opts, {"seq": "int"}) is None


def test_the_anchor_can_win_unless_every_delta_row_follows_it():
    assert not C.anchor_can_win(10, 11)
    assert not C.anchor_can_win(10, float("inf"))  # only empty delta partitions
    assert C.anchor_can_win(10, 10)  # a tie goes to the delta, but strictly above is the rule
    assert C.anchor_can_win(10, 3)
    assert C.anchor_can_win(None, 11)  # the anchor's highest not known
    assert C.anchor_can_win(10, None)  # a NULL sequence in the deltas
