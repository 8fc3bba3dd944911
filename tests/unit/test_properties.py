"""Table properties written and read back through Spark's redaction (sql/properties.py): what
SHOW TBLPROPERTIES gives is simulated as Spark computes it (a pattern found in the key or the
value replaces the value), with Spark's default patterns or another one."""

from __future__ import annotations

import random
import re

import pytest

from dbt.adapters.chaintable.base import statements as S
from dbt.adapters.chaintable.base.compaction_policy import CompactionPolicy
from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.base.properties import (
    DEFAULT_PATTERNS,
    REDACTED,
    mirror_key,
    read_back,
    stored,
)
from dbt.adapters.chaintable.base.values import ChainConfigError

SPARK_DEFAULTS = [re.compile(r"(?i)url"), re.compile(r"(?i)secret|password|token|access[.]?key")]


def show_tblproperties(props, patterns=SPARK_DEFAULTS):
    """The rows Spark's SHOW TBLPROPERTIES gives for a table holding `props` (Utils.redact)."""
    return [
        (k, REDACTED if any(p.search(k) or p.search(v) for p in patterns) else v)
        for k, v in sorted(props.items())
    ]


def test_only_properties_the_default_patterns_match_get_a_mirror():
    props = {
        "chaintable.cumulative-location": "file:/data/ods_hourly.db/t__cumulative",
        "primary-key": "url,dt",
        "fields.token_count.aggregate-function": "sum",
        "chaintable.stale-snapshots": '{"region=CN/dt=20250803": "region=CN/dt=20250802"}',
        "merge-engine": "deduplicate",
    }
    written = stored(props)
    assert written == {
        **props,
        mirror_key("chaintable.cumulative-location"): (
            b"file:/data/ods_hourly.db/t__cumulative".hex()
        ),
        mirror_key("primary-key"): "75726c2c6474",
        mirror_key("fields.token_count.aggregate-function"): "73756d",
    }
    # the mirrors themselves are not redacted by the default patterns
    assert not any(DEFAULT_PATTERNS.search(k + v) for k, v in written.items() if k not in props)


def test_every_property_reads_back_as_written_through_the_default_redaction():
    rng = random.Random(3)
    words = ["url", "URL", "hourly", "token", "Secret", "password", "access.key", "accesskey"]
    words += ["dt", "region", "/data/", "CN", "'", "\\", "é", " ", "=", ","]
    for _ in range(300):
        props = {
            rng.choice(["chaintable.", "fields.", "x."])
            + "".join(rng.choices(words, k=3)): "".join(rng.choices(words, k=rng.randint(0, 6)))
            for _ in range(rng.randint(1, 6))
        }
        rows = show_tblproperties(stored(props))
        # the adapter's own come back whole; a user's own (x.) as Spark shows it
        shown = dict(show_tblproperties(props))
        want = {k: v if not k.startswith("x.") else shown[k] for k, v in props.items()}
        assert read_back("s.t__snapshot", rows) == want


def test_a_whole_plain_value_wins_over_a_mirror_left_from_an_earlier_value():
    rows = [
        ("chaintable.stale-snapshots", "{}"),  # written later, safe: no new mirror
        (mirror_key("chaintable.stale-snapshots"), b'{"g=token":"x"}'.hex()),
    ]
    assert read_back("s.t", rows) == {"chaintable.stale-snapshots": "{}"}


def test_a_redacted_value_of_the_adapters_own_without_a_mirror_is_refused_naming_it():
    # a table written before mirrors existed, or a pattern beyond Spark's defaults
    rows = [("chaintable.cumulative-location", REDACTED), ("merge-engine", "deduplicate")]
    with pytest.raises(ChainConfigError) as e:
        read_back("ods.t__snapshot", rows)
    assert "ods.t__snapshot: table property 'chaintable.cumulative-location' reads back as" in str(
        e.value
    )
    assert "spark.redaction.regex" in str(e.value)


def test_a_users_own_redacted_property_is_left_as_spark_gives_it():
    rows = [("vault.url", REDACTED), ("merge-engine", "deduplicate")]
    assert read_back("s.t", rows) == {"vault.url": REDACTED, "merge-engine": "deduplicate"}


def test_a_pattern_that_also_redacts_the_mirror_is_refused_not_read():
    custom = [re.compile(r"(?i)url|[0-9]{4}")]
    rows = show_tblproperties(stored({"primary-key": "url,dt"}), custom)
    assert (mirror_key("primary-key"), REDACTED) in rows
    with pytest.raises(ChainConfigError, match="'primary-key' reads back as"):
        read_back("s.t", rows)


def test_chain_options_with_redacted_names_round_trip():
    opts = ChainOptions(
        partition_by=("token_region", "dt"),
        chain_keys=("dt",),
        primary_key=("url", "token_region", "dt"),
        sequence_field="secret_seq",
        merge_engine="aggregation",
        aggregate_functions={"password_changes": "sum"},
        compaction=CompactionPolicy(max_cumulative_ratio=0.5),
    )
    rows = show_tblproperties(stored(opts.to_properties()))
    # partition, primary-key, sequence.field and the aggregate function's key
    assert sum(v == REDACTED for _, v in rows) == 4
    props = read_back("s.t__snapshot", rows)
    assert ChainOptions.from_properties("s.t__snapshot", props) == opts


def test_statements_write_the_mirrors_and_unset_them_with_their_keys():
    loc = "chaintable.cumulative-location"
    mirror = mirror_key(loc)
    assert S.set_properties("s.t", {loc: "/a/token/b"}) == (
        f"ALTER TABLE s.t SET TBLPROPERTIES ('{loc}' = '/a/token/b', "
        f"'{mirror}' = '{b'/a/token/b'.hex()}')"
    )
    assert S.set_properties("s.t", {loc: "/a/b"}) == (
        f"ALTER TABLE s.t SET TBLPROPERTIES ('{loc}' = '/a/b')"
    )
    assert S.unset_properties("s.t", [loc]) == (
        f"ALTER TABLE s.t UNSET TBLPROPERTIES IF EXISTS ('{loc}', '{mirror}')"
    )
    assert S.create_lock_view("s.l", {"chaintable.lock.owner": "token-pod:1:x"}) == (
        f"CREATE VIEW s.l TBLPROPERTIES ('{mirror_key('chaintable.lock.owner')}' = "
        f"'{b'token-pod:1:x'.hex()}', 'chaintable.lock.owner' = 'token-pod:1:x') "
        "AS SELECT 1 AS locked"
    )


def test_a_users_own_secret_gets_no_unredacted_copy():
    props = {"vault.password": "hunter2", "chaintable.cumulative-location": "/a/token/b"}
    written = stored(props)
    assert mirror_key("vault.password") not in written
    assert mirror_key("chaintable.cumulative-location") in written
