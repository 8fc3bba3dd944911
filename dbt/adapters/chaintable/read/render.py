"""Reads and writes of one chain table's rows as Spark SQL. No decisions here: planner.py decides."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from dbt.adapters.chaintable.base import statements
from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.base.partitions import Values
from dbt.adapters.chaintable.base.quoting import cols_sql, literal, q, spec_sql, string
from dbt.adapters.chaintable.chain.state import ReadPlan
from dbt.adapters.chaintable.cumulative import sql as cumulative_sql
from dbt.adapters.chaintable.cumulative.plan import MASK_COLUMN, mask_key
from dbt.adapters.chaintable.merge.sql import merge_parts, merge_rows_sql, merge_sql

# mapping table columns; none starts with '_': the Hive metastore's partition filter cannot parse
# such a name (Spark then fails every query that filters the partition column)
MAP_BRANCH = "ct__branch"
MAP_VERSION = "ct__version"
# a mapped day served from the cumulative delta: its C partition's stamp (cumulative.py), on the
# row of branch 'cumulative'; that day's anchor is on a row of branch 'anchor'
MAP_STAMP = "ct__stamp"
GUARD = "__chain_guard"  # the one column of a literal branch's guard (Renderer.merged)
NONE: Mapping[Values, str] = {}  # no day served from the cumulative delta


def target_col(chain_key: str) -> str:
    return f"ct__target_{chain_key}"


def source_col(chain_key: str) -> str:
    return f"ct__source_{chain_key}"


def max_first(plans: Sequence[ReadPlan]) -> str:
    """The newest value of the first chain key among `plans` (sorted by chain value, as the
    planner returns them)."""
    return plans[-1].chain[0]


class Renderer:
    """SQL for one chain table: its columns (table order), partition column types and branches."""

    def __init__(
        self,
        opts: ChainOptions,
        columns: Sequence[str],
        types: Mapping[str, str],
        snapshot: str,
        delta: str,
        cumulative: str = "",
    ):
        self.opts = opts
        self.columns = list(columns)
        self.types = {k.lower(): v for k, v in types.items()}
        self.snapshot = snapshot
        self.delta = delta
        self.cumulative = cumulative  # the cumulative delta table (cumulative.py)

    @property
    def data_columns(self) -> list[str]:
        parts = {c.lower() for c in self.opts.partition_by}
        return [c for c in self.columns if c.lower() not in parts]

    def type_of(self, column: str) -> str:
        return self.types.get(column.lower(), "string")

    def lit(self, column: str, value: str) -> str:
        return literal(value, self.type_of(column))

    def predicate(self, columns: Sequence[str], values: Sequence[str]) -> str:
        return (
            "("
            + " AND ".join(
                f"{q(c)} = {self.lit(c, v)}" for c, v in zip(columns, values, strict=False)
            )
            + ")"
        )

    def spec(self, values: Values) -> str:
        """A static partition spec of this table (spec_sql)."""
        return spec_sql(self.opts.partition_by, values)

    def partitions_predicate(self, parts: Iterable[Values]) -> str:
        """Exactly `parts`. With at most one group key and one chain key the partitions are
        grouped into rectangles (groups S x chain values C with the same S), each rendered as
        `g IN (S) AND c IN (C)`: a merged branch over 10 groups and 6 deltas is 1 term instead
        of 60, which keeps the view's text below the metastore's limit (Derby stores at most
        32,700 characters) and its analysis short. Pruning is the same (IN on partition columns)."""
        parts = sorted({tuple(p) for p in parts})
        if not parts:
            return "false"
        groups, chains = self.opts.group_keys, self.opts.chain_keys
        if len(groups) > 1 or len(chains) != 1:
            return " OR ".join(self.predicate(self.opts.partition_by, p) for p in parts)
        n = len(groups)
        by_chain: dict = {}
        for p in parts:
            by_chain.setdefault(p[n:], []).append(p[:n])
        by_groups: dict = {}
        for chain, gs in by_chain.items():
            by_groups.setdefault(tuple(gs), []).append(chain)
        terms = []
        for gs, cs in by_groups.items():
            conds = [self._in(groups[0], [g[0] for g in gs])] if n else []
            conds.append(self._in(chains[0], [c[0] for c in cs]))
            terms.append("(" + " AND ".join(conds) + ")")
        return " OR ".join(terms)

    def _in(self, column: str, values: Sequence[str]) -> str:
        if len(values) == 1:
            return f"{q(column)} = {self.lit(column, values[0])}"
        return f"{q(column)} IN ({', '.join(self.lit(column, v) for v in values)})"

    def select_all(self, table: str) -> str:
        """Every row of `table`, this table's columns in table order."""
        return f"SELECT {cols_sql(self.columns)} FROM {table}"

    def select(self, table: str, parts: Iterable[Values]) -> str:
        return (
            f"SELECT {cols_sql(self.columns)} FROM {table} WHERE {self.partitions_predicate(parts)}"
        )

    def relabel(self, chain: Values, columns: Sequence[str] | None = None) -> str:
        """Projection of `columns` (default: all, table order) that carries the target
        partition's chain values (rule 5)."""
        values = dict(zip(self.opts.chain_keys, chain, strict=False))
        return ", ".join(
            f"{self.lit(c, values[c])} AS {q(c)}" if c in values else q(c)
            for c in (self.columns if columns is None else columns)
        )

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
            parts += cumulative_sql.read(self, served, serving)
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

    def view(
        self,
        layout: tuple[Sequence[tuple[Values, Sequence[ReadPlan]]], Sequence[ReadPlan]],
        mapping: tuple[str, str] | None = None,
        serving: Mapping[Values, str] = NONE,
        runs: Sequence[tuple[str, str]] = (),
        stored_in_runs: bool = True,
        hidden: Sequence[Values] = (),
    ) -> str:
        """Every partition of snapshot ∪ delta at its full state, laid out as the planner said
        (`ChainState.view_layout`: literal branches, mapped reads). Snapshot partitions are one
        branch however many there are; each literal chain value is a branch projecting its
        values as literals, so `WHERE dt = 'X'` prunes all other branches at planning time. The
        mapped reads go through one branch joined to `mapping` (mapping table, version) that
        `map_insert` wrote, so the view's text does not grow with history (the embedded Derby
        metastore keeps at most 32,700 characters of it).
        The snapshot branch excludes the partitions the view merges: a snapshot published for
        one of them (compaction) is not read twice before the view is refreshed.
        `runs` (ChainState.mapped_runs): ranges of the first chain key that hold every mapped
        partition; by default one, from the oldest mapped partition to the newest.
        `stored_in_runs` (ChainState.stored_in): whether a snapshot partition lies in them; when
        none does, the snapshot branch leaves the runs out altogether and the branch that
        reads stored partitions inside them (an anti join against the mapping) is not written:
        a snapshot published later inside them (a compaction's) is read once the view is
        refreshed, as every new partition is. Each branch costs planning time on every read,
        a stored day's too (benchmark, 10M rows: the compacted day's read planned in 0.141 s
        with it and the mapped merge-on-read below, 0.089 s without; the snapshot table alone
        0.033 s).
        `hidden`: snapshot partitions still in the table that the view must not read (about to
        be dropped: expired or dropped by hand). A query planned after this view reads none of
        their files, so their deletion after the reader grace fails no reader."""
        literal, mapped = layout
        # a hidden partition may also be literal (a dropped snapshot day now read by merge):
        # named once
        own = list(
            dict.fromkeys(
                [p.group + chain for chain, plans in literal for p in plans] + list(hidden)
            )
        )
        not_own = f"NOT ({self.in_partitions(own)})" if own else ""

        def snapshot(*conds: str) -> str:
            conds = tuple(c for c in conds if c)
            return f"SELECT {cols_sql(self.columns)} FROM {self.snapshot}" + (
                " WHERE " + " AND ".join(conds) if conds else ""
            )

        if not mapped:
            branches = [snapshot(not_own)]
        else:
            assert mapping is not None
            # every mapped target is in one of the runs: a query of a partition outside them
            # (a later one, or a snapshot between mapped days) prunes the mapped branch and the
            # anti join at planning time (`dt = X AND dt >= L AND dt <= H` folds to false), so
            # it reads the snapshot as it is
            upto = self.in_runs(runs or [(mapped[0].chain[0], max_first(mapped))])
            branches = [snapshot(f"NOT {upto}", not_own)]
            if stored_in_runs:
                keys = list(self.opts.group_keys) + [target_col(k) for k in self.opts.chain_keys]
                on = " AND ".join(
                    [f"__s.{q(c)} = __x.{q(c)}" for c in self.opts.group_keys]
                    + [f"__s.{q(k)} = __x.{q(target_col(k))}" for k in self.opts.chain_keys]
                )
                branches.append(
                    f"SELECT {cols_sql(self.columns, '__s')} FROM ({snapshot(upto, not_own)}) "
                    f"__s LEFT ANTI JOIN (SELECT DISTINCT {cols_sql(keys)} FROM "
                    f"{self._map_version(*mapping)}) __x ON {on}"
                )
        branches += [
            self.merged(chain, plans, guard=True, serving=serving) for chain, plans in literal
        ]
        if mapped and mapping is not None:
            served = any(p.group + p.chain in serving for p in mapped)
            merged = any(p.group + p.chain not in serving for p in mapped)
            mapped_sql = self.mapped_read(*mapping, served=served, merged=merged)
            branches.append(f"SELECT * FROM ({mapped_sql}) __v WHERE {upto}")
        return "\nUNION ALL\n".join(branches)

    def in_runs(self, runs: Sequence[tuple[str, str]]) -> str:
        """The first chain key in one of `runs` (low, high), false for NULL."""
        first = self.opts.chain_keys[0]
        x = q(first)
        conds = [
            f"{x} = {self.lit(first, low)}"
            if low == high
            else f"{x} >= {self.lit(first, low)} AND {x} <= {self.lit(first, high)}"
            for low, high in runs
        ]
        either = conds[0] if len(conds) == 1 else " OR ".join(f"({c})" for c in conds)
        return f"coalesce({either}, false)"

    # ---- the mapping table of older delta-only partitions --------------------------------------
    def map_columns(self) -> list[tuple[str, str]]:
        """Group keys, the target chain values, the source chain values and the source branch;
        one row per (target partition, partition its merged state is read from)."""
        chain = self.opts.chain_keys
        return (
            [(g, self.type_of(g)) for g in self.opts.group_keys]
            + [(target_col(k), self.type_of(k)) for k in chain]
            + [(source_col(k), self.type_of(k)) for k in chain]
            + [(MAP_BRANCH, "string"), (MAP_STAMP, "string")]
        )

    def map_create(self, table: str) -> str:
        cols = ", ".join(f"{q(c)} {t}" for c, t in self.map_columns())
        return (
            f"CREATE TABLE IF NOT EXISTS {table} ({cols}, {q(MAP_VERSION)} STRING) "
            f"USING parquet PARTITIONED BY ({q(MAP_VERSION)})"
        )

    def map_insert(
        self,
        table: str,
        version: str,
        plans: Sequence[ReadPlan],
        serving: Mapping[Values, str] = NONE,
    ) -> str:
        """One version of the mapping: the planner's anchor and deltas of each read in `plans`
        (the anchor and the C partition of the days `serving` names)."""
        names = cols_sql([c for c, _ in self.map_columns()])
        return (
            f"INSERT INTO {table} PARTITION ({spec_sql([MAP_VERSION], [version])}) ({names}) "
            "VALUES " + ", ".join(self.map_rows(plans, serving))
        )

    def map_add_stamp(self, table: str) -> str:
        """A mapping table created before it had the stamp column gets it."""
        return statements.add_columns(table, [(MAP_STAMP, "string")])

    def map_rows(
        self, plans: Sequence[ReadPlan], serving: Mapping[Values, str] = NONE
    ) -> list[str]:
        """The mapping's rows for `plans`, as SQL value tuples: per day its anchor (branch
        'snapshot') and deltas ('delta'), or, for a day `serving` names, its anchor ('anchor')
        and its C partition ('cumulative', with the stamp)."""
        group, chain = self.opts.group_keys, self.opts.chain_keys
        rows = []
        for p in plans:
            stamp = serving.get(p.group + p.chain)
            anchor = "snapshot" if stamp is None else "anchor"
            sources: list[tuple[str, Values, str | None]] = (
                [(anchor, p.anchor, None)] if p.anchor is not None else []
            )
            if stamp is None:
                sources += [("delta", d, None) for d in p.deltas]
            else:
                sources.append(("cumulative", p.chain, stamp))
            for branch, src, mark in sources:
                vals = (
                    [self.lit(g, v) for g, v in zip(group, p.group, strict=False)]
                    + [self.lit(k, v) for k, v in zip(chain, p.chain, strict=False)]
                    + [self.lit(k, v) for k, v in zip(chain, src, strict=False)]
                    + [string(branch), "NULL" if mark is None else string(mark)]
                )
                rows.append("(" + ", ".join(vals) + ")")
        return rows

    def _map_version(self, table: str, version: str, branch: str | None = None) -> str:
        cond = f"{q(MAP_VERSION)} = {literal(version)}"
        if branch:
            cond += f" AND {q(MAP_BRANCH)} = {literal(branch)}"
        return f"(SELECT * FROM {table} WHERE {cond})"

    def mapped_read(
        self, table: str, version: str, served: bool = False, merged: bool = True
    ) -> str:
        """Merged full state of every partition in the mapping: the anchor and delta rows are
        joined to the targets they feed and merged per primary key and target (the target chain
        columns join the primary key; rows keep their own chain values, which order the merge),
        then carry the target's values (rule 5). `WHERE dt = 'X'` on the view reaches the
        mapping table, and dynamic partition pruning limits both scans to X's sources.
        `served`: some targets are read from the cumulative delta instead (their anchor's rows
        whose key their C partition does not hold, and its live rows; cumulative_sql.read_parts
        with the target columns joined to the key). `merged`: some targets are merged on read
        (without, the merge's scans and window are left out of the text: no mapping row would
        feed them, and they cost planning time on every read of the view)."""
        chain = self.opts.chain_keys
        targets = [target_col(k) for k in chain]

        def side(branch_table: str, branch: str, stamped: bool = False, extra: str = "") -> str:
            on = [f"__b.{q(g)} = __m.{q(g)}" for g in self.opts.group_keys]
            on += [f"__b.{q(k)} = __m.{q(source_col(k))}" for k in chain]
            if stamped:
                on.append(f"__b.{q(MAP_STAMP)} = __m.{q(MAP_STAMP)}")
            return (
                f"SELECT {cols_sql(self.columns, '__b')}, {cols_sql(targets, '__m')}{extra} "
                f"FROM {branch_table} __b JOIN {self._map_version(table, version, branch)} "
                f"__m ON {' AND '.join(on)}"
            )

        opts = replace(self.opts, primary_key=tuple(self.opts.primary_key) + tuple(targets))
        types = {**self.types, **{t: self.type_of(k) for t, k in zip(targets, chain, strict=False)}}
        lowered = {k.lower(): target_col(k) for k in chain}
        proj = ", ".join(
            f"{q(lowered[c.lower()])} AS {q(c)}" if c.lower() in lowered else q(c)
            for c in self.columns
        )
        parts = []
        if merged or not served:
            parts.append(
                merge_sql(
                    opts,
                    self.columns + targets,
                    side(self.snapshot, "snapshot"),
                    side(self.delta, "delta"),
                    types=types,
                    broadcast=True,
                )
            )
        if served:
            mask = mask_key(self.opts, self.types)
            c_side = side(self.cumulative, "cumulative", stamped=True)
            if mask:  # the C rows with their mask column
                keyed = side(self.cumulative, "cumulative", True, f", __b.{q(MASK_COLUMN)}")
            else:
                keyed = c_side
            keys = cumulative_sql.keys_sql(opts.merge_keys, f"({keyed}) __c", mask)
            parts += cumulative_sql.read_parts(
                opts, self.columns + targets, side(self.snapshot, "anchor"), c_side, keys, mask
            )
        return "\nUNION ALL\n".join(f"SELECT {proj} FROM ({part}) __g" for part in parts)

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

    def empty_partition(self, table: str, values: Values) -> str:
        """A fully static overwrite with no rows: creates or empties exactly one partition."""
        nulls = ", ".join(f"CAST(NULL AS {self.type_of(c)}) AS {q(c)}" for c in self.data_columns)
        return f"INSERT OVERWRITE TABLE {table} PARTITION ({self.spec(values)}) SELECT {nulls} WHERE 1 = 0"

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
