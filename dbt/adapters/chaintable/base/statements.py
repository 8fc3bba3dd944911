"""Catalog and DDL statements: listings, descriptions, table and view creation, partition
switches and drops, table properties. Relations come in as rendered names (`schema.table`);
every value goes through quoting.py."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dbt.adapters.chaintable.base.quoting import (
    properties_sql,
    property_keys_sql,
    q,
    spec_sql,
    string,
)

Partition = tuple[Sequence[str], Sequence[str]]  # (columns, values)


# ---- catalog reads --------------------------------------------------------------------------
def show_conf(key: str) -> str:
    """The session's value of a Spark SQL setting, as one (key, value) row."""
    return f"SET {key}"


def show_tables(schema: str, pattern: str) -> str:
    """Tables and views whose name matches `pattern` (`*` any text, `|` alternatives)."""
    return f"SHOW TABLES IN {schema} LIKE {string(pattern)}"


def describe_table(relation: str) -> str:
    return f"DESCRIBE TABLE {relation}"


def describe_formatted(relation: str, partition: Partition | None = None) -> str:
    """The detail rows (Location, Provider, Num Buckets, ...) of a table or one partition."""
    where = f" PARTITION ({spec_sql(*partition)})" if partition else ""
    return f"DESCRIBE FORMATTED {relation}{where}"


def describe_query(sql: str) -> str:
    return f"DESCRIBE QUERY {sql}"


def show_properties(relation: str) -> str:
    return f"SHOW TBLPROPERTIES {relation}"


def show_partitions(relation: str) -> str:
    return f"SHOW PARTITIONS {relation}"


# ---- tables and views -----------------------------------------------------------------------
def create_table(
    relation: str,
    column_types: Sequence[tuple[str, str]],
    partition_by: Sequence[str],
    props: Mapping[str, str],
    file_format: str = "parquet",
    location: str | None = None,
    clustered_by: Sequence[str] = (),
    buckets: int | None = None,
    as_select: str | None = None,
) -> str:
    """CREATE TABLE with columns, or CREATE TABLE ... AS `as_select` (columns from the query).
    Dynamic partition overwrite is a table option, so no statement relies on session state."""
    cols = ", ".join(f"{q(c)} {t}" for c, t in column_types)
    parts = ", ".join(q(c) for c in partition_by)
    sql = [
        f"CREATE TABLE {relation}" + (f" ({cols})" if column_types else ""),
        f"USING {file_format}",
        "OPTIONS ('partitionOverwriteMode' = 'dynamic')",
    ]
    if partition_by:
        sql.append(f"PARTITIONED BY ({parts})")
    if clustered_by and buckets:
        sql.append(
            f"CLUSTERED BY ({', '.join(q(c) for c in clustered_by)}) INTO {int(buckets)} BUCKETS"
        )
    if location:
        sql.append(f"LOCATION {string(location)}")
    if props:
        sql.append(f"TBLPROPERTIES ({properties_sql(props)})")
    if as_select:
        sql.append(f"AS\n{as_select}")
    return "\n".join(sql)


def write_directory(location: str, file_format: str, sql: str) -> str:
    """A query's rows as files of `file_format` in `location`, outside every table."""
    return f"INSERT OVERWRITE DIRECTORY {string(location)} USING {file_format}\n{sql}"


def files(location: str, file_format: str) -> str:
    """The files of `location` as a relation (Spark's `format`.`path`)."""
    return f"{file_format}.{q(location)}"


def create_scratch_as(relation: str, sql: str) -> str:
    """A plain parquet table holding a query's rows (a first run's stage)."""
    return f"CREATE TABLE {relation} USING parquet AS\n{sql}"


def create_gc_table(relation: str) -> str:
    """The managed scratch table whose dropped partitions delete directories (publish/recovery.py)."""
    return (
        f"CREATE TABLE IF NOT EXISTS {relation} (unused INT, d STRING) USING parquet "
        "PARTITIONED BY (d)"
    )


def add_columns(relation: str, column_types: Sequence[tuple[str, str]]) -> str:
    return (
        f"ALTER TABLE {relation} ADD COLUMNS ({', '.join(f'{q(c)} {t}' for c, t in column_types)})"
    )


def set_properties(relation: str, props: Mapping[str, str]) -> str:
    return f"ALTER TABLE {relation} SET TBLPROPERTIES ({properties_sql(props)})"


def unset_properties(relation: str, keys: Sequence[str]) -> str:
    return f"ALTER TABLE {relation} UNSET TBLPROPERTIES IF EXISTS ({property_keys_sql(keys)})"


def comment_column(relation: str, column: str, comment: str) -> str:
    return f"ALTER TABLE {relation} ALTER COLUMN {q(column)} COMMENT {string(comment)}"


def set_view_properties(relation: str, props: Mapping[str, str]) -> str:
    return f"ALTER VIEW {relation} SET TBLPROPERTIES ({properties_sql(props)})"


def unset_view_properties(relation: str, keys: Sequence[str]) -> str:
    return f"ALTER VIEW {relation} UNSET TBLPROPERTIES IF EXISTS ({property_keys_sql(keys)})"


def drop_table(relation: str) -> str:
    return f"DROP TABLE IF EXISTS {relation}"


def rename_view(relation: str, to: str) -> str:
    """One metastore operation: of two writers renaming the same view, one finds it gone."""
    return f"ALTER VIEW {relation} RENAME TO {to}"


def drop_view(relation: str) -> str:
    return f"DROP VIEW IF EXISTS {relation}"


def replace_view(relation: str, sql: str, clause: str = "") -> str:
    """`clause`: what stands between the name and AS (e.g. ` WITH SCHEMA EVOLUTION`)."""
    return f"CREATE OR REPLACE VIEW {relation}{clause} AS\n{sql}"


def alter_view(relation: str, sql: str) -> str:
    return f"ALTER VIEW {relation} AS\n{sql}"


def create_lock_view(relation: str, props: Mapping[str, str]) -> str:
    """A view that exists while a writer holds the chain (the metastore refuses a second one)."""
    return f"CREATE VIEW {relation} TBLPROPERTIES ({properties_sql(props)}) AS SELECT 1 AS locked"


# ---- partitions -----------------------------------------------------------------------------
def set_partition_location(
    relation: str, columns: Sequence[str], values: Sequence[str], location: str
) -> str:
    """Switch one partition to another directory: one metastore operation, atomic for readers."""
    return (
        f"ALTER TABLE {relation} PARTITION ({spec_sql(columns, values)}) "
        f"SET LOCATION {string(location)}"
    )


def add_partitions(
    relation: str, columns: Sequence[str], parts: Sequence[tuple[Sequence[str], str]]
) -> str | None:
    """Add partitions `(values, location)` in one statement; None when there are none."""
    if not parts:
        return None
    return f"ALTER TABLE {relation} ADD " + " ".join(
        f"PARTITION ({spec_sql(columns, values)}) LOCATION {string(location)}"
        for values, location in parts
    )


def drop_partitions(
    relation: str, columns: Sequence[str], parts: Sequence[Sequence[str]]
) -> str | None:
    """Drop partitions (given by their values) in one statement; None when there are none."""
    if not parts:
        return None
    specs = ", ".join(f"PARTITION ({spec_sql(columns, values)})" for values in parts)
    return f"ALTER TABLE {relation} DROP IF EXISTS {specs}"


def add_empty_partitions(
    relation: str, columns: Sequence[str], parts: Sequence[Sequence[str]]
) -> str | None:
    """Add empty partitions (given by their values) at their default paths in one statement:
    the metastore adds them in one call and makes their directories, where a static overwrite
    without rows costs a Spark job a partition (~0.25 s: 1,000 groups' day with few changes
    took minutes, tests/functional/test_many_groups.py). None when there are none."""
    if not parts:
        return None
    specs = " ".join(f"PARTITION ({spec_sql(columns, values)})" for values in parts)
    return f"ALTER TABLE {relation} ADD IF NOT EXISTS {specs}"


def count_rows(relation: str, where: str) -> str:
    return f"SELECT count(*) FROM {relation} WHERE {where}"


def select_all(relation: str) -> str:
    return f"SELECT * FROM {relation}"
