"""Reads and writes of one chain table's rows as Spark SQL. No decisions here: chain/state.py
decides."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dbt.adapters.chaintable.base import statements
from dbt.adapters.chaintable.base.partitions import Values
from dbt.adapters.chaintable.base.quoting import cols_sql, q
from dbt.adapters.chaintable.chain.sql import ChainSql
from dbt.adapters.chaintable.chain.state import ReadPlan
from dbt.adapters.chaintable.cumulative import read as cumulative_read
from dbt.adapters.chaintable.merge.sql import merge_parts, merge_rows_sql

GUARD = "__chain_guard"  # the one column of a literal branch's guard (Renderer.merged)
NONE: Mapping[Values, str] = {}  # no day served from the cumulative delta


class Renderer(ChainSql):
    """Reads and writes of the chain's rows: merged partitions, the batch merge of compaction,
    partition overwrites."""

    # ---- reads ---------------------------------------------------------------------------
    def merged(
        self,
        chain: Values,
        plans: Sequence[ReadPlan],
        guard: bool = False,
        serving: Mapping[Values, str] = NONE,
    ) -> str:
        """Merged full state of delta-only partition `chain` for the groups of `plans`: from
        the anchor and the cumulative delta for the groups `serving` names (group + chain ->
        stamp), merged on read from the anchor and the deltas for the others.

        Each SELECT of the merge's UNION ALL gets its own relabelling projection: a projection
        above the union stays a separate step over every row of a day once the view's other
        branches are pruned (benchmark, 10M rows, a served day through the view: 4.0 s with
        one projection above the union, 3.3 s with one per part).

        `guard` (the view's literal branches): each part hangs below an outer join with an
        empty one-row side, so that a query of another partition drops the whole branch before
        Spark prunes its scans' partitions. The query's `dt = 'X'` becomes a constant
        (`'<chain>' = 'X'`) at the relabelling projection; pushed down as it is, Spark moved it
        into the left side of each anti and semi join only, so the right sides (the deltas'
        keys) stayed until partition pruning, which asked the metastore for each of their
        partitions (benchmark: 36 metastore calls and 23 partitions fetched to plan a
        compacted day's read through a view with 6 literal branches, 12 and 2 with the guard).
        A constant has no column, so Spark counts it as the outer join's null-supplying (left)
        side, where it cannot go: it stays above the join, folds to false and removes the
        branch. The join condition `1 = 0` empties the one-row side once constants are folded,
        after that filter has been placed, and the empty side removes the join itself before
        the physical plan: a query of this partition runs the merge alone, as without it (a
        literal `false` would be removed before the filter is placed)."""
        served = [p for p in plans if p.group + p.chain in serving]
        rest = [p for p in plans if p.group + p.chain not in serving]
        parts: list[str] = []
        if served:
            parts += cumulative_read.read(self, served, serving)
        if rest:
            anchors = [p.group + p.anchor for p in rest if p.anchor is not None]
            deltas = [p.group + d for p in rest for d in p.deltas]
            anchor_sql = self.select(self.snapshot, anchors) if anchors else None
            parts += merge_parts(
                self.opts,
                self.columns,
                anchor_sql,
                self.select(self.delta, deltas),
                types=self.types,
            )
        source = (
            f"(SELECT 1 AS {GUARD}) __chain_one RIGHT OUTER JOIN ({{}}) __m ON 1 = 0"
            if guard
            else "({}) __m"
        )
        return "\nUNION ALL\n".join(
            f"SELECT {self.relabel(chain)} FROM {source.format(part)}" for part in parts
        )

    def in_partitions(self, parts: Sequence[Values]) -> str:
        """A flat IN list (no deep OR tree, however many partitions)."""
        cols = list(self.opts.partition_by)
        if len(cols) == 1:
            return f"{q(cols[0])} IN ({', '.join(self.lit(cols[0], p[0]) for p in parts)})"
        tuples = ", ".join(
            "(" + ", ".join(self.lit(c, v) for c, v in zip(cols, p, strict=False)) + ")"
            for p in parts
        )
        return f"({cols_sql(cols)}) IN ({tuples})"

    def partition_read(
        self, plans: Sequence[ReadPlan], serving: Mapping[Values, str] = NONE
    ) -> str:
        """Full state of one chain partition for the groups in `plans` (chain_read)."""
        if not plans:
            return f"SELECT {cols_sql(self.columns)} FROM {self.snapshot} WHERE false"
        chain = plans[0].chain
        snap = [p.group + p.chain for p in plans if p.from_snapshot]
        merged = [p for p in plans if not p.from_snapshot]
        parts = [self.select(self.snapshot, snap)] if snap else []
        parts += [self.merged(chain, merged, serving=serving)] if merged else []
        return "\nUNION ALL\n".join(parts)

    # ---- writes --------------------------------------------------------------------------
    def insert_overwrite(
        self, table: str, source_sql: str, only: Values | None = None, by_key: bool = False
    ) -> str:
        """Dynamic overwrite (the tables carry partitionOverwriteMode=dynamic as a table option,
        so no session setting is relied on): exactly the partitions in the output are replaced.
        `only`: every row of `source_sql` belongs to this one partition (the caller built it so),
        written with a static spec: Spark then neither sorts the rows by partition nor stages
        them for a dynamic overwrite, and the partition exists afterwards even when the source
        is empty. `by_key`: the rows laid out by `by_key`."""
        if by_key:
            source_sql = self.by_key(source_sql, partitioned=only is None)
        if only is not None:
            return (
                f"INSERT OVERWRITE TABLE {table} PARTITION ({self.spec(only)})\n"
                f"SELECT {cols_sql(self.data_columns)} FROM ({source_sql}) __src"
            )
        parts = ", ".join(q(c) for c in self.opts.partition_by)
        return (
            f"INSERT OVERWRITE TABLE {table} PARTITION ({parts})\n"
            f"SELECT {cols_sql(self.columns)} FROM ({source_sql}) __src"
        )

    def by_key(self, source_sql: str, partitioned: bool) -> str:
        """`source_sql`'s rows laid out as the classic job's merge lays out a day: shuffled by
        the merge keys, so that each file holds an even share (about one file per core once
        Spark coalesces the shuffle), and sorted by them within each file (row groups a filter
        on the key skips; the partition columns first when the write is dynamic, the order
        Spark's writer needs). Without it a compacted snapshot keeps its anchor's file splits
        plus the small files of the changed rows, which a reader packs into one task, so the
        layout, and a read on few cores, varies from one compaction to the next
        (benchmarks/README.md, "Compaction output layout"). No layout when the primary key is
        the partition columns alone (a partition holds one row)."""
        parts = {c.lower() for c in self.opts.partition_by}
        keys = [k for k in self.opts.merge_keys if k.lower() not in parts]
        if not keys:
            return source_sql
        order = [*self.opts.partition_by, *keys] if partitioned else keys
        return (
            f"SELECT * FROM ({source_sql}) __k DISTRIBUTE BY {cols_sql(keys)} "
            f"SORT BY {cols_sql(order)}"
        )

    def add_empty_partitions(self, table: str, parts: Sequence[Values]) -> str | None:
        """Partitions new to `table` with no rows, in one statement (statements.add_empty_partitions)."""
        return statements.add_empty_partitions(table, self.opts.partition_by, parts)

    def drop_partitions(self, table: str, parts: Sequence[Values]) -> str | None:
        return statements.drop_partitions(table, self.opts.partition_by, parts)

    def per_group(self, source: str) -> str:
        """Rows per group of `source` (a FROM clause): the group values, then the count."""
        groups = cols_sql(self.opts.group_keys)
        return f"SELECT {groups + ', ' if groups else ''}count(*) FROM {source}" + (
            f" GROUP BY {groups}" if groups else ""
        )

    def count_by_group(self, table: str, parts: Sequence[Values]) -> str:
        """Rows per group in `parts` of `table`."""
        return self.per_group(f"{table} WHERE {self.partitions_predicate(parts)}")

    def keys_by_group(self, table: str, parts: Sequence[Values]) -> str:
        """Distinct merge keys per group in `parts` of `table`."""
        keys = cols_sql(self.opts.merge_keys) or "1"
        return self.per_group(
            f"(SELECT DISTINCT {keys} FROM {table} WHERE {self.partitions_predicate(parts)}) __k"
        )

    def batch_merge(self, source_sql: str) -> str:
        """A snapshot written straight from a model is itself merged (deletes applied)."""
        return merge_rows_sql(
            self.opts, self.columns, source_sql, types=self.types, by_partition=True
        )
