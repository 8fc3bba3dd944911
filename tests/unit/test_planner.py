"""Read rules and compaction planning (docs/design.md), partition parsing: no Spark, milliseconds."""

import pytest

from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.base.partitions import (
    ChainPlanError,
    parse_flag,
    parse_partition_path,
    parse_partition_spec,
)
from dbt.adapters.chaintable.chain.state import ChainState, ReadPlan
from dbt.adapters.chaintable.compaction.plan import plan_compaction
from dbt.adapters.chaintable.view.layout import view_branches

DT = ChainOptions(partition_by=("dt",), chain_keys=("dt",), primary_key=("id", "dt"))
GROUPED = ChainOptions(
    partition_by=("region", "dt"), chain_keys=("dt",), primary_key=("id", "region", "dt")
)
HOURLY = ChainOptions(
    partition_by=("dt", "hour"), chain_keys=("dt", "hour"), primary_key=("id", "dt", "hour")
)


def state(opts, snaps, deltas, types=None):
    def wrap(xs):
        return [tuple(x) if isinstance(x, (tuple, list)) else (x,) for x in xs]

    return ChainState.build(opts, wrap(snaps), wrap(deltas), types)


class TestReadRules:
    def test_rule1_snapshot_partition_read_as_is_delta_ignored(self):
        s = state(DT, ["20250801"], ["20250801", "20250802"])
        assert s.plan_read((), ("20250801",)) == ReadPlan((), ("20250801",), from_snapshot=True)

    def test_rule2_anchor_strictly_earlier_delta_at_anchor_excluded(self):
        s = state(
            DT,
            ["20250801", "20250805"],
            ["20250801", "20250802", "20250803", "20250805", "20250806", "20250807"],
        )
        p = s.plan_read((), ("20250803",))
        assert (p.from_snapshot, p.anchor, p.deltas) == (
            False,
            ("20250801",),
            (("20250802",), ("20250803",)),
        )
        p = s.plan_read((), ("20250807",))
        assert p.anchor == ("20250805",) and p.deltas == (("20250806",), ("20250807",))

    def test_rule3_no_earlier_snapshot_merges_all_deltas_up_to_p(self):
        s = state(DT, ["20250805"], ["20250801", "20250802", "20250803", "20250806"])
        p = s.plan_read((), ("20250802",))
        assert p.anchor is None and p.deltas == (("20250801",), ("20250802",))

    def test_rule4_partition_in_neither_branch(self):
        s = state(DT, ["20250801"], ["20250802"])
        assert s.plan_read((), ("20250803",)) is None

    def test_empty_branches(self):
        s = state(DT, [], [])
        assert s.plan_read((), ("20250801",)) is None
        assert s.delta_only() == [] and view_branches(s) == [] and s.groups() == []

    def test_groups_use_only_their_own_anchor(self):
        s = state(
            GROUPED,
            [("CN", "20250801"), ("US", "20250803")],
            [("CN", "20250802"), ("CN", "20250804"), ("US", "20250804"), ("EU", "20250804")],
        )
        cn = s.plan_read(("CN",), ("20250804",))
        us = s.plan_read(("US",), ("20250804",))
        eu = s.plan_read(("EU",), ("20250804",))
        assert cn.anchor == ("20250801",) and cn.deltas == (("20250802",), ("20250804",))
        assert us.anchor == ("20250803",) and us.deltas == (("20250804",),)
        assert eu.anchor is None and eu.deltas == (("20250804",),)
        assert s.plan_read(("US",), ("20250802",)) is None

    def test_multi_key_chain_orders_tuples(self):
        s = state(
            HOURLY,
            [("20250801", "22")],
            [("20250801", "21"), ("20250801", "23"), ("20250802", "00"), ("20250802", "01")],
        )
        p = s.plan_read((), ("20250802", "01"))
        assert p.anchor == ("20250801", "22")
        assert p.deltas == (("20250801", "23"), ("20250802", "00"), ("20250802", "01"))
        assert s.plan_read((), ("20250801", "21")).anchor is None

    def test_typed_comparison_of_integer_chain_keys(self):
        opts = ChainOptions(partition_by=("day",), chain_keys=("day",), primary_key=("id", "day"))
        s = state(opts, ["9"], ["10", "8"], types={"day": "int"})
        p = s.plan_read((), ("10",))
        assert p.anchor == ("9",) and p.deltas == (("10",),)  # '10' > '9' as ints, not strings

    def test_integer_chain_key_given_zero_padded_names_its_partition(self):
        # Spark names an int partition value 2 `hour=2`; a spec may spell it '02' (Paimon's
        # string form `dt="20250811",hour="02"`) and still means that partition
        opts = ChainOptions(
            partition_by=("dt", "hour"), chain_keys=("dt", "hour"), primary_key=("id", "dt", "hour")
        )
        s = state(opts, [("20250811", "1")], [("20250811", "2")], types={"hour": "int"})
        assert [p.chain for p in s.plan_partition_read({"dt": "20250811", "HOUR": "02"})] == [
            ("20250811", "2")
        ]
        plan = plan_compaction(s, {"dt": "20250811", "hour": " 02"})
        assert [(w.chain, w.anchor, w.deltas) for w in plan.writes] == [
            (("20250811", "2"), ("20250811", "1"), (("20250811", "2"),))
        ]
        # a string chain key keeps its spelling: '02' and '2' are different partitions
        strings = state(opts, [("20250811", "01")], [("20250811", "02")])
        assert strings.spelled(("20250811", "02")) == ("20250811", "02")
        assert plan_compaction(strings, {"dt": "20250811", "hour": "2"}).writes == ()

    def test_full_partition_spec_names_one_partition_of_any_group(self):
        # drop_chain_partition's spec: every partition column, in any case, the int chain key
        # spelled as Spark names it; a group not in the table yet is still a partition
        opts = ChainOptions(
            partition_by=("region", "dt", "hour"),
            chain_keys=("dt", "hour"),
            primary_key=("id", "region", "dt", "hour"),
        )
        s = state(opts, [("CN", "20250811", "1")], [], types={"hour": "int"})
        assert s.partition_of({"REGION": "CN", "dt": "20250811", "Hour": "011"}) == (
            "CN",
            "20250811",
            "11",
        )
        assert s.partition_of({"region": "US", "dt": "20250811", "hour": "3"}) == (
            "US",
            "20250811",
            "3",
        )
        with pytest.raises(
            ChainPlanError, match=r"does not name every partition column: missing \['region'\]"
        ):
            s.partition_of({"dt": "20250811", "hour": "1"})
        with pytest.raises(ChainPlanError, match=r"names \['day'\], which are not partition"):
            s.partition_of({"region": "CN", "dt": "20250811", "hour": "1", "day": "x"})

    def test_partitions_out_of_order_are_sorted(self):
        s = state(DT, ["20250801"], ["20250804", "20250802", "20250803"])
        assert s.plan_read((), ("20250804",)).deltas == (
            ("20250802",),
            ("20250803",),
            ("20250804",),
        )
        assert [p.chain for p in s.delta_only()] == [("20250802",), ("20250803",), ("20250804",)]

    def test_view_branches_one_per_chain_value_with_all_groups(self):
        s = state(
            GROUPED,
            [("CN", "20250801"), ("US", "20250801")],
            [("CN", "20250802"), ("US", "20250802"), ("US", "20250803")],
        )
        branches = view_branches(s)
        assert [c for c, _ in branches] == [("20250802",), ("20250803",)]
        assert [p.group for p in branches[0][1]] == [("CN",), ("US",)]


class TestCompaction:
    def test_new_partition_from_anchor_and_deltas(self):
        s = state(DT, ["20250801"], ["20250802", "20250803"])
        plan = plan_compaction(s, {"dt": "20250803"})
        assert plan.written and plan.writes[0].anchor == ("20250801",)
        assert plan.writes[0].deltas == (("20250802",), ("20250803",))

    def test_existing_snapshot_without_overwrite_writes_nothing(self):
        s = state(DT, ["20250801", "20250803"], ["20250803"])
        plan = plan_compaction(s, {"dt": "20250803"})
        assert not plan.written and "already has partition dt=20250803" in plan.message

    def test_overwrite_recomputes_from_strictly_earlier_anchor(self):
        s = state(DT, ["20250801", "20250803"], ["20250802", "20250803"])
        plan = plan_compaction(s, {"dt": "20250803"}, overwrite=True)
        w = plan.writes[0]
        assert (w.from_snapshot, w.anchor, w.deltas) == (
            False,
            ("20250801",),
            (("20250802",), ("20250803",)),
        )

    def test_overwrite_keeps_groups_without_delta(self):
        s = state(GROUPED, [("CN", "20250803"), ("US", "20250803")], [("US", "20250803")])
        plan = plan_compaction(s, {"dt": "20250803"}, overwrite=True)
        assert [w.group for w in plan.writes] == [("US",)] and plan.kept == (("CN",),)

    def test_partial_spec_covers_every_group(self):
        s = state(GROUPED, [("CN", "20250801")], [("CN", "20250802"), ("US", "20250802")])
        plan = plan_compaction(s, {"dt": "20250802"})
        assert [(w.group, w.anchor) for w in plan.writes] == [
            (("CN",), ("20250801",)),
            (("US",), None),
        ]

    def test_full_spec_names_one_group(self):
        s = state(GROUPED, [], [("CN", "20250802"), ("US", "20250802")])
        plan = plan_compaction(s, {"region": "US", "dt": "20250802"})
        assert [w.group for w in plan.writes] == [("US",)]

    def test_nothing_to_compact(self):
        s = state(DT, ["20250801"], ["20250802"])
        plan = plan_compaction(s, {"dt": "20250805"})
        assert not plan.written and plan.message == "no data to compact for dt=20250805"

    def test_spec_missing_a_chain_key_is_more_than_one_partition(self):
        s = state(HOURLY, [], [("20250801", "01")])
        with pytest.raises(ChainPlanError, match="more than one partition"):
            plan_compaction(s, {"dt": "20250801"})

    def test_unknown_column(self):
        with pytest.raises(ChainPlanError, match="not partition columns"):
            plan_compaction(state(DT, [], ["20250801"]), {"day": "20250801"})


class TestStaleness:
    def test_rewriting_an_old_delta_marks_later_snapshots_of_its_group(self):
        """0805 and 0809 were compacted (each has its day's delta), so built on 0803."""
        s = state(
            GROUPED,
            [("CN", "20250801"), ("CN", "20250805"), ("CN", "20250809"), ("US", "20250805")],
            [("CN", d) for d in ("20250803", "20250805", "20250809")] + [("US", "20250805")],
        )
        stale = s.stale_after_delta_write([("CN", "20250803")])
        assert stale == {
            ("CN", "20250805"): ("CN", "20250803"),
            ("CN", "20250809"): ("CN", "20250803"),
        }

    def test_a_full_write_is_not_built_on_the_delta_before_it_nor_what_follows_it(self):
        """0805 has no delta of its day: a full write (chain_branch='snapshot'), which 0809 was
        compacted from; neither depends on delta 0803."""
        s = state(
            GROUPED,
            [("CN", "20250801"), ("CN", "20250805"), ("CN", "20250809")],
            [("CN", "20250803"), ("CN", "20250807"), ("CN", "20250809")],
        )
        assert s.stale_after_delta_write([("CN", "20250803")]) == {}
        assert s.stale_after_delta_write([("CN", "20250807")]) == {
            ("CN", "20250809"): ("CN", "20250807")
        }


class TestParsing:
    def test_partition_paths_unescape(self):
        assert parse_partition_path("region=a%2Fb/dt=20250101", ["region", "dt"]) == (
            "a/b",
            "20250101",
        )

    def test_null_partition_refused(self):
        with pytest.raises(ChainPlanError, match="NULL"):
            parse_partition_path("dt=__HIVE_DEFAULT_PARTITION__", ["dt"])

    @pytest.mark.parametrize(
        "spec,expected",
        [
            ({"dt": "20250811"}, {"dt": "20250811"}),
            ("dt=20250811", {"dt": "20250811"}),
            ('dt="20250811",hour="22"', {"dt": "20250811", "hour": "22"}),
            (["dt=20250811"], {"dt": "20250811"}),
        ],
    )
    def test_partition_specs(self, spec, expected):
        assert parse_partition_spec(spec) == expected

    @pytest.mark.parametrize("spec", ["dt=1;dt=2", ["dt=1", "dt=2"], "", "dt"])
    def test_bad_partition_specs(self, spec):
        with pytest.raises(ChainPlanError):
            parse_partition_spec(spec)

    @pytest.mark.parametrize(
        "spec, message",
        [
            (
                {"dt": ["20250811", "20250812"]},
                "exactly one partition is expected, got several values for ['dt']: "
                "{'dt': ['20250811', '20250812']}",
            ),
            ("dt=1,dt=2", "exactly one partition is expected, got 'dt=1,dt=2'"),
            ("dt=1,DT=2", "exactly one partition is expected, got 'dt=1,DT=2'"),
            (
                {"dt": "1", "DT": "2"},
                "exactly one partition is expected, got several values for ['DT', 'dt']: "
                "{'dt': '1', 'DT': '2'}",
            ),
        ],
    )
    def test_several_values_of_one_key_are_several_partitions(self, spec, message):
        with pytest.raises(ChainPlanError) as e:
            parse_partition_spec(spec)
        assert str(e.value).endswith(message)

    @pytest.mark.parametrize(
        "value, expected",
        [(None, False), (False, False), ("false", False), ("no", False), (0, False)]
        + [(True, True), ("true", True), ("True", True), (1, True)],
    )
    def test_flags(self, value, expected):
        assert parse_flag(value, "overwrite") is expected

    def test_a_flag_that_is_neither_is_refused(self):
        with pytest.raises(ChainPlanError) as e:
            parse_flag("maybe", "overwrite")
        assert str(e.value).endswith("overwrite must be true or false, got 'maybe'")


def test_chain_status_lists_partitions_in_typed_chain_order():
    """An int hour sorts 9 before 10 in chain_status, as in the read rules."""
    from dbt.adapters.chaintable.operations import status

    s = ChainState.build(
        HOURLY,
        [("20250101", "9")],
        [("20250101", "10"), ("20250101", "11")],
        {"dt": "string", "hour": "int"},
    )
    lines = status.render(HOURLY, s, {}, serving=None).splitlines()
    table = lines[lines.index("") + 1 :]
    assert [line.split()[2] for line in table[2:5]] == [
        "dt=20250101/hour=9",
        "dt=20250101/hour=10",
        "dt=20250101/hour=11",
    ]
