"""chain_input: the option, its refusals (each naming the model and the option) and its stored
property (docs/design.md#full-state-input)."""

import re

import pytest

from dbt.adapters.chaintable.base.config import ModelSettings
from dbt.adapters.chaintable.base.keys import (
    FULL_KIND,
    P_CHAIN_INPUT,
    P_ROWKIND,
    dropped_options,
    reserved_property,
)
from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.base.partitions import ChainPlanError
from dbt.adapters.chaintable.base.values import ChainConfigError
from dbt.adapters.chaintable.chain.state import ChainState, ReadPlan
from dbt.adapters.chaintable.read.visible import visible_changes_sql, visible_sql
from dbt.adapters.chaintable.run.changes import full_refresh_reason
from dbt.adapters.chaintable.run.full import (
    diff_sql,
    first_load_sql,
    groups_sql,
    in_groups_sql,
    plan_full,
)
from dbt.adapters.chaintable.run.model import empty_partitions

BASE = {
    "partition_by": ["region", "dt"],
    "chain_partition_keys": ["dt"],
    "primary_key": ["id", "region", "dt"],
}
FULL = {**BASE, "chain_input": "full"}


def refusal(config: dict) -> str:
    with pytest.raises(ChainConfigError) as e:
        ChainOptions.from_config("customers", config)
    return e.value.msg


def test_changes_is_the_default_and_stores_nothing():
    opts = ChainOptions.from_config("m", BASE)
    assert opts.chain_input == "changes"
    assert P_CHAIN_INPUT not in opts.to_properties()
    explicit = ChainOptions.from_config("m", {**BASE, "chain_input": "changes"})
    assert explicit == opts


def test_full_is_stored_and_read_back():
    opts = ChainOptions.from_config("m", FULL)
    props = opts.to_properties()
    assert props[P_CHAIN_INPUT] == "full"
    assert ChainOptions.from_properties("t__snapshot", props) == opts


ENGINE_REFUSALS = [
    (
        {"chain_input": "full", "merge_engine": engine},
        f"chain_input 'full' takes merge_engine 'deduplicate' only, not '{engine}': "
        "a day's full state is read back as it was given",
    )
    for engine in ("partial-update", "first-row", "aggregation")
]


@pytest.mark.parametrize(
    "extra, message",
    [
        ({"chain_input": "snapshot"}, "chain_input 'snapshot' is not one of ['changes', 'full']"),
        *ENGINE_REFUSALS,
        (
            {"chain_input": "full", "sequence_field": "seq"},
            "chain_input 'full' cannot be used with sequence_field 'seq': the day order "
            "decides which state is the latest",
        ),
        (
            {"chain_input": "full", "rowkind_field": "op"},
            "chain_input 'full' cannot be used with rowkind_field 'op': the adapter keeps "
            "the row kind of the changes it computes itself",
        ),
    ],
)
def test_refusals_name_the_model_and_the_option(extra, message):
    assert refusal({**BASE, **extra}) == f"chain_incremental model 'customers': {message}"


def test_switching_the_input_of_a_chain_needs_a_full_refresh():
    stored = ChainOptions.from_config("m", BASE).to_properties()
    reason = full_refresh_reason(ChainOptions.from_config("m", FULL), "t__snapshot", stored)
    assert reason == "chain_input changes -> full changes how stored partitions are read"
    back = full_refresh_reason(
        ChainOptions.from_config("m", BASE),
        "t__snapshot",
        ChainOptions.from_config("m", FULL).to_properties(),
    )
    assert back == "chain_input full -> changes changes how stored partitions are read"


def test_the_stored_input_is_the_adapters_and_dropped_when_no_longer_configured():
    assert reserved_property(P_CHAIN_INPUT) == (
        "it is a chain option; set it with the model config chain_input"
    )
    full = ChainOptions.from_config("m", FULL).to_properties()
    plain = ChainOptions.from_config("m", BASE).to_properties()
    assert dropped_options(full, plain) == [P_CHAIN_INPUT, P_ROWKIND]
    assert re.fullmatch(r"chaintable\.[a-z-]+", P_CHAIN_INPUT)


# ---- the run's comparison (run/full.py): pure planning and its SQL --------------------------
FULL_OPTS = ChainOptions.from_config("m", FULL)


def grouped_state(snaps, deltas):
    return ChainState.build(FULL_OPTS, snaps, deltas, {"dt": "string"})


def test_each_group_is_compared_with_its_latest_day_before():
    s = grouped_state(
        [("CN", "20250801"), ("US", "20250801")],
        [("CN", "20250802"), ("CN", "20250803"), ("US", "20250802")],
    )
    plan = plan_full(s, "m", ("20250804",), [("CN",), ("US",), ("JP",)])
    assert plan.groups == (("CN",), ("JP",), ("US",))
    assert plan.previous == (
        ReadPlan(("CN",), ("20250803",), False, ("20250801",), (("20250802",), ("20250803",))),
        ReadPlan(("US",), ("20250802",), False, ("20250801",), (("20250802",),)),
    )
    assert plan.by_day() == {("20250803",): [plan.previous[0]], ("20250802",): [plan.previous[1]]}
    rerun = plan_full(s, "m", ("20250803",), [("CN",)])  # the newest day again: its day before
    assert rerun.previous == (
        ReadPlan(("CN",), ("20250802",), False, ("20250801",), (("20250802",),)),
    )
    assert plan_full(s, "m", ("20250805",), []).previous == ()


def test_the_next_held_day_of_each_group_is_compared_again_unless_a_snapshot_serves_it():
    s = grouped_state(
        [("CN", "20250801"), ("US", "20250801"), ("US", "20250803")],
        [("CN", "20250803"), ("CN", "20250805"), ("US", "20250803"), ("JP", "20250804")],
    )
    plan = plan_full(s, "m", ("20250802",), [("CN",), ("US",), ("JP",), ("FR",)])
    # CN's next day 0803 is a delta on the 0801 snapshot; US's 0803 reads its own snapshot,
    # which the rerun does not change; JP's 0804 has no day before it
    assert plan.following == (
        ReadPlan(("CN",), ("20250803",), False, ("20250801",), (("20250803",),)),
        ReadPlan(("JP",), ("20250804",), False, None, (("20250804",),)),
    )
    assert plan.rewritten() == (("CN", "20250803"), ("JP", "20250804"))
    assert plan.following_by_day() == {
        ("20250803",): [plan.following[0]],
        ("20250804",): [plan.following[1]],
    }
    assert [p.chain for p in plan.previous] == [("20250801",), ("20250801",)]  # CN, US
    # a day after every held one, and a rerun of the newest day, compare nothing again
    assert plan_full(s, "m", ("20250806",), [("CN",), ("US",)]).following == ()
    assert plan_full(s, "m", ("20250805",), [("CN",)]).following == ()


def test_a_snapshot_write_before_a_held_day_of_the_group_is_refused_naming_both():
    s = grouped_state([("CN", "20250801")], [("CN", "20250805")])
    with pytest.raises(ChainPlanError) as e:
        plan_full(s, "customers", ("20250803",), [("CN",)], rewrite_later=False)
    assert e.value.msg == (
        "chain_incremental model 'customers': chain_input 'full' cannot write day "
        "region=CN/dt=20250803 to the snapshot branch: the group holds a later day "
        "(region=CN/dt=20250805), whose stored changes were compared with this day's state; "
        "nothing was written"
    )
    assert plan_full(s, "customers", ("20250803",), [("US",)], False).previous == ()


def test_the_output_of_some_groups_is_selected_by_their_partition_names():
    assert in_groups_sql(FULL_OPTS, "MODEL", [("US",), ("CN",)]) == (
        "SELECT * FROM (MODEL) __in WHERE (CAST(`region` AS STRING)) IN (('CN'), ('US'))"
    )
    two = ChainOptions.from_config(
        "m",
        {
            "partition_by": ["region", "city", "dt"],
            "chain_partition_keys": ["dt"],
            "primary_key": ["id", "region", "city", "dt"],
            "chain_input": "full",
        },
    )
    assert in_groups_sql(two, "MODEL", [("CN", "x'y")]) == (
        "SELECT * FROM (MODEL) __in WHERE (CAST(`region` AS STRING), CAST(`city` AS STRING)) "
        "IN (('CN', 'x\\'y'))"
    )
    single = ChainOptions.from_config(
        "m", {"partition_by": ["dt"], "primary_key": ["id", "dt"], "chain_input": "full"}
    )
    assert in_groups_sql(single, "MODEL", [()]) == "MODEL"


def test_a_rewritten_day_of_a_full_chain_leaves_no_later_snapshot_stale():
    s = grouped_state(
        [("CN", "20250801"), ("CN", "20250803")], [("CN", "20250802"), ("CN", "20250803")]
    )
    assert s.stale_after_delta_write([("CN", "20250802")]) == {}
    changes = ChainState.build(
        ChainOptions.from_config("m", BASE),
        s.snapshots,
        s.deltas,
        {"dt": "string"},
    )
    assert changes.stale_after_delta_write([("CN", "20250802")]) == {
        ("CN", "20250803"): ("CN", "20250802")
    }


def test_the_diff_inserts_updates_and_deletes_by_key():
    cols = ["id", "name", "region", "dt"]
    sql = diff_sql(FULL_OPTS, cols, "MODEL", "PREV", {"dt": "'20250804'"})
    assert sql == (
        "SELECT CASE WHEN __o.__ct_on THEN __o.`id` ELSE __p.`id` END AS `id`, "
        "CASE WHEN __o.__ct_on THEN __o.`name` ELSE __p.`name` END AS `name`, "
        "CASE WHEN __o.__ct_on THEN __o.`region` ELSE __p.`region` END AS `region`, "
        "CASE WHEN __o.__ct_on THEN __o.`dt` ELSE '20250804' END AS `dt`, "
        "CASE WHEN __o.__ct_on THEN '+I' ELSE '-D' END AS `ct__kind`\n"
        "FROM (SELECT `id`, `name`, `region`, `dt`, true AS __ct_on, count(*) OVER "
        "(PARTITION BY `id`, `region`) AS __ct_n FROM (MODEL) __m) __o\n"
        "FULL OUTER JOIN (SELECT `id`, `name`, `region`, `dt`, true AS __ct_on "
        "FROM (PREV) __q) __p\nON __o.`id` = __p.`id` AND __o.`region` = __p.`region`\n"
        "WHERE __o.__ct_on IS NULL OR __p.__ct_on IS NULL OR __o.__ct_n > 1 "
        "OR NOT (__o.`name` <=> __p.`name`)"
    )
    assert diff_sql(FULL_OPTS, cols, "MODEL", None, {}) == first_load_sql("MODEL")
    assert first_load_sql("MODEL") == "SELECT *, '+I' AS `ct__kind` FROM (MODEL) __full"


def test_the_groups_of_the_output_are_asked_as_partition_names():
    assert groups_sql(FULL_OPTS, "MODEL") == (
        "SELECT DISTINCT CAST(`region` AS STRING) FROM (MODEL) __g"
    )
    single = ChainOptions.from_config(
        "m", {"partition_by": ["dt"], "primary_key": ["id", "dt"], "chain_input": "full"}
    )
    assert groups_sql(single, "MODEL") == "SELECT true FROM (MODEL) __g LIMIT 1"


def test_reads_leave_the_kind_column_out_of_a_full_chain_only():
    cols = ["id", "name", FULL_KIND, "region", "dt"]
    assert visible_sql(FULL_OPTS, cols, "R", ["ct__to_dt"]) == (
        "SELECT `id`, `name`, `region`, `dt`, `ct__to_dt` FROM (R) __visible"
    )
    plain = ChainOptions.from_config("m", BASE)
    assert visible_sql(plain, cols, "R") == "R"
    assert visible_changes_sql(plain, cols, "R", "ct__change", "ct__before") == "R"
    assert visible_changes_sql(FULL_OPTS, cols, "R", "ct__change", "ct__before") == (
        "SELECT `id`, `name`, `region`, `dt`, `ct__change`, CASE WHEN `ct__before` IS NOT NULL "
        "THEN named_struct('id', `ct__before`.`id`, 'name', `ct__before`.`name`, 'region', "
        "`ct__before`.`region`, 'dt', `ct__before`.`dt`) END AS `ct__before` FROM (R) __visible"
    )


def test_a_group_without_rows_keeps_the_day_it_holds():
    settings = ModelSettings.from_config("m", {**FULL, "chain_partition": {"dt": "20250803"}})
    s = grouped_state([("CN", "20250801"), ("US", "20250801")], [("US", "20250803")])
    # the output has CN only, and no change in it: CN's day is written empty, US's kept
    assert empty_partitions(settings, s, [], [("CN",)]) == [("CN", "20250803")]
    # a chain of changes gives every group without rows its empty day
    assert empty_partitions(settings, s, []) == [("CN", "20250803"), ("US", "20250803")]
    assert empty_partitions(settings, s, [], []) == [("CN", "20250803")]
    forced = ModelSettings.from_config(
        "m", {**FULL, "chain_partition": {"dt": "20250803"}, "chain_branch": "snapshot"}
    )
    assert empty_partitions(forced, s, [], [("CN",)]) == []  # no empty state is written


def test_a_full_chain_stores_its_kind_and_refuses_a_column_of_that_name():
    assert (FULL_OPTS.rowkind_field, FULL_OPTS.to_properties()[P_ROWKIND]) == (FULL_KIND,) * 2
    FULL_OPTS.validate_columns("m", ["id", "name", "region", "dt"])
    with pytest.raises(ChainConfigError) as e:
        FULL_OPTS.validate_columns("m", ["id", FULL_KIND, "region", "dt"])
    assert e.value.msg == (
        "chain_incremental model 'm': column 'ct__kind' is the row kind chain_input 'full' "
        "keeps; rename the model's column"
    )
