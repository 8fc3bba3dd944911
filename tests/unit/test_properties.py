"""Table properties written and read back through Spark's redaction (sql/properties.py): what
SHOW TBLPROPERTIES gives is simulated as Spark computes it (a pattern found in the key or the
value replaces the value), with Spark's default patterns or another one."""

from __future__ import annotations

import json
import random
import re

import pytest

from dbt.adapters.chaintable.base import statements as S
from dbt.adapters.chaintable.base.compaction_policy import CompactionPolicy
from dbt.adapters.chaintable.base.keys import (
    P_CHANGES_VOID,
    P_HISTORY_START,
    P_STALE,
    stale_to_property,
)
from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.base.properties import (
    DEFAULT_PATTERNS,
    NO_MIRROR,
    REDACTED,
    RedactedPropertyError,
    digest,
    mirror_key,
    read_back,
    stored,
    stored_keys,
    written_key,
)
from dbt.adapters.chaintable.base.values import ChainConfigError
from dbt.adapters.chaintable.publish import safety
from tests.unit.fake_catalog import METASTORE_KEY_LIMIT, METASTORE_VALUE_LIMIT, FakeConnections

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
    location = "file:/data/ods_hourly.db/t__cumulative"
    assert written == {
        **props,
        mirror_key("chaintable.cumulative-location"): location.encode().hex(),
        mirror_key("primary-key"): "75726c2c6474",
        mirror_key("fields.token_count.aggregate-function"): "73756d",
        # what each write left beside its key (none for a key the patterns match by name:
        # every write of it has its mirror)
        written_key("chaintable.cumulative-location"): digest(location),
        written_key("primary-key"): digest("url,dt"),
        written_key("chaintable.stale-snapshots"): NO_MIRROR,
        written_key("merge-engine"): NO_MIRROR,
    }
    # the mirrors and records themselves are not redacted by the default patterns
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
    record, owner = written_key(loc), "chaintable.lock.owner"
    assert S.set_properties("s.t", {loc: "/a/token/b"}) == (
        f"ALTER TABLE s.t SET TBLPROPERTIES ('{loc}' = '/a/token/b', "
        f"'{mirror}' = '{b'/a/token/b'.hex()}', '{record}' = '{digest('/a/token/b')}')"
    )
    assert S.set_properties("s.t", {loc: "/a/b"}) == (
        f"ALTER TABLE s.t SET TBLPROPERTIES ('{loc}' = '/a/b', '{record}' = 'none')"
    )
    assert S.unset_properties("s.t", [loc]) == (
        f"ALTER TABLE s.t UNSET TBLPROPERTIES IF EXISTS ('{loc}', '{mirror}')"
    )
    assert S.create_lock_view("s.l", {owner: "token-pod:1:x"}) == (
        f"CREATE VIEW s.l TBLPROPERTIES ('{mirror_key(owner)}' = "
        f"'{b'token-pod:1:x'.hex()}', '{owner}' = 'token-pod:1:x', "
        f"'{written_key(owner)}' = '{digest('token-pod:1:x')}') AS SELECT 1 AS locked"
    )


def test_a_users_own_secret_gets_no_unredacted_copy():
    props = {"vault.password": "hunter2", "chaintable.cumulative-location": "/a/token/b"}
    written = stored(props)
    assert mirror_key("vault.password") not in written
    assert mirror_key("chaintable.cumulative-location") in written


# ---- the metastore's limits: a key of 256 characters, a value of 32,672 ---------------------
GROUPS = 10_000  # partitions or groups a write touches


def _region(g: int) -> str:
    return f"R{g:05d}" + ("-token" if g < 200 else "")  # the first groups' are redacted


def _path(g: int, day: str = "20250801") -> str:
    return f"region={_region(g)}/dt={day}"


def _invalidates() -> str:
    """lock.invalidating's record of a delta run rewriting GROUPS partitions."""
    specs = [{"region": _region(g), "dt": "20250801"} for g in range(GROUPS)]
    return json.dumps({"run": "20250801T000000-ab12cd34", "written": specs, "partitions": specs})


# each of the adapter's own values that grows with the partitions or groups a write touches,
# as the code writing it spells it (publisher.py, lock.py, catalog.py, history/stored.py)
GROWING = {
    safety.P_REPLACES: lambda: json.dumps(
        {
            _path(g): "file:/data/warehouse/ods_hourly.db/orders__snapshot/"
            f"{_path(g)}/_chain_v/20250801T000000-{g:08x}"
            for g in range(GROUPS)
        }
    ),
    safety.P_INVALIDATES: _invalidates,
    P_STALE: lambda: stale_to_property({_path(g, "20250805"): _path(g) for g in range(GROUPS)}),
    P_HISTORY_START: lambda: stale_to_property(
        {f"region={_region(g)}": "dt=20250101" for g in range(GROUPS)}
    ),
    P_CHANGES_VOID: lambda: json.dumps(
        {f"region={_region(g)}": "dt=20250804" for g in range(GROUPS)}, separators=(",", ":")
    ),
}


def within_limits(written: dict[str, str]) -> bool:
    return max(map(len, written)) <= METASTORE_KEY_LIMIT and (
        max(map(len, written.values())) <= METASTORE_VALUE_LIMIT
    )


@pytest.mark.parametrize("key", sorted(GROWING))
def test_a_value_growing_with_the_partitions_round_trips_within_the_metastores_limits(key):
    value = GROWING[key]()
    assert len(value) > 5 * METASTORE_VALUE_LIMIT
    written = stored({key: value})
    assert within_limits(written)
    rows = show_tblproperties(written)
    assert (key, REDACTED) in rows  # its first piece names redacted groups: read from a mirror
    assert read_back("s.t", rows) == {key: value}


def test_the_statement_setting_a_long_value_is_one_the_metastore_takes():
    conns = FakeConnections()
    table = conns.table("t__chain_pub")
    value = GROWING[safety.P_REPLACES]()
    conns.add_query(S.set_properties("s.t__chain_pub", {safety.P_REPLACES: value}))
    rows = show_tblproperties(table.props)
    assert read_back("s.t__chain_pub", rows) == {safety.P_REPLACES: value}
    with pytest.raises(RuntimeError, match="over the limit"):  # as the metastore refuses it
        conns.add_query(S.set_properties("s.t__chain_pub", {"x." + "k" * 255: "v"}))


def test_the_mirror_of_a_long_key_is_named_by_a_digest_within_the_key_limit():
    # a sequence group of seven fields, one of them redacted by name
    key = "fields." + ",".join(f"url_sequence_{i:02d}" for i in range(7)) + ".sequence-group"
    assert len(key) > 121
    written = stored({key: "amount,price"})
    assert within_limits(written)
    rows = show_tblproperties(written)
    assert (key, REDACTED) in rows
    assert read_back("s.t", rows) == {key: "amount,price"}
    hex_key = written[mirror_key(key)].split(".")[0]
    assert bytes.fromhex(hex_key).decode() == key  # the key is recoverable from its mirror
    assert mirror_key(key) in stored_keys([key])
    assert all(len(k) <= METASTORE_KEY_LIMIT for k in stored_keys([key]))
    # a mirror named by its key in hex, as chains written before have, still reads
    before = [("primary-key", REDACTED), ("chaintable.hex." + b"primary-key".hex(), "75726c")]
    assert read_back("s.t", before) == {"primary-key": "url"}


def test_a_redacted_value_is_never_read_from_a_mirror_an_earlier_value_left():
    old = '{"region=token/dt=20250803":"region=token/dt=20250802"}'
    new = '{"region=CN/dt=20250803":"region=CN/dt=20250802"}'
    table = stored({P_STALE: old})  # at risk: mirrored
    table.update(stored({P_STALE: new}))  # not at risk: no mirror, the old one stays
    assert mirror_key(P_STALE) in table
    # a pattern beyond Spark's defaults hides the new value
    custom = [*SPARK_DEFAULTS, re.compile(r"region=CN")]
    with pytest.raises(RedactedPropertyError, match=f"'{P_STALE}' reads back as"):
        read_back("s.t", show_tblproperties(table, custom))
    assert read_back("s.t", show_tblproperties(table)) == {P_STALE: new}


def test_a_piece_hidden_beyond_the_default_patterns_is_refused_not_read_from_a_stale_mirror():
    risky = stale_to_property({f"region=token{g:05d}": "dt=20250101" for g in range(GROUPS)})
    plain = stale_to_property({f"region=R{g:05d}": "dt=20250101" for g in range(GROUPS)})
    table = stored({P_HISTORY_START: risky})  # every piece mirrored
    table.update(stored({P_HISTORY_START: plain}))  # no piece mirrored: the old mirrors stay
    assert within_limits(table)
    custom = [*SPARK_DEFAULTS, re.compile(r"R09999")]  # only in the new value's last piece
    rows = show_tblproperties(table, custom)
    assert dict(rows)[P_HISTORY_START] != REDACTED  # the first piece comes back whole
    with pytest.raises(RedactedPropertyError):
        read_back("s.t", rows)
    assert read_back("s.t", show_tblproperties(table)) == {P_HISTORY_START: plain}


def test_a_shorter_value_after_a_longer_one_reads_the_shorter_one():
    void = json.loads(GROWING[P_CHANGES_VOID]())
    shorter = json.dumps(dict(list(void.items())[:500]), separators=(",", ":"))  # two pieces
    table: dict[str, str] = {}
    for value in (json.dumps(void, separators=(",", ":")), shorter, '{"region=CN":"dt=1"}'):
        written = stored({P_CHANGES_VOID: value})
        assert within_limits(written)
        table.update(written)  # what an earlier, longer value left stays beside it
        assert read_back("s.t", show_tblproperties(table)) == {P_CHANGES_VOID: value}
