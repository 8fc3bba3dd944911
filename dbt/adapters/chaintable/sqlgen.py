"""Render planned reads and writes as Spark SQL. No decisions here: planner.py decides."""
from __future__ import annotations

from typing import Iterable, List, Mapping, Optional, Sequence, Tuple

from dbt.adapters.chaintable.merge import cols_sql, merge_rows_sql, merge_sql, q
from dbt.adapters.chaintable.options import ChainOptions
from dbt.adapters.chaintable.planner import ChainState, ReadPlan, Values

_STRINGS = ("string",)


def literal(value: str, spark_type: str = "string") -> str:
    """A typed SQL literal for a partition value (constant-folded, so pruning still works)."""
    text = "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    t = spark_type.lower()
    if t in _STRINGS or t.startswith("varchar") or t.startswith("char"):
        return text
    return f"CAST({text} AS {spark_type})"


class Renderer:
    """SQL for one chain table: its columns (table order), partition column types and branches."""

    def __init__(self, opts: ChainOptions, columns: Sequence[str], types: Mapping[str, str],
                 snapshot: str, delta: str):
        self.opts = opts
        self.columns = list(columns)
        self.types = {k.lower(): v for k, v in types.items()}
        self.snapshot = snapshot
        self.delta = delta

    @property
    def data_columns(self) -> List[str]:
        parts = {c.lower() for c in self.opts.partition_by}
        return [c for c in self.columns if c.lower() not in parts]

    def type_of(self, column: str) -> str:
        return self.types.get(column.lower(), "string")

    def lit(self, column: str, value: str) -> str:
        return literal(value, self.type_of(column))

    def predicate(self, columns: Sequence[str], values: Sequence[str]) -> str:
        return "(" + " AND ".join(f"{q(c)} = {self.lit(c, v)}"
                                  for c, v in zip(columns, values)) + ")"

    def partitions_predicate(self, parts: Iterable[Values]) -> str:
        preds = [self.predicate(self.opts.partition_by, p) for p in parts]
        return " OR ".join(preds) if preds else "false"

    def select(self, table: str, parts: Iterable[Values]) -> str:
        return f"SELECT {cols_sql(self.columns)} FROM {table} WHERE {self.partitions_predicate(parts)}"

    def relabel(self, chain: Values) -> str:
        """Projection that carries the target partition's chain values (rule 5)."""
        values = dict(zip(self.opts.chain_keys, chain))
        return ", ".join(f"{self.lit(c, values[c])} AS {q(c)}" if c in values else q(c)
                         for c in self.columns)

    # ---- reads ---------------------------------------------------------------------------
    def merged(self, chain: Values, plans: Sequence[ReadPlan]) -> str:
        """Merged full state of delta-only partition `chain` for the groups of `plans`."""
        anchors = [p.group + p.anchor for p in plans if p.anchor is not None]
        deltas = [p.group + d for p in plans for d in p.deltas]
        anchor_sql = self.select(self.snapshot, anchors) if anchors else None
        body = merge_sql(self.opts, self.columns, anchor_sql, self.select(self.delta, deltas),
                         types=self.types)
        return f"SELECT {self.relabel(chain)} FROM ({body}) __m"

    def view(self, state: ChainState) -> str:
        """Every partition of snapshot ∪ delta at its full state. Snapshot partitions are one
        branch however many there are; each delta-only chain value is a branch projecting its
        values as literals, so `WHERE dt = 'X'` prunes all other branches at planning time.
        The snapshot branch excludes the partitions the view merges: a snapshot published for
        one of them (compaction) is not read twice before the view is refreshed."""
        merged = state.view_branches()
        own = [p.group + chain for chain, plans in merged for p in plans]
        branches = [f"SELECT {cols_sql(self.columns)} FROM {self.snapshot}"
                    + (f" WHERE NOT ({self.in_partitions(own)})" if own else "")]
        branches += [self.merged(chain, plans) for chain, plans in merged]
        return "\nUNION ALL\n".join(branches)

    def in_partitions(self, parts: Sequence[Values]) -> str:
        """A flat IN list (no deep OR tree, however many partitions)."""
        cols = list(self.opts.partition_by)
        if len(cols) == 1:
            return f"{q(cols[0])} IN ({', '.join(self.lit(cols[0], p[0]) for p in parts)})"
        tuples = ", ".join("(" + ", ".join(self.lit(c, v) for c, v in zip(cols, p)) + ")"
                           for p in parts)
        return f"({cols_sql(cols)}) IN ({tuples})"

    def partition_read(self, plans: Sequence[ReadPlan]) -> str:
        """Full state of one chain partition for the groups in `plans` (chain_read)."""
        if not plans:
            return f"SELECT {cols_sql(self.columns)} FROM {self.snapshot} WHERE false"
        chain = plans[0].chain
        snap = [p.group + p.chain for p in plans if p.from_snapshot]
        merged = [p for p in plans if not p.from_snapshot]
        parts = [self.select(self.snapshot, snap)] if snap else []
        parts += [self.merged(chain, merged)] if merged else []
        return "\nUNION ALL\n".join(parts)

    # ---- writes --------------------------------------------------------------------------
    def insert_overwrite(self, table: str, source_sql: str) -> str:
        """Dynamic overwrite (the tables carry partitionOverwriteMode=dynamic as a table option,
        so no session setting is relied on): exactly the partitions in the output are replaced."""
        parts = ", ".join(q(c) for c in self.opts.partition_by)
        return (f"INSERT OVERWRITE TABLE {table} PARTITION ({parts})\n"
                f"SELECT {cols_sql(self.columns)} FROM ({source_sql}) __src")

    def empty_partition(self, table: str, values: Values) -> str:
        """A fully static overwrite with no rows: creates or empties exactly one partition."""
        spec = ", ".join(f"{q(c)} = {self.lit(c, v)}" for c, v in zip(self.opts.partition_by, values))
        nulls = ", ".join(f"CAST(NULL AS {self.type_of(c)}) AS {q(c)}" for c in self.data_columns)
        return f"INSERT OVERWRITE TABLE {table} PARTITION ({spec}) SELECT {nulls} WHERE 1 = 0"

    def drop_partitions(self, table: str, parts: Sequence[Values]) -> Optional[str]:
        if not parts:
            return None
        specs = ", ".join(
            "PARTITION (" + ", ".join(f"{q(c)} = {self.lit(c, v)}"
                                      for c, v in zip(self.opts.partition_by, p)) + ")"
            for p in parts)
        return f"ALTER TABLE {table} DROP IF EXISTS {specs}"

    def batch_merge(self, source_sql: str) -> str:
        """A snapshot written straight from a model is itself merged (deletes applied)."""
        return merge_rows_sql(self.opts, self.columns, source_sql, types=self.types,
                              by_partition=True)


def tblproperties_sql(props: Mapping[str, str]) -> str:
    def s(x: str) -> str:
        return "'" + x.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return ", ".join(f"{s(k)} = {s(v)}" for k, v in sorted(props.items()))


def create_table_sql(relation: str, column_types: Sequence[Tuple[str, str]],
                     opts: ChainOptions, props: Mapping[str, str], file_format: str = "parquet",
                     location: Optional[str] = None, clustered_by: Sequence[str] = (),
                     buckets: Optional[int] = None, as_select: Optional[str] = None) -> str:
    """CREATE TABLE with columns, or CREATE TABLE ... AS `as_select` (columns from the query)."""
    cols = ", ".join(f"{q(c)} {t}" for c, t in column_types)
    parts = ", ".join(q(c) for c in opts.partition_by)
    sql = [f"CREATE TABLE {relation}" + (f" ({cols})" if column_types else ""), f"USING {file_format}",
           "OPTIONS ('partitionOverwriteMode' = 'dynamic')", f"PARTITIONED BY ({parts})"]
    if clustered_by and buckets:
        sql.append(f"CLUSTERED BY ({', '.join(q(c) for c in clustered_by)}) INTO {int(buckets)} BUCKETS")
    if location:
        sql.append(f"LOCATION '{location}'")
    sql.append(f"TBLPROPERTIES ({tblproperties_sql(props)})")
    if as_select:
        sql.append(f"AS\n{as_select}")
    return "\n".join(sql)

