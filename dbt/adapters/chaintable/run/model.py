"""The values one chain_incremental run passes from step to step (docs/design.md#code-layout): what
chain_prepare decided, where the rows were staged, the partitions the run writes; and the pure
rules over them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from dbt.adapters.base.relation import BaseRelation

from dbt.adapters.chaintable.base import statements as S
from dbt.adapters.chaintable.base.config import ModelSettings
from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.base.partitions import Values
from dbt.adapters.chaintable.base.versions import version_location
from dbt.adapters.chaintable.chain.catalog import Loaded
from dbt.adapters.chaintable.chain.state import ChainState
from dbt.adapters.chaintable.chain.tables import ChainTables, name_of
from dbt.adapters.chaintable.cumulative.plan import Build
from dbt.adapters.chaintable.merge.engines import engine_of

Columns = Sequence[tuple[str, str]]


@dataclass(frozen=True)
class ChainRun:
    """What chain_prepare decided; the materialization hands it to chain_execute."""

    settings: ModelSettings
    tables: ChainTables
    branch: str
    full_refresh: bool
    exists: bool
    # --empty or --sample: refs and sources give none or part of their rows; no empty partitions
    empty: bool = False
    view_exists: bool = False  # dbt's relation cache had the view when the run began

    @property
    def model(self) -> str:
        return self.settings.model

    @property
    def opts(self) -> ChainOptions:
        return self.settings.opts

    @property
    def publishes(self) -> bool:
        """Writes to an existing chain are published (crash safe); a first run or full refresh
        builds new tables, which a rerun rebuilds."""
        return self.exists and not self.full_refresh

    @property
    def writes(self) -> bool:
        return True  # a batch of a chain may be skipped (batch/batches.py BatchRun)

    @property
    def target(self) -> BaseRelation:
        return self.tables.branch(self.branch)

    @property
    def relations(self) -> list[BaseRelation]:
        return [self.tables.view, self.tables.snapshot, self.tables.delta]


@dataclass(frozen=True)
class RunResult:
    """What chain_execute tells dbt: the run's message and the rows it wrote (the rows now in
    the partitions it wrote, empty ones included), run_results' `rows_affected`."""

    message: str
    rows_affected: int


@dataclass(frozen=True)
class Stage:
    """Where the model's rows were staged: on an existing chain, a fresh directory below the
    target branch (`location`), in the target's file format: an external table's, or for a run
    of one partition of an unbucketed parquet or ORC table the bare directory."""

    run_id: str = ""
    location: str = ""
    provider: str = "parquet"
    # a run that can write one partition only (chain_partition gives every partition column)
    # stages its rows in a bare directory, published as that partition as it is; the lock
    # names it for recovery (a staging table costs its creation, a DESCRIBE and a DROP)
    partition: Values | None = None
    columns: tuple[tuple[str, str], ...] = ()  # the model's, of a bare directory
    # chain_input 'full': the groups the model's output has rows for, and the delta partitions
    # of later days compared again with the run's day (run/full.py)
    groups: tuple[Values, ...] | None = None
    rewritten: tuple[Values, ...] = ()

    @property
    def directory(self) -> str:
        return version_location(self.location, self.run_id)

    @property
    def bare(self) -> bool:
        return self.partition is not None

    def source(self, table: BaseRelation) -> str:
        """The staged rows as a relation: the bare directory's files or the staging table."""
        return S.files(self.directory, self.provider) if self.bare else str(table)


@dataclass(frozen=True)
class WritePlan:
    loaded: Loaded  # the catalog as the plan read it: only the publish changes it, by `written`
    stage_columns: tuple[tuple[str, str], ...]
    staged: tuple[Values, ...]  # partitions with rows
    empties: tuple[Values, ...]  # chain_partition's "no changes" partitions
    written: tuple[Values, ...]
    columns_added_at: float | None = None  # time.monotonic() of a schema change's ADD COLUMNS
    # per written partition whose rows all have one, the lowest sequence as an integer (an
    # empty partition: infinity); checks.check_stage
    lowest_sequence: Mapping[Values, float] = field(default_factory=dict)
    # the cumulative build that checks the staged rows in place of checks.check_stage
    # (Accumulator.checkable); `staged` then holds the run's partition, rows or none
    checked_by: Build | None = None


def table_order(cols: Columns, opts: ChainOptions) -> list[tuple[str, str]]:
    """Spark keeps partition columns last, in partition_by order."""
    by_name = {c.lower(): (c, t) for c, t in cols}
    parts = [by_name[p.lower()] for p in opts.partition_by]
    pset = {p.lower() for p in opts.partition_by}
    return [(c, t) for c, t in cols if c.lower() not in pset] + parts


def snapshot_write_needs_merge(opts: ChainOptions) -> bool:
    """A model's rows written to the snapshot branch are raw input: they need merging when a
    key may have several rows in a partition (allowed with a sequence or rowkind field;
    otherwise the stage checks refuse them) and always for aggregation (count counts rows)."""
    kinds = opts.rowkind_field and opts.chain_input != "full"  # a full state: inserts only
    return bool(kinds or opts.sequence_field or engine_of(opts).combines_rows)


def empty_partitions(
    settings: ModelSettings,
    state: ChainState,
    staged: Sequence[Values],
    output: Sequence[Values] | None = None,
) -> list[Values]:
    """With chain_partition, every known group without rows gets an empty partition there.
    `output` (chain_input 'full'): the groups of the model's output; a group it has no rows
    for keeps the day it holds (a missing extract changes nothing), and a write of full states
    to the snapshot branch adds no empty state."""
    spec, opts = settings.chain_partition, settings.opts
    if not spec or (output is not None and settings.chain_branch == "snapshot"):
        return []
    chain = tuple(spec[c] for c in opts.chain_keys)
    groups = set(state.groups()) | {state.layout.split(p)[0] for p in staged}
    gfilter = {i: spec[c] for i, c in enumerate(opts.group_keys) if c in spec}
    if len(gfilter) == state.n_group:
        groups.add(tuple(spec[c] for c in opts.group_keys))
    targets = {g + chain for g in groups if all(g[i] == v for i, v in gfilter.items())}
    if output is not None:
        held, given = state.snapshots | state.deltas, set(output)
        targets = {p for p in targets if p not in held or state.layout.split(p)[0] in given}
    return sorted(targets - set(staged))


def create_sql(
    run: ChainRun,
    rel: BaseRelation,
    cols: Columns,
    props: Mapping[str, str],
    location: str | None = None,
    as_select: str | None = None,
    provider: str | None = None,
    partition_by: Sequence[str] | None = None,
) -> str:
    s = run.settings
    return S.create_table(
        str(rel),
        cols,
        s.opts.partition_by if partition_by is None else partition_by,
        {**s.tblproperties, **props},
        file_format=provider or s.file_format,
        location=location or s.location_of(name_of(rel)),
        clustered_by=s.clustered_by,
        buckets=s.buckets,
        as_select=as_select,
    )


def invalidated_snapshots(run: ChainRun, plan: WritePlan) -> list[Values]:
    """The snapshot partitions a delta write of `plan` invalidates: the same partitions
    (a rewritten delta P invalidates snapshot P)."""
    if run.branch != "delta" or not run.publishes:
        return []
    snapshots = set(plan.loaded.snapshots)
    return [p for p in plan.written if p in snapshots]


def before_history(loaded: Loaded, parts: Sequence[Values]) -> list[Values]:
    """The partitions of `parts` at or before the oldest snapshot that expiration kept in
    their group (ChainState.before_history): history that is gone."""
    state, history = loaded.state(), loaded.history()
    return [p for p in parts if state.before_history(p, history)]
