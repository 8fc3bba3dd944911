"""Write statements the renderer produces: dynamic overwrite of the partitions in the output, a
static spec when the caller knows the single partition every row belongs to (compaction of one
group: no sort of the rows by partition, the partition exists even when empty), and the layout
a compaction writes: shuffled and sorted by key."""

from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.read.render import Renderer

OPTS = ChainOptions(
    partition_by=("region", "dt"), chain_keys=("dt",), primary_key=("id", "region", "dt")
)
R = Renderer(
    OPTS, ["id", "v", "region", "dt"], {"id": "int", "dt": "date"}, "s.t__snapshot", "s.t__delta"
)


def test_dynamic_overwrite_selects_every_column_partition_columns_last():
    assert R.insert_overwrite("s.p", "SELECT 1") == (
        "INSERT OVERWRITE TABLE s.p PARTITION (`region`, `dt`)\n"
        "SELECT `id`, `v`, `region`, `dt` FROM (SELECT 1) __src"
    )


def test_one_known_partition_is_written_with_a_static_spec_of_string_constants():
    # Spark takes only constants in a PARTITION spec (CAST(...) is a syntax error there) and
    # converts a string to the column's type: the date column gets '2025-01-08'
    assert R.insert_overwrite("s.p", "SELECT 1", only=("eu", "2025-01-08")) == (
        "INSERT OVERWRITE TABLE s.p PARTITION (`region` = 'eu', `dt` = '2025-01-08')\n"
        "SELECT `id`, `v` FROM (SELECT 1) __src"
    )


def test_empty_partitions_and_drop_use_the_same_spec():
    spec = "`region` = 'e''u', `dt` = '2025-01-08'".replace("''", "\\'")
    assert R.add_empty_partitions("s.p", [("e'u", "2025-01-08"), ("b", "2025-01-09")]) == (
        f"ALTER TABLE s.p ADD IF NOT EXISTS PARTITION ({spec}) "
        "PARTITION (`region` = 'b', `dt` = '2025-01-09')"
    )
    assert R.add_empty_partitions("s.p", []) is None
    assert (
        R.drop_partitions("s.p", [("e'u", "2025-01-08")])
        == f"ALTER TABLE s.p DROP IF EXISTS PARTITION ({spec})"
    )
    assert R.drop_partitions("s.p", []) is None


def test_rows_by_key_are_shuffled_by_the_keys_and_sorted_partition_columns_first():
    # dynamic: Spark's writer needs the rows in partition order, so the partition columns
    # lead; the group column of the key is a partition column and is not repeated
    assert R.insert_overwrite("s.p", "SELECT 1", by_key=True) == (
        "INSERT OVERWRITE TABLE s.p PARTITION (`region`, `dt`)\n"
        "SELECT `id`, `v`, `region`, `dt` FROM (SELECT * FROM (SELECT 1) __k "
        "DISTRIBUTE BY `id` SORT BY `region`, `dt`, `id`) __src"
    )
    # static: one partition, its columns are constants
    assert R.insert_overwrite("s.p", "SELECT 1", only=("eu", "2025-01-08"), by_key=True) == (
        "INSERT OVERWRITE TABLE s.p PARTITION (`region` = 'eu', `dt` = '2025-01-08')\n"
        "SELECT `id`, `v` FROM (SELECT * FROM (SELECT 1) __k DISTRIBUTE BY `id` SORT BY `id`) "
        "__src"
    )


def test_no_layout_by_key_when_the_primary_key_is_the_partition_columns():
    opts = ChainOptions(
        partition_by=("region", "dt"), chain_keys=("dt",), primary_key=("region", "dt")
    )
    r = Renderer(opts, ["v", "region", "dt"], {}, "s.t__snapshot", "s.t__delta")
    assert r.by_key("SELECT 1", partitioned=True) == "SELECT 1"
    assert r.insert_overwrite("s.p", "SELECT 1", by_key=True) == r.insert_overwrite(
        "s.p", "SELECT 1"
    )


def test_an_in_list_of_a_hundred_to_a_thousand_values_is_said_in_pieces_of_a_hundred():
    """Spark gives the metastore an IN list of at most 1,000 values on a partition column as
    nested ORs, which Derby's parser overflows its stack on from ~700 (chain/sql.py)."""
    values = [f"g{i:04d}" for i in range(1001)]
    lits = [f"'{v}'" for v in values]
    assert R._in("region", values[:100]) == f"`region` IN ({', '.join(lits[:100])})"
    assert R._in("region", values[:150]) == (
        f"(`region` IN ({', '.join(lits[:100])}) OR `region` IN ({', '.join(lits[100:150])}))"
    )
    assert R._in("region", values[:1000]).count(" IN (") == 10
    assert R._in("region", values) == f"`region` IN ({', '.join(lits)})"
