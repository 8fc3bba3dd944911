"""The compaction policy (chain_compaction): config validation, its TBLPROPERTIES round trip and
the pure due decision per group. No Spark."""

from __future__ import annotations

import random

import pytest

from dbt.adapters.chaintable.base.compaction_policy import CompactionPolicy
from dbt.adapters.chaintable.base.keys import dropped_options
from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.base.values import ChainConfigError
from dbt.adapters.chaintable.chain.state import ChainState
from dbt.adapters.chaintable.compaction import policy

BASE = {
    "partition_by": ["region", "dt"],
    "chain_partition_keys": ["dt"],
    "primary_key": ["id", "region", "dt"],
}


def opts(**compaction):
    return ChainOptions.from_config("t", {**BASE, "chain_compaction": compaction or None})


def day(n: int) -> str:
    return f"202508{n:02d}"


def state(o, snaps, deltas):
    return ChainState.build(o, snaps, deltas)


class TestConfig:
    def test_defaults_and_round_trip(self):
        o = opts(max_chain_length=7)
        assert o.compaction == CompactionPolicy(7, None, "inline")
        props = o.to_properties()
        assert props["chaintable.compaction.max-chain-length"] == "7"
        assert props["chaintable.compaction.mode"] == "inline"
        assert "chaintable.compaction.max-cumulative-ratio" not in props
        assert ChainOptions.from_properties("t", props) == o
        both = opts(max_chain_length=3, max_cumulative_ratio=0.05, mode="deferred")
        assert both.compaction == CompactionPolicy(3, 0.05, "deferred")
        assert ChainOptions.from_properties("t", both.to_properties()) == both
        assert both.compaction.describe() == (
            "max_chain_length 3 or max_cumulative_ratio 0.05, mode deferred"
        )

    def test_no_policy_by_default(self):
        o = ChainOptions.from_config("t", BASE)
        assert o.compaction is None
        assert not any(k.startswith("chaintable.compaction") for k in o.to_properties())
        assert ChainOptions.from_properties("t", o.to_properties()).compaction is None

    @pytest.mark.parametrize(
        "raw, message",
        [
            (
                "weekly",
                "chain_compaction must be a dict such as {max_chain_length: 7, mode: "
                "inline}, got 'weekly'",
            ),
            (
                {"max_chain_lenght": 7},
                "chain_compaction has unknown key(s) ['max_chain_lenght'];"
                " expected ['max_chain_length', 'max_cumulative_ratio', 'mode']",
            ),
            (
                {"mode": "inline"},
                "chain_compaction needs a trigger: max_chain_length and/or max_cumulative_ratio",
            ),
            (
                {"max_chain_length": 0},
                "chain_compaction max_chain_length must be an integer >= 1, got 0",
            ),
            (
                {"max_chain_length": 2.5},
                "chain_compaction max_chain_length must be an integer >= 1, got 2.5",
            ),
            (
                {"max_chain_length": True},
                "chain_compaction max_chain_length must be an integer >= 1, got True",
            ),
            (
                {"max_chain_length": "x"},
                "chain_compaction max_chain_length must be an integer >= 1, got 'x'",
            ),
            (
                {"max_cumulative_ratio": 0},
                "chain_compaction max_cumulative_ratio must be a number > 0, got 0",
            ),
            (
                {"max_cumulative_ratio": -0.1},
                "chain_compaction max_cumulative_ratio must be a number > 0, got -0.1",
            ),
            (
                {"max_cumulative_ratio": "lots"},
                "chain_compaction max_cumulative_ratio must be a number > 0, got 'lots'",
            ),
            (
                {"max_chain_length": 7, "mode": "nightly"},
                "chain_compaction mode 'nightly' is not one of ['inline', 'deferred']",
            ),
            (
                {"max_chain_length": float("inf")},
                "chain_compaction max_chain_length must be an integer >= 1, got inf",
            ),
            (
                {"max_chain_length": "nan"},
                "chain_compaction max_chain_length must be an integer >= 1, got 'nan'",
            ),
            (
                {"max_cumulative_ratio": float("nan")},
                "chain_compaction max_cumulative_ratio must be a number > 0, got nan",
            ),
            (
                {"max_cumulative_ratio": "inf"},
                "chain_compaction max_cumulative_ratio must be a number > 0, got 'inf'",
            ),
        ],
    )
    def test_bad_config_names_the_model_and_the_key(self, raw, message):
        with pytest.raises(ChainConfigError) as e:
            ChainOptions.from_config("t", {**BASE, "chain_compaction": raw})
        assert str(e.value).endswith(f"chain_incremental model 't': {message}")

    def test_strings_from_yaml_or_cli_are_accepted(self):
        o = opts(max_chain_length="7", max_cumulative_ratio="0.1")
        assert o.compaction == CompactionPolicy(7, 0.1, "inline")
        assert opts(max_chain_length="7.0").compaction == CompactionPolicy(7, None, "inline")

    @pytest.mark.parametrize("raw", [None, {}, "", "none", "None", False, "false"])
    def test_none_in_any_spelling_is_no_policy(self, raw):
        """The compaction policy's default "none" (docs/design.md#compaction-policy): YAML reads `chain_compaction: none` as the string."""
        assert ChainOptions.from_config("t", {**BASE, "chain_compaction": raw}).compaction is None


class TestCumulativeDeltaConfig:
    @pytest.mark.parametrize(
        "raw, expected",
        [(None, True), (True, True), (False, False), ("false", False), ("True", True), (0, False)],
    )
    def test_spellings(self, raw, expected):
        config = {**BASE, "cumulative_delta": raw}
        assert ChainOptions.from_config("t", config).cumulative_delta is expected
        assert ChainOptions.from_config("t", BASE).cumulative_delta is True

    @pytest.mark.parametrize(
        "key, value, message",
        [
            (
                "partial_update_ignore_delete",
                "ture",
                "partial_update_ignore_delete must be true or false, got 'ture'",
            ),
            (
                "ignore_retract",
                {"v": "maybe"},
                "ignore_retract of column 'v' must be true or false, got 'maybe'",
            ),
            (
                "partition_expiration_max_num",
                float("inf"),
                "partition_expiration_max_num must be an integer, got inf",
            ),
            (
                "partition_expiration_max_num",
                2.5,
                "partition_expiration_max_num must be an integer, got 2.5",
            ),
        ],
    )
    def test_other_flags_and_counts_are_refused_naming_the_model(self, key, value, message):
        with pytest.raises(ChainConfigError) as e:
            ChainOptions.from_config("t", {**BASE, key: value})
        assert str(e.value).endswith(f"chain_incremental model 't': {message}")

    def test_counts_spelt_as_yaml_gives_them(self):
        config = {**BASE, "partition_expiration_max_num": "3.0"}
        assert ChainOptions.from_config("t", config).max_num == 3

    def test_anything_else_is_refused_naming_the_model(self):
        with pytest.raises(ChainConfigError) as e:
            ChainOptions.from_config("t", {**BASE, "cumulative_delta": "ture"})
        assert str(e.value).endswith(
            "chain_incremental model 't': cumulative_delta must be true or false, got 'ture'"
        )

    def test_a_policy_taken_out_of_the_config_is_unset(self):
        stored = opts(max_chain_length=7, max_cumulative_ratio=0.1).to_properties()
        now = ChainOptions.from_config("t", BASE).to_properties()
        assert dropped_options(stored, now) == [
            "chaintable.compaction.max-chain-length",
            "chaintable.compaction.max-cumulative-ratio",
            "chaintable.compaction.mode",
        ]
        fewer = opts(max_chain_length=7).to_properties()
        assert dropped_options(stored, fewer) == ["chaintable.compaction.max-cumulative-ratio"]


class TestDecide:
    def test_length_trigger_per_group(self):
        """CN has 3 deltas since its anchor, US 2, EU none after its snapshot."""
        o = opts(max_chain_length=3)
        s = state(
            o,
            [("CN", day(1)), ("US", day(1)), ("EU", day(4))],
            [("CN", day(d)) for d in (2, 3, 4)] + [("US", day(d)) for d in (2, 3)],
        )
        assert policy.needs_counts(o.compaction, s) == []
        verdicts = policy.decide(o.compaction, s, {})
        assert [(v.group, v.newest, v.chain_length, v.due, v.reason) for v in verdicts] == [
            (("CN",), (day(4),), 3, True, "chain length 3 >= max_chain_length 3"),
            (("EU",), (day(4),), 0, False, "newest day is a snapshot"),
            (("US",), (day(3),), 2, False, "chain length 2 < 3"),
        ]
        assert verdicts[0].plan.anchor == (day(1),)
        assert policy.due_by_day(verdicts, s) == [((day(4),), [("CN",)])]

    def test_a_group_without_snapshot_counts_every_delta(self):
        o = opts(max_chain_length=2)
        s = state(o, [], [("CN", day(1)), ("CN", day(2))])
        (v,) = policy.decide(o.compaction, s, {})
        assert (v.due, v.chain_length, v.plan.anchor) == (True, 2, None)

    def test_ratio_trigger_uses_the_counts(self):
        o = opts(max_cumulative_ratio=0.05)
        s = state(
            o,
            [("CN", day(1)), ("US", day(1))],
            [("CN", day(2)), ("US", day(2)), ("US", day(3))],
        )
        plans = policy.needs_counts(o.compaction, s)
        assert [(p.group, p.chain, p.deltas) for p in plans] == [
            (("CN",), (day(2),), ((day(2),),)),
            (("US",), (day(3),), ((day(2),), (day(3),))),
        ]
        counts = {("CN",): policy.Counts(5, 100), ("US",): policy.Counts(6, 100)}
        verdicts = policy.decide(o.compaction, s, counts)
        assert [(v.group, v.due, v.reason) for v in verdicts] == [
            (("CN",), False, "5 changed key(s) since the anchor <= 0.05 of 100 anchor row(s)"),
            (
                ("US",),
                True,
                "6 changed key(s) since the anchor > max_cumulative_ratio 0.05 of "
                "100 anchor row(s)",
            ),
        ]
        assert policy.due_by_day(verdicts, s) == [((day(3),), [("US",)])]

    def test_ratio_without_anchor_is_due_once_anything_changed(self):
        o = opts(max_cumulative_ratio=0.5)
        s = state(o, [], [("CN", day(1))])
        (v,) = policy.decide(o.compaction, s, {("CN",): policy.Counts(1, 0)})
        assert v.due and v.reason.endswith("(no anchor)")
        (v,) = policy.decide(o.compaction, s, {("CN",): policy.Counts(0, 0)})
        assert not v.due

    def test_either_trigger_makes_a_day_due_and_length_skips_the_counts(self):
        o = opts(max_chain_length=2, max_cumulative_ratio=0.5)
        s = state(
            o,
            [("CN", day(1)), ("US", day(1))],
            [("CN", day(2)), ("CN", day(3)), ("US", day(2))],
        )
        plans = policy.needs_counts(o.compaction, s)
        assert [p.group for p in plans] == [("US",)]  # CN is due by length: nothing to count
        verdicts = policy.decide(o.compaction, s, {("US",): policy.Counts(80, 100)})
        assert [(v.group, v.due) for v in verdicts] == [(("CN",), True), (("US",), True)]
        assert verdicts[1].reason == (
            "80 changed key(s) since the anchor > max_cumulative_ratio 0.5 of 100 anchor row(s)"
        )
        # both due on different days: one compaction per day, oldest first
        assert policy.due_by_day(verdicts, s) == [
            ((day(2),), [("US",)]),
            ((day(3),), [("CN",)]),
        ]

    def test_missing_counts_are_a_programming_error(self):
        o = opts(max_cumulative_ratio=0.5)
        s = state(o, [("CN", day(1))], [("CN", day(2))])
        with pytest.raises(KeyError):
            policy.decide(o.compaction, s, {})


@pytest.mark.parametrize("seed", range(200))
def test_length_rule_matches_the_chain_since_the_last_snapshot(seed):
    """Random chains: a group is due exactly when its newest day is delta-only and the deltas
    after its last earlier snapshot (all of them without one) up to that day number at least n."""
    rnd = random.Random(seed)
    n = rnd.randint(1, 6)

    def days() -> set[int]:
        return set(rnd.sample(range(1, 13), rnd.randint(0, 8)))

    groups = {g: (days(), days()) for g in ("A", "B", "C")[: rnd.randint(1, 3)]}
    o = opts(max_chain_length=n)
    snaps = [(g, day(d)) for g, (s, _) in groups.items() for d in s]
    deltas = [(g, day(d)) for g, (_, ds) in groups.items() for d in ds]
    s = state(o, snaps, deltas)
    verdicts = {v.group: v for v in policy.decide(o.compaction, s, {})}
    for g, (ss, ds) in groups.items():
        if not ss and not ds:
            continue
        newest = max(ss | ds)
        if newest in ss:
            assert not verdicts[(g,)].due
            continue
        anchor = max((x for x in ss if x < newest), default=0)
        length = len([x for x in ds if anchor < x <= newest])
        assert verdicts[(g,)].chain_length == length
        assert verdicts[(g,)].due == (length >= n)
