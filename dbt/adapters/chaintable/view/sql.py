"""SQL of the chain table's view (docs/design.md#branches-and-relations): its branches, and the
mapping table through which the view reads older delta-only days."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from dbt.adapters.chaintable.base import statements
from dbt.adapters.chaintable.base.partitions import Values
from dbt.adapters.chaintable.base.quoting import cols_sql, literal, q, spec_sql, string
from dbt.adapters.chaintable.chain.state import ReadPlan
from dbt.adapters.chaintable.cumulative import read as cumulative_read
from dbt.adapters.chaintable.cumulative.plan import MASK_COLUMN, mask_key
from dbt.adapters.chaintable.merge.sql import merge_sql
from dbt.adapters.chaintable.read.render import NONE
from dbt.adapters.chaintable.read.visible import visible_sql
from dbt.adapters.chaintable.view.compact import CompactSql

# mapping table columns; none starts with '_': the Hive metastore's partition filter cannot parse
# such a name (Spark then fails every query that filters the partition column)
MAP_BRANCH = "ct__branch"
MAP_VERSION = "ct__version"
# a mapped day served from the cumulative delta: its C partition's stamp (cumulative/plan.py), on the
# row of branch 'cumulative'; that day's anchor is on a row of branch 'anchor'
MAP_STAMP = "ct__stamp"
# the branch of the mapping's rows that name hidden snapshot partitions (ViewSql.view)
MAP_HIDDEN = "hidden"
UNION = "\nUNION ALL\n"


def target_col(chain_key: str) -> str:
    return f"ct__target_{chain_key}"


def source_col(chain_key: str) -> str:
    return f"ct__source_{chain_key}"


def max_first(plans: Sequence[ReadPlan]) -> str:
    """The newest value of the first chain key among `plans` (sorted by chain value, as the
    state plans them)."""
    return plans[-1].chain[0]


class ViewSql(CompactSql):
    """The view's text and its mapping table, over the chain's reads."""

    def view(
        self,
        layout: tuple[Sequence[tuple[Values, Sequence[ReadPlan]]], Sequence[ReadPlan]],
        mapping: tuple[str, str] | None = None,
        serving: Mapping[Values, str] = NONE,
        runs: Sequence[tuple[str, str]] = (),
        stored_in_runs: bool = True,
        hidden: Sequence[Values] = (),
        hidden_mapped: bool = False,
    ) -> str:
        """Every partition of snapshot ∪ delta at its full state, laid out as view/layout.py said
        (`layout.view_layout`: literal branches, mapped reads). Snapshot partitions are one
        branch however many there are; each literal chain value is a branch projecting its
        values as literals, so `WHERE dt = 'X'` prunes all other branches at planning time. The
        mapped reads go through one branch joined to `mapping` (mapping table, version) that
        `map_insert` wrote, so the view's text does not grow with history (the embedded Derby
        metastore keeps at most 32,700 characters of it; view/fit.py keeps it within).
        The snapshot branch excludes the partitions the view merges: a snapshot published for
        one of them (compaction) is not read twice before the view is refreshed.
        `runs` (layout.mapped_runs): ranges of the first chain key that hold every mapped
        partition; by default one, from the oldest mapped partition to the newest.
        `stored_in_runs` (layout.stored_in): whether a snapshot partition lies in them; when
        none does, the snapshot branch leaves the runs out altogether and the branch that
        reads stored partitions inside them (an anti join against the mapping) is not written:
        a snapshot published later inside them (a compaction's) is read once the view is
        refreshed, as every new partition is. Each branch costs planning time on every read,
        a stored day's too (benchmark, 10M rows: the compacted day's read planned in 0.141 s
        with it and the mapped merge-on-read below, 0.089 s without; the snapshot table alone
        0.033 s).
        `hidden`: snapshot partitions still in the table that the view must not read (about to
        be dropped: expired or dropped by hand). A query planned after this view reads none of
        their files, so their deletion after the reader grace fails no reader. `hidden_mapped`:
        the mapping holds them (`map_rows`), and the snapshot branch leaves them out by an
        anti join rather than by a list."""
        head, tail = self.view_frame(
            layout, mapping, serving, runs, stored_in_runs, hidden, hidden_mapped
        )
        body = [self.literal_branch(chain, plans, serving) for chain, plans in layout[0]]
        return visible_sql(self.opts, self.columns, UNION.join(head + body + tail))

    def literal_branch(
        self, chain: Values, plans: Sequence[ReadPlan], serving: Mapping[Values, str] = NONE
    ) -> str:
        """The view's branch of delta-only chain value `chain` (Renderer.merged, guarded)."""
        return self.merged(chain, plans, guard=True, serving=serving)

    def view_frame(
        self,
        layout: tuple[Sequence[tuple[Values, Sequence[ReadPlan]]], Sequence[ReadPlan]],
        mapping: tuple[str, str] | None = None,
        serving: Mapping[Values, str] = NONE,
        runs: Sequence[tuple[str, str]] = (),
        stored_in_runs: bool = True,
        hidden: Sequence[Values] = (),
        hidden_mapped: bool = False,
    ) -> tuple[list[str], list[str]]:
        """The view's branches before and after its literal ones (`view`)."""
        literal, mapped = layout
        # a hidden partition may also be literal (a dropped snapshot day now read by merge):
        # named once
        merged_days = [p.group + chain for chain, plans in literal for p in plans]
        own = list(dict.fromkeys(merged_days + ([] if hidden_mapped else list(hidden))))
        not_own = self.not_in(own) if own else ""
        assert mapping is not None or not (mapped or hidden_mapped)

        def snapshot(*conds: str) -> str:
            sql = self._snapshot(*conds)
            return self._unmapped(sql, mapping, MAP_HIDDEN) if mapping and hidden_mapped else sql

        if not mapped or mapping is None:
            return [snapshot(not_own)], []
        # every mapped target is in one of the runs: a query of a partition outside them
        # (a later one, or a snapshot between mapped days) prunes the mapped branch and the
        # anti join at planning time (`dt = X AND dt >= L AND dt <= H` folds to false), so
        # it reads the snapshot as it is
        upto = self.in_runs(runs or [(mapped[0].chain[0], max_first(mapped))])
        head = [snapshot(f"NOT {upto}", not_own)]
        if stored_in_runs:  # the anti join leaves out the hidden partitions too: mapped
            head.append(self._unmapped(self._snapshot(upto, not_own), mapping))
        served = any(p.group + p.chain in serving for p in mapped)
        merged = any(p.group + p.chain not in serving for p in mapped)
        mapped_sql = self.mapped_read(*mapping, served=served, merged=merged)
        return head, [f"SELECT * FROM ({mapped_sql}) __v WHERE {upto}"]

    def _snapshot(self, *conds: str) -> str:
        """The snapshot branch's rows where every condition of `conds` given holds."""
        conds = tuple(c for c in conds if c)
        return f"SELECT {cols_sql(self.columns)} FROM {self.snapshot}" + (
            " WHERE " + " AND ".join(conds) if conds else ""
        )

    def _unmapped(
        self, snapshot_sql: str, mapping: tuple[str, str], branch: str | None = None
    ) -> str:
        """The rows of `snapshot_sql` whose partition the mapping does not target (stored
        partitions inside the mapped runs: the view reads those through the mapping instead),
        or, with `branch`, no row of that branch targets (the hidden partitions)."""
        keys = list(self.opts.group_keys) + [target_col(k) for k in self.opts.chain_keys]
        on = " AND ".join(
            [f"__s.{q(c)} = __x.{q(c)}" for c in self.opts.group_keys]
            + [f"__s.{q(k)} = __x.{q(target_col(k))}" for k in self.opts.chain_keys]
        )
        return (
            f"SELECT {cols_sql(self.columns, '__s')} FROM ({snapshot_sql}) "
            f"__s LEFT ANTI JOIN (SELECT DISTINCT {cols_sql(keys)} FROM "
            f"{self._map_version(*mapping, branch)}) __x ON {on}"
        )

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
        hidden: Sequence[Values] = (),
    ) -> str:
        """One version of the mapping: the planned anchor and deltas of each read in `plans`
        (the anchor and the C partition of the days `serving` names), and the `hidden`
        partitions (`map_rows`)."""
        return self.map_insert_rows(table, version, self.map_rows(plans, serving, hidden))

    def map_insert_rows(self, table: str, version: str, rows: Sequence[str]) -> str:
        """One version of the mapping of `rows` (`map_rows`)."""
        names = cols_sql([c for c, _ in self.map_columns()])
        return (
            f"INSERT INTO {table} PARTITION ({spec_sql([MAP_VERSION], [version])}) ({names}) "
            "VALUES " + ", ".join(rows)
        )

    def map_add_stamp(self, table: str) -> str:
        """A mapping table created before it had the stamp column gets it."""
        return statements.add_columns(table, [(MAP_STAMP, "string")])

    def map_rows(
        self,
        plans: Sequence[ReadPlan],
        serving: Mapping[Values, str] = NONE,
        hidden: Sequence[Values] = (),
    ) -> list[str]:
        """The mapping's rows for `plans`, as SQL value tuples: per day its anchor (branch
        'snapshot') and deltas ('delta'), or, for a day `serving` names, its anchor ('anchor')
        and its C partition ('cumulative', with the stamp); then one row (branch 'hidden', the
        partition as target and source) per `hidden` snapshot partition (ViewSql.view)."""
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
        for part in hidden:
            g, c = part[: len(group)], part[len(group) :]
            vals = (
                [self.lit(k, v) for k, v in zip(group, g, strict=False)]
                + [self.lit(k, v) for k, v in zip(chain + chain, c + c, strict=False)]
                + [string(MAP_HIDDEN), "NULL"]
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
        whose key their C partition does not hold, and its live rows; cumulative_read.read_parts
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
            extra = f", __b.{q(MASK_COLUMN)}" if mask else ""  # the C rows' keys: with the mask
            keyed = f"({side(self.cumulative, 'cumulative', True, extra)}) __c"
            parts += cumulative_read.read_parts(
                opts, self.columns + targets, side(self.snapshot, "anchor"), c_side, keyed, mask
            )
        return "\nUNION ALL\n".join(f"SELECT {proj} FROM ({part}) __g" for part in parts)
