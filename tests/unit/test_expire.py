"""Expiration and its timestamp options (docs/design.md#expiration): pure Python, no Spark, milliseconds."""

import datetime as dt

import pytest

from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.base.timestamps import (
    ExpirationConfigError,
    java_formatter_to_strptime,
    parse_duration,
    partition_time,
    validate_timestamp_config,
)
from dbt.adapters.chaintable.chain.state import ChainState
from dbt.adapters.chaintable.expiration.plan import (
    ExpirationPlan,
    ExpireSegment,
    GroupExpiration,
    check_snapshot_drop,
    expirable,
    format_plan,
    plan_expiration,
)

D30 = dt.timedelta(days=30)


def ts(text):
    return dt.datetime.strptime(text, "%Y-%m-%d %H:%M:%S")


def daily(group, chain):
    """Time of a partition whose last chain value is dt=yyyyMMdd (group keys ignored)."""
    return partition_time("$dt", "yyyyMMdd", {"dt": chain[-1]})


def parts(*chains, group=()):
    return [(group, (c,)) for c in chains]


def plan_daily(snaps, deltas, now, max_num=None, expiration=D30):
    return plan_expiration(snaps, deltas, daily, ts(now), expiration, max_num)


def single(chain):
    return (chain,)


class TestDesignExample:
    """The worked example of docs/design.md#expiration."""

    def test_drops_first_snapshot_and_its_delta(self):
        plan = plan_daily(
            parts("20250101", "20250201", "20250301"),
            parts("20250110", "20250210", "20250315"),
            "2025-03-31 00:00:00",
        )
        assert plan == ExpirationPlan(
            cutoff=ts("2025-03-01 00:00:00"),
            groups=(
                GroupExpiration(
                    (),
                    ("20250201",),
                    (ExpireSegment(("20250101",), (("20250110",),)),),
                    (),
                    ("20250201",),
                ),
            ),
        )
        assert plan.snapshot_drops() == [((), ("20250101",))]
        assert plan.delta_drops() == [((), ("20250110",))]
        assert not plan.is_empty()

    def test_input_order_does_not_change_the_plan(self):
        snaps, deltas = (
            parts("20250101", "20250201", "20250301"),
            parts("20250110", "20250210", "20250315"),
        )
        now = "2025-03-31 00:00:00"
        assert plan_daily(snaps[::-1], deltas[::-1], now) == plan_daily(snaps, deltas, now)


class TestCutoff:
    def test_partition_exactly_on_cutoff_is_not_before_it(self):
        # cutoff 2025-02-01: only S 0101 is strictly before it -> fewer than 2 -> nothing
        plan = plan_daily(
            parts("20250101", "20250201", "20250301"), parts("20250110"), "2025-03-03 00:00:00"
        )
        assert plan.cutoff == ts("2025-02-01 00:00:00")
        assert plan.groups == (GroupExpiration((), None, (), ()),)
        assert plan.is_empty()
        assert (plan.snapshot_drops(), plan.delta_drops()) == ([], [])

    def test_one_second_later_the_cutoff_passes_the_partition(self):
        plan = plan_daily(
            parts("20250101", "20250201", "20250301"), parts("20250110"), "2025-03-03 00:00:01"
        )
        assert plan.snapshot_drops() == [((), ("20250101",))]
        assert plan.delta_drops() == [((), ("20250110",))]

    def test_fewer_than_two_snapshots_before_cutoff_keeps_even_orphans(self):
        plan = plan_daily(
            parts("20250101", "20250401"), parts("20241201", "20250102"), "2025-04-30 00:00:00"
        )
        assert plan.groups == (GroupExpiration((), None, (), ()),)
        assert plan.is_empty()

    def test_no_snapshots_at_all_gives_no_groups(self):
        plan = plan_daily([], parts("20240101", "20240102"), "2025-04-30 00:00:00")
        assert plan.groups == () and plan.is_empty()


class TestSegments:
    def test_delta_at_a_snapshot_time_goes_with_that_snapshot_not_the_previous(self):
        # [S_i, S_{i+1}): D 0101 goes with S 0101; D 0201 (at the anchor's time) stays
        plan = plan_daily(
            parts("20250101", "20250201"),
            parts("20250101", "20250115", "20250201"),
            "2025-06-01 00:00:00",
        )
        assert plan.groups[0].segments == (
            ExpireSegment(("20250101",), (("20250101",), ("20250115",))),
        )
        assert plan.delta_drops() == [((), ("20250101",)), ((), ("20250115",))]

    def test_every_earlier_snapshot_is_its_own_segment(self):
        plan = plan_daily(
            parts("20250101", "20250201", "20250301", "20250401"),
            parts("20250102", "20250202", "20250203", "20250302", "20250402"),
            "2025-06-01 00:00:00",
        )
        g = plan.groups[0]
        assert g.anchor == ("20250401",)
        assert g.segments == (
            ExpireSegment(("20250101",), (("20250102",),)),
            ExpireSegment(("20250201",), (("20250202",), ("20250203",))),
            ExpireSegment(("20250301",), (("20250302",),)),
        )
        assert g.dropped_snapshots() == [("20250101",), ("20250201",), ("20250301",)]
        assert g.dropped_deltas() == [("20250102",), ("20250202",), ("20250203",), ("20250302",)]

    def test_orphan_deltas_before_first_snapshot_go_when_a_segment_is_dropped(self):
        plan = plan_daily(
            parts("20250101", "20250201"),
            parts("20241225", "20241231", "20250105", "20250205"),
            "2025-06-01 00:00:00",
        )
        g = plan.groups[0]
        assert g.orphan_deltas == (("20241225",), ("20241231",))
        assert g.dropped_deltas() == [("20241225",), ("20241231",), ("20250105",)]
        assert plan.delta_drops() == [((), ("20241225",)), ((), ("20241231",)), ((), ("20250105",))]

    def test_max_num_limits_segments_oldest_first_and_next_kept_snapshot_bounds(self):
        plan = plan_daily(
            parts("20250101", "20250201", "20250301", "20250401", "20250501"),
            parts("20241231", "20250115", "20250215", "20250315", "20250415"),
            "2025-07-01 00:00:00",
            max_num=2,
        )
        g = plan.groups[0]
        assert g.anchor == ("20250501",)
        assert g.segments == (
            ExpireSegment(("20250101",), (("20250115",),)),
            ExpireSegment(("20250201",), (("20250215",),)),
        )
        assert g.orphan_deltas == (("20241231",),)
        assert plan.snapshot_drops() == [((), ("20250101",)), ((), ("20250201",))]
        assert plan.delta_drops() == [((), ("20241231",)), ((), ("20250115",)), ((), ("20250215",))]

    def test_max_num_larger_than_segments_drops_all(self):
        plan = plan_daily(
            parts("20250101", "20250201", "20250301"), [], "2025-07-01 00:00:00", max_num=10
        )
        assert plan.snapshot_drops() == [((), ("20250101",)), ((), ("20250201",))]

    def test_max_num_below_one_is_refused(self):
        with pytest.raises(ExpirationConfigError, match=r"partition_expiration_max_num.*0"):
            plan_daily(parts("20250101"), [], "2025-07-01 00:00:00", max_num=0)


class TestGroups:
    def test_each_group_on_its_own_and_delta_only_groups_untouched(self):
        snaps = parts("20250101", "20250201", "20250301", group=("CN",)) + parts(
            "20250215", "20250320", group=("US",)
        )
        deltas = (
            parts("20241230", "20250110", "20250210", group=("CN",))
            + parts("20250216", group=("US",))
            + parts("20240101", "20240102", group=("EU",))
        )
        plan = plan_daily(snaps, deltas, "2025-04-30 00:00:00")  # cutoff 2025-03-31
        assert plan.groups == (
            GroupExpiration(
                ("CN",),
                ("20250301",),
                (
                    ExpireSegment(("20250101",), (("20250110",),)),
                    ExpireSegment(("20250201",), (("20250210",),)),
                ),
                (("20241230",),),
                ("20250301",),
            ),
            GroupExpiration(
                ("US",),
                ("20250320",),
                (ExpireSegment(("20250215",), (("20250216",),)),),
                (),
                ("20250320",),
            ),
        )
        assert plan.snapshot_drops() == [
            (("CN",), ("20250101",)),
            (("CN",), ("20250201",)),
            (("US",), ("20250215",)),
        ]
        assert plan.delta_drops() == [
            (("CN",), ("20241230",)),
            (("CN",), ("20250110",)),
            (("CN",), ("20250210",)),
            (("US",), ("20250216",)),
        ]

    def test_group_that_keeps_everything_is_listed_with_no_anchor(self):
        snaps = parts("20250101", "20250201", group=("CN",)) + parts("20250420", group=("US",))
        plan = plan_daily(snaps, parts("20250421", group=("US",)), "2025-05-01 00:00:00")
        assert [g.group for g in plan.groups] == [("CN",), ("US",)]
        assert plan.groups[1] == GroupExpiration(("US",), None, (), ())
        assert plan.snapshot_drops() == [(("CN",), ("20250101",))]

    def test_max_num_counts_per_group(self):
        snaps = parts("20250101", "20250201", "20250301", group=("A",)) + parts(
            "20250101", "20250201", "20250301", group=("B",)
        )
        plan = plan_daily(snaps, [], "2025-06-01 00:00:00", max_num=1)
        assert plan.snapshot_drops() == [(("A",), ("20250101",)), (("B",), ("20250101",))]

    def test_max_num_keeps_the_history_from_the_snapshot_after_the_last_segment(self):
        """The anchor stays the newest snapshot before the cutoff, but the history kept (what
        a later delta write may not go before) starts at the first snapshot not dropped."""
        plan = plan_daily(
            parts("20250101", "20250201", "20250301", "20250401"),
            parts("20250110", "20250210", "20250310"),
            "2025-06-01 00:00:00",
            max_num=1,
        )
        assert plan.groups == (
            GroupExpiration(
                (),
                ("20250401",),
                (ExpireSegment(("20250101",), (("20250110",),)),),
                (),
                ("20250201",),
            ),
        )


class TestHourlyChains:
    def test_dt_hour_pattern(self):
        def time_of(group, chain):
            return partition_time(
                "$dt $hour:00:00", "yyyyMMdd HH:mm:ss", {"dt": chain[0], "hour": chain[1]}
            )

        snaps = [((), ("20250101", "00")), ((), ("20250101", "12")), ((), ("20250102", "00"))]
        deltas = [((), ("20250101", "05")), ((), ("20250101", "13")), ((), ("20250102", "01"))]
        plan = plan_expiration(
            snaps, deltas, time_of, ts("2025-01-02 12:00:00"), parse_duration("12 h"), None
        )
        assert plan.cutoff == ts("2025-01-02 00:00:00")
        assert plan.groups == (
            GroupExpiration(
                (),
                ("20250101", "12"),
                (ExpireSegment(("20250101", "00"), (("20250101", "05"),)),),
                (),
                ("20250101", "12"),
            ),
        )

    def test_hour_sorts_by_time_not_by_string(self):
        def time_of(group, chain):
            return partition_time(
                "$dt $hour:00:00", "yyyyMMdd HH:mm:ss", {"dt": chain[0], "hour": chain[1]}
            )

        snaps = [((), ("20250101", "9")), ((), ("20250101", "10"))]
        plan = plan_expiration(
            snaps,
            [((), ("20250101", "9"))],
            time_of,
            ts("2025-01-02 00:00:00"),
            parse_duration("1 h"),
            None,
        )
        assert plan.groups[0].anchor == ("20250101", "10")
        assert plan.delta_drops() == [((), ("20250101", "9"))]

    def test_hr_min_is_matched_as_the_longest_key(self):
        keys = {"dt": "2025-01-01", "hr": "99", "hr_min": "10:30"}
        validate_timestamp_config("$dt $hr_min:00", "yyyy-MM-dd HH:mm:ss", list(keys))
        assert partition_time("$dt $hr_min:00", "yyyy-MM-dd HH:mm:ss", keys) == ts(
            "2025-01-01 10:30:00"
        )
        assert partition_time(
            "$dt $hr:00:00", "yyyy-MM-dd HH:mm:ss", {"dt": "2025-01-01", "hr": "07", "hr_min": "x"}
        ) == ts("2025-01-01 07:00:00")

    def test_keys_match_case_insensitively_and_adjacent(self):
        assert partition_time("$DT$Hour", "yyyyMMddHH", {"dt": "20250101", "hour": "23"}) == ts(
            "2025-01-01 23:00:00"
        )


class TestDurations:
    @pytest.mark.parametrize(
        "text,expected",
        [
            ("30 d", dt.timedelta(days=30)),
            ("30d", dt.timedelta(days=30)),
            ("1 d", dt.timedelta(days=1)),
            ("2 days", dt.timedelta(days=2)),
            ("1 day", dt.timedelta(days=1)),
            ("12 h", dt.timedelta(hours=12)),
            ("3 hours", dt.timedelta(hours=3)),
            ("1hour", dt.timedelta(hours=1)),
            ("90 min", dt.timedelta(minutes=90)),
            ("5 minutes", dt.timedelta(minutes=5)),
            ("5 m", dt.timedelta(minutes=5)),
            ("10 s", dt.timedelta(seconds=10)),
            ("10 sec", dt.timedelta(seconds=10)),
            ("2 seconds", dt.timedelta(seconds=2)),
            ("1 ms", dt.timedelta(milliseconds=1)),
            (" 7 D ", dt.timedelta(days=7)),
            ("0 d", dt.timedelta(0)),
        ],
    )
    def test_parses(self, text, expected):
        assert parse_duration(text) == expected

    @pytest.mark.parametrize(
        "text", ["", "30", "d", "30 weeks", "-1 d", "1.5 h", "30 d 2 h", "thirty d"]
    )
    def test_refuses_naming_the_text(self, text):
        with pytest.raises(ExpirationConfigError) as e:
            parse_duration(text)
        assert f"cannot parse duration '{text}'" in str(e.value)


class TestFormatter:
    @pytest.mark.parametrize(
        "java,expected",
        [
            ("yyyyMMdd", "%Y%m%d"),
            ("yyyyMMdd HH:mm:ss", "%Y%m%d %H:%M:%S"),
            ("yyyy-MM-dd HH:mm:ss", "%Y-%m-%d %H:%M:%S"),
            ("yyyy/MM/dd_HH", "%Y/%m/%d_%H"),
            ("yyyy-MM-dd'T'HH:mm", "%Y-%m-%dT%H:%M"),
            ("yyyyMMddTHH", "%Y%m%dT%H"),
            ("yyyy-MM-dd'at'HH", "%Y-%m-%dat%H"),
            ("yyyy''MM%dd", "%Y'%m%%%d"),
        ],
    )
    def test_translates(self, java, expected):
        assert java_formatter_to_strptime(java) == expected

    @pytest.mark.parametrize(
        "java,problem",
        [
            ("EEE yyyyMMdd", "uses unsupported pattern letters 'EEE'"),
            ("yyyyMMdd HH:mm:ss.S", "uses unsupported pattern letters 'S'"),
            ("yyyyMMdd hh a", "uses unsupported pattern letters 'hh'"),
            ("yyyyMMdd z", "uses unsupported pattern letters 'z'"),
            ("yyMMdd", "uses unsupported pattern letters 'yy'"),
            ("yyyyMMdd[HH]", "uses unsupported pattern character '['"),
            ("yyyyMMdd'T", "has an unterminated quoted literal"),
            ("yyyyMMddyyyy", "repeats 'yyyy'"),
            ("HH:mm:ss", "does not give a complete date (missing yyyy, MM, dd)"),
            ("yyyyMM", "does not give a complete date (missing dd)"),
        ],
    )
    def test_refuses_naming_option_and_value(self, java, problem):
        with pytest.raises(ExpirationConfigError) as e:
            java_formatter_to_strptime(java)
        assert str(e.value).startswith(f"partition_timestamp_formatter '{java}' {problem}")


class TestValidation:
    def test_valid_configs_are_accepted_and_give_each_partition_its_time(self):
        assert validate_timestamp_config("$dt", "yyyyMMdd", ["dt"]) is None
        assert (
            validate_timestamp_config(
                "$dt $hour:00:00", "yyyyMMdd HH:mm:ss", ["region", "dt", "hour"]
            )
            is None
        )
        assert partition_time("$dt", "yyyyMMdd", {"dt": "20250311"}) == dt.datetime(2025, 3, 11)
        assert partition_time(
            "$dt $hour:00:00", "yyyyMMdd HH:mm:ss", {"region": "CN", "dt": "20250311", "hour": "07"}
        ) == dt.datetime(2025, 3, 11, 7)

    def test_a_valid_expiration_config_parses_to_its_exact_options(self):
        opts = ChainOptions.from_config(
            "m",
            {
                "partition_by": ["region", "dt", "hour"],
                "chain_partition_keys": ["dt", "hour"],
                "primary_key": ["id", "region", "dt", "hour"],
                "partition_timestamp_pattern": "$dt $hour:00:00",
                "partition_timestamp_formatter": "yyyyMMdd HH:mm:ss",
                "partition_expiration_time": "30 d",
                "partition_expiration_check_interval": "1 d",
                "partition_expiration_max_num": "2",
            },
        )
        assert (
            opts.partition_by,
            opts.chain_keys,
            opts.group_keys,
            opts.timestamp_pattern,
            opts.timestamp_formatter,
            opts.expiration_time,
            opts.check_interval,
            opts.max_num,
            opts.expiration_enabled,
        ) == (
            ("region", "dt", "hour"),
            ("dt", "hour"),
            ("region",),
            "$dt $hour:00:00",
            "yyyyMMdd HH:mm:ss",
            "30 d",
            "1 d",
            2,
            True,
        )
        assert java_formatter_to_strptime(opts.timestamp_formatter) == "%Y%m%d %H:%M:%S"
        assert parse_duration(opts.expiration_time) == D30
        assert parse_duration(opts.check_interval) == dt.timedelta(days=1)
        assert partition_time(
            opts.timestamp_pattern,
            opts.timestamp_formatter,
            dict(zip(opts.partition_by, ("CN", "20250311", "07"), strict=True)),
        ) == dt.datetime(2025, 3, 11, 7)

    def test_unknown_key_names_option_value_and_key(self):
        with pytest.raises(ExpirationConfigError) as e:
            validate_timestamp_config("$dt $hour:00:00", "yyyyMMdd HH:mm:ss", ["dt", "hr"])
        assert str(e.value) == (
            "partition_timestamp_pattern '$dt $hour:00:00' refers to '$hour', "
            "which is not a partition key (partition keys: dt, hr)"
        )

    def test_pattern_without_keys_is_refused(self):
        with pytest.raises(
            ExpirationConfigError, match="partition_timestamp_pattern '2025' refers to no"
        ):
            validate_timestamp_config("2025", "yyyy", ["dt"])

    def test_bare_dollar_is_refused(self):
        with pytest.raises(
            ExpirationConfigError, match=r"refers to '\$', which is not a partition key"
        ):
            validate_timestamp_config("$dt $", "yyyyMMdd", ["dt"])

    def test_bad_formatter_is_named(self):
        with pytest.raises(
            ExpirationConfigError,
            match="partition_timestamp_formatter 'HH' does not give a complete date",
        ):
            validate_timestamp_config("$hour", "HH", ["hour"])

    def test_value_that_does_not_parse_names_values_and_formatter(self):
        with pytest.raises(ExpirationConfigError) as e:
            partition_time("$dt", "yyyyMMdd", {"dt": "2025-01-01"})
        assert str(e.value) == (
            "partition values {'dt': '2025-01-01'} give '2025-01-01' through "
            "partition_timestamp_pattern '$dt', which does not parse with "
            "partition_timestamp_formatter 'yyyyMMdd'"
        )

    def test_date_only_formatter_gives_midnight(self):
        assert partition_time("$dt", "yyyy-MM-dd", {"dt": "2025-02-28"}) == ts(
            "2025-02-28 00:00:00"
        )


class TestSnapshotDropGuard:
    @staticmethod
    def check(chain, snaps, deltas, group=()):
        return check_snapshot_drop(
            group,
            single(chain),
            [single(s) for s in snaps],
            [single(d) for d in deltas],
            lambda c: c,
        )

    def test_only_anchor_of_later_deltas_is_refused(self):
        assert self.check("0101", ["0101", "0201"], ["0105", "0110", "0205"], group=("CN",)) == (
            "refusing to drop snapshot partition 0101 of group CN: delta partition(s) 0105, 0110 "
            "are read from it and no earlier snapshot in the group can anchor them; compact a "
            "later partition first"
        )

    def test_without_group_keys_the_group_is_not_named(self):
        assert self.check("0101", ["0101"], ["0102"]).startswith(
            "refusing to drop snapshot partition 0101: delta partition(s) 0102 are"
        )

    def test_delta_at_next_snapshot_value_still_depends_on_it(self):
        assert self.check("0101", ["0101", "0201"], ["0201"]) is not None

    def test_earlier_snapshot_can_re_anchor(self):
        assert self.check("0201", ["0101", "0201"], ["0205"]) is None

    def test_no_dependent_deltas(self):
        assert self.check("0101", ["0101", "0201"], ["0101", "0202"]) is None
        assert self.check("0201", ["0201"], ["0101"]) is None

    def test_uses_sort_key(self):
        assert (
            check_snapshot_drop((), ("9",), [("9",), ("10",)], [("10",)], lambda c: int(c[0]))
            is not None
        )
        assert (
            check_snapshot_drop((), ("9",), [("9",), ("10",)], [("11",)], lambda c: int(c[0]))
            is None
        )


class TestFormatPlan:
    def test_lines(self):
        snaps = parts("20250101", "20250201", "20250301", group=("CN",)) + parts(
            "20250420", group=("US",)
        )
        deltas = parts("20241230", "20250110", "20250111", group=("CN",))
        plan = plan_daily(snaps, deltas, "2025-04-30 00:00:00")
        lines = format_plan(plan, lambda g, c: f"region={g[0]}/dt={c[0]}")
        assert lines == [
            "keep anchor snapshot region=CN/dt=20250301",
            "drop deltas older than the first snapshot: region=CN/dt=20241230",
            "drop snapshot region=CN/dt=20250101 with region=CN/dt=20250110, region=CN/dt=20250111",
            "drop snapshot region=CN/dt=20250201 with no deltas",
        ]

    def test_empty_plan_has_no_lines(self):
        assert format_plan(plan_daily(parts("20250101"), [], "2025-04-30 00:00:00"), str) == []


class TestStaleSnapshots:
    """A group with stale snapshots (a delta rewritten under them) expires only the history
    before the snapshot its first stale one is recompacted from (expiration/plan.py, expirable)."""

    OPTS = ChainOptions(
        partition_by=("region", "dt"), chain_keys=("dt",), primary_key=("id", "region", "dt")
    )

    def state(self):
        snaps = [(r, d) for r in ("CN", "US") for d in ("20250101", "20250201", "20250301")]
        deltas = [(r, d) for r in ("CN", "US") for d in ("20250110", "20250210", "20250315")]
        return ChainState.build(self.OPTS, snaps, deltas)

    def test_only_the_history_before_the_first_stale_snapshots_anchor_expires(self):
        state = self.state()
        # CN: delta 0210 rewritten, so snapshot 0301 is stale; its rebuild reads 0201 and 0210
        snaps, deltas, held = expirable(state, [("CN", "20250301")])
        assert snaps == [
            ("CN", "20250101"),
            ("CN", "20250201"),
            ("US", "20250101"),
            ("US", "20250201"),
            ("US", "20250301"),
        ]
        assert deltas == [
            ("CN", "20250110"),
            ("US", "20250110"),
            ("US", "20250210"),
            ("US", "20250315"),
        ]
        assert held == set()
        plan = plan_daily(
            [state.layout.split(p) for p in snaps],
            [state.layout.split(p) for p in deltas],
            "2025-04-30 00:00:00",  # cutoff 2025-03-31: 0101, 0201 and 0301 are before it
        )
        assert plan.snapshot_drops() == [
            (("CN",), ("20250101",)),
            (("US",), ("20250101",)),
            (("US",), ("20250201",)),
        ]
        assert plan.delta_drops() == [
            (("CN",), ("20250110",)),
            (("US",), ("20250110",)),
            (("US",), ("20250210",)),
        ]
        assert [g.kept_from for g in plan.groups] == [("20250201",), ("20250301",)]

    def test_a_stale_snapshot_with_no_earlier_one_holds_its_whole_group(self):
        state = self.state()
        snaps, deltas, held = expirable(state, [("US", "20250101"), ("US", "20250301")])
        assert held == {("US",)}
        assert [p for p in snaps + deltas if p[0] == "US"] == []
        assert len(snaps) == 3 and len(deltas) == 3  # CN untouched
