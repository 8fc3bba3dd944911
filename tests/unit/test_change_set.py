"""The change set of a run on an existing chain (run/changes.py): what the branches get added, set
and unset, and when the config needs a full refresh instead, from the config and the stored
properties and columns alone."""

from typing import Any

import pytest

from dbt.adapters.chaintable.base.config import ModelSettings
from dbt.adapters.chaintable.base.keys import P_EXPIRATION, P_SEQUENCE
from dbt.adapters.chaintable.base.values import ChainConfigError
from dbt.adapters.chaintable.run.changes import ChangeSet, change_set, full_refresh_reason

CONFIG: dict[str, Any] = {
    "partition_by": ["region", "dt"],
    "chain_partition_keys": ["dt"],
    "primary_key": ["id", "region", "dt"],
    "sequence_field": "seq",
}
COLUMNS = [
    ("id", "int"),
    ("v", "string"),
    ("seq", "bigint"),
    ("region", "string"),
    ("dt", "string"),
]
TABLES = ("s.t__snapshot", "s.t__delta")


def settings(**config: Any) -> ModelSettings:
    return ModelSettings.from_config("t", {**CONFIG, **config})


def stored(**config: Any) -> dict[str, str]:
    """The properties a run of this config left on the branches."""
    return settings(**config).opts.to_properties()


def changes(model: ModelSettings, props: dict[str, str], columns=COLUMNS) -> ChangeSet:
    return change_set(model, TABLES, props, COLUMNS, columns)


def test_a_run_of_the_same_config_and_columns_changes_nothing():
    props = stored()
    cs = changes(settings(), props)
    assert cs == ChangeSet()
    assert not cs.changes_tables
    assert cs.properties_after(props) == props


def test_a_changed_option_sets_every_option_together():
    props = stored(sequence_field=None)
    cs = changes(settings(), props)
    assert cs.set_properties == settings().opts.to_properties()
    assert cs.set_properties[P_SEQUENCE] == "seq"
    assert cs.unset_properties == () and cs.add_columns == ()
    assert cs.changes_tables and cs.full_refresh is None
    assert cs.properties_after(props)[P_SEQUENCE] == "seq"


def test_an_option_taken_out_of_the_config_is_unset():
    expiring = {
        "partition_timestamp_pattern": "$dt",
        "partition_timestamp_formatter": "yyyyMMdd",
        "partition_expiration_time": "30 d",
    }
    props = stored(**expiring)
    cs = changes(settings(), props)
    assert P_EXPIRATION in cs.unset_properties
    assert P_EXPIRATION not in cs.properties_after(props)
    assert cs.set_properties == {}  # what stays configured is stored as it is


def test_new_columns_are_added_only_under_append_new_columns():
    wider = [*COLUMNS[:3], ("w", "int"), *COLUMNS[3:]]
    cs = changes(settings(on_schema_change="append_new_columns"), stored(), wider)
    assert cs.add_columns == (("w", "int"),)
    assert "appended to both branches" in cs.message
    ignored = changes(settings(), stored(), wider)
    assert ignored.add_columns == () and "new columns ignored" in ignored.message
    assert not ignored.changes_tables


@pytest.mark.parametrize(
    "columns",
    [
        [c for c in COLUMNS if c[0] != "v"],  # removed
        [("id", "bigint"), *COLUMNS[1:]],  # retyped
    ],
)
def test_removed_or_retyped_columns_are_refused(columns):
    with pytest.raises(ChainConfigError, match="nothing was written"):
        changes(settings(on_schema_change="append_new_columns"), stored(), columns)


def test_new_columns_are_refused_under_fail():
    wider = [*COLUMNS, ("w", "int")]
    with pytest.raises(ChainConfigError, match="on_schema_change=fail"):
        changes(settings(on_schema_change="fail"), stored(), wider)


def test_a_changed_key_needs_a_full_refresh():
    props = stored(primary_key=["id", "v", "region", "dt"])
    reason = full_refresh_reason(settings().opts, TABLES[0], props)
    assert reason is not None and reason.startswith("primary_key")
    assert reason.endswith("changes how stored partitions are read")
    assert changes(settings(), props).full_refresh == reason
    assert full_refresh_reason(settings().opts, TABLES[0], stored()) is None
