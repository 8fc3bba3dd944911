"""The chaintable adapter: dbt-spark plus the chain table runtime.

Every statement goes through the dbt connection (`_fetch`/`_run`), never a PySpark object, so
session, thrift, odbc and http connections all work the same. The runtime lists partitions and
table properties from the catalog, asks planner.py what to do and renders it with sqlgen.py.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from dbt.adapters.base import available
from dbt_common.exceptions import DbtRuntimeError
from dbt.adapters.base.relation import BaseRelation
from dbt.adapters.events.logging import AdapterLogger
from dbt.adapters.spark.impl import SparkAdapter

from dbt.adapters.chaintable import expire, safety
from dbt.adapters.chaintable.connections import ChainTableConnectionManager
from dbt.adapters.chaintable.merge import cols_sql, q
from dbt.adapters.chaintable.options import (
    BRANCHES, DEFAULT_VIEW_RECENT, P_BRANCH, P_HISTORY_START, P_LAST_EXPIRE_CHECK, P_STALE,
    P_VIEW_MAP, P_VIEW_RECENT, ChainConfigError,
    ChainOptions, history_from_properties, stale_from_properties, stale_to_property,
)
from dbt.adapters.chaintable.planner import (
    ChainPlanError, ChainState, Values, format_partition, parse_partition_path,
    parse_partition_spec,
)
from dbt.adapters.chaintable.sqlgen import (
    MAP_VERSION, Renderer, create_table_sql, spec_sql, tblproperties_sql,
)
from dbt.adapters.chaintable import status as status_mod

logger = AdapterLogger("chaintable")

SNAPSHOT_SUFFIX = "__snapshot"
DELTA_SUFFIX = "__delta"
STAGE_SUFFIX = "__chain_stage"
PUB_SUFFIX = "__chain_pub"
GC_SUFFIX = "__chain_gc"
LOCK_SUFFIX = "__chain_lock"
MAP_SUFFIX = "__chain_map"
TS_FORMAT = "%Y-%m-%d %H:%M:%S"


def _esc(text: str) -> str:
    """A value inside a single-quoted Spark SQL string."""
    return str(text).replace("\\", "\\\\").replace("'", "\\'")


@dataclass
class ChainTables:
    view: BaseRelation
    snapshot: BaseRelation
    delta: BaseRelation
    stage: BaseRelation  # the model's rows of one run (checked before anything is published)
    pub: BaseRelation  # merged rows of one run or compaction, published partition by partition
    gc: BaseRelation  # managed scratch table: dropping its partitions deletes old directories
    lock: BaseRelation  # a view whose existence means a writer is at work
    cmap: BaseRelation  # which partitions feed each older delta-only partition (the view reads it)

    @property
    def name(self) -> str:
        return str(self.view)


@dataclass
class Loaded:
    """What the catalog says about one chain table."""

    tables: ChainTables
    opts: ChainOptions
    columns: List[Tuple[str, str]]
    props: Dict[str, str]
    snapshots: List[Values]
    deltas: List[Values]

    @property
    def column_names(self) -> List[str]:
        return [c for c, _ in self.columns]

    @property
    def types(self) -> Dict[str, str]:
        return dict(self.columns)

    def state(self) -> ChainState:
        return ChainState.build(self.opts, self.snapshots, self.deltas, self.types)

    def history(self) -> Dict[Values, Values]:
        """{group: oldest snapshot kept by expiration} (history_from_properties, as values)."""
        n = len(self.opts.group_keys)
        return {(parse_partition_path(g, self.opts.group_keys) if n else ()):
                parse_partition_path(c, self.opts.chain_keys)
                for g, c in history_from_properties(self.props).items()}

    def with_published(self, branch: str, parts: Sequence[Values]) -> "Loaded":
        """This catalog state after a publish of `parts` to `branch` (it adds or switches
        exactly them), so the caller need not list the partitions again."""
        name = "snapshots" if branch == "snapshot" else "deltas"
        have = getattr(self, name)
        known = set(have)
        return replace(self, **{name: list(have) + [p for p in parts if p not in known]})

    def renderer(self) -> Renderer:
        return Renderer(self.opts, self.column_names, self.types, str(self.tables.snapshot),
                        str(self.tables.delta))


@dataclass
class ChainRun:
    """One chain_incremental run, handed between the materialization's steps."""

    model: str
    tables: ChainTables
    opts: ChainOptions
    branch: str
    full_refresh: bool
    exists: bool
    config: Dict[str, Any]
    written: List[Values] = field(default_factory=list)
    staged: List[Values] = field(default_factory=list)
    empties: List[Values] = field(default_factory=list)
    stage_columns: List[Tuple[str, str]] = field(default_factory=list)
    run_id: str = ""
    location: str = ""  # of the target branch
    loaded: Optional["Loaded"] = None  # the catalog as _plan_write read it (nothing changes it
    # until the publish, which only adds `written` to the target branch: _write and _finish reuse it)
    provider: str = "parquet"
    stage_dropped: bool = False
    empty: bool = False  # dbt run --empty: refs and sources give no rows; no empty partitions

    @property
    def publishes(self) -> bool:
        """Writes to an existing chain are published (crash safe); a first run or full refresh
        builds new tables, which a rerun rebuilds."""
        return self.exists and not self.full_refresh

    @property
    def target(self) -> BaseRelation:
        return self.tables.snapshot if self.branch == "snapshot" else self.tables.delta

    @property
    def relations(self) -> List[BaseRelation]:
        return [self.tables.view, self.tables.snapshot, self.tables.delta]


class ChainTableAdapter(SparkAdapter):
    ConnectionManager = ChainTableConnectionManager

    # ---- SQL through the dbt connection ------------------------------------------------------
    def _fetch(self, sql: str) -> List[Tuple[Any, ...]]:
        """Rows as plain tuples (no agate type inference: '20250101' must stay a string)."""
        _, cursor = self.connections.add_query(sql, auto_begin=False)
        rows = cursor.fetchall() or []
        return [tuple(r) for r in rows]

    def _run(self, sql: Optional[str]) -> None:
        if sql:
            self.connections.add_query(sql, auto_begin=False)

    # ---- catalog reads -----------------------------------------------------------------------
    def _exists(self, relation: BaseRelation) -> bool:
        return bool(self._fetch(f"SHOW TABLES IN {relation.schema} LIKE '{relation.identifier}'"))

    def _branches_exist(self, tables: ChainTables) -> bool:
        """Both branches exist (one listing: `|` separates alternatives in SHOW TABLES LIKE)."""
        names = {str(r[1]).lower() for r in self._fetch(
            f"SHOW TABLES IN {tables.snapshot.schema} "
            f"LIKE '{tables.snapshot.identifier}|{tables.delta.identifier}'")}
        return {tables.snapshot.identifier.lower(), tables.delta.identifier.lower()} <= names

    def _describe(self, relation: BaseRelation) -> List[Tuple[str, str]]:
        out = []
        for row in self._fetch(f"DESCRIBE TABLE {relation}"):
            name = (row[0] or "").strip()
            if not name or name.startswith("#"):
                break
            out.append((name, str(row[1]).strip()))
        return out

    def _properties(self, relation: BaseRelation) -> Dict[str, str]:
        return {str(r[0]): str(r[1]) for r in self._fetch(f"SHOW TBLPROPERTIES {relation}")}

    def _partitions(self, relation: BaseRelation, partition_by: Sequence[str]) -> List[Values]:
        return [parse_partition_path(str(r[0]), partition_by)
                for r in self._fetch(f"SHOW PARTITIONS {relation}")]

    @available
    def chain_tables(self, relation: BaseRelation) -> ChainTables:
        def rel(suffix: str, kind: str) -> BaseRelation:
            return relation.incorporate(path={"identifier": relation.identifier + suffix},
                                        type=kind)
        return ChainTables(view=relation.incorporate(type="view"), snapshot=rel(SNAPSHOT_SUFFIX, "table"),
                           delta=rel(DELTA_SUFFIX, "table"), stage=rel(STAGE_SUFFIX, "table"),
                           pub=rel(PUB_SUFFIX, "table"), gc=rel(GC_SUFFIX, "table"),
                           lock=rel(LOCK_SUFFIX, "view"), cmap=rel(MAP_SUFFIX, "table"))

    def _load(self, relation: BaseRelation) -> Loaded:
        tables = self.chain_tables(relation)
        if not self._exists(tables.snapshot):
            raise ChainConfigError(
                f"'{relation}' is not a chain table: {tables.snapshot} does not exist "
                "(run the chain_incremental model first)")
        props = self._properties(tables.snapshot)
        return self._loaded(tables, props, self._describe(tables.snapshot))

    def _loaded(self, tables: ChainTables, props: Dict[str, str],
                columns: List[Tuple[str, str]]) -> Loaded:
        """The chain's state from its properties and columns (already read) and both branches'
        partitions (listed now)."""
        opts = ChainOptions.from_properties(str(tables.snapshot), props)
        return Loaded(tables, opts, columns, props, self._partitions(tables.snapshot, opts.partition_by),
                      self._partitions(tables.delta, opts.partition_by))

    @available
    def chain_relation(self, model: Optional[str], relation: Any, default_schema: str,
                       nodes: Optional[List[Mapping[str, Any]]] = None) -> BaseRelation:
        """Resolve an operation's `model: t` (a model of the project) or `relation: schema.t`."""
        if relation:
            parts = str(relation).split(".")
            schema, ident = (parts[-2], parts[-1]) if len(parts) > 1 else (default_schema, parts[0])
            return self.Relation.create(schema=schema, identifier=ident, type="view")
        if not model:
            raise ChainConfigError("give the chain table as `model: <name>` or `relation: schema.name`")
        for node in nodes or []:
            if node.get("name") == model and node.get("resource_type") == "model":
                return self.Relation.create(schema=node["schema"], identifier=node.get("alias") or model,
                                            type="view")
        raise ChainConfigError(f"no model named '{model}' in this project")

    # ---- the materialization -----------------------------------------------------------------
    @available
    def chain_prepare(self, relation: BaseRelation, model: str, config: Mapping[str, Any],
                      full_refresh: bool, full_refresh_flag: bool, empty: bool = False) -> ChainRun:
        """Validate the config and decide which branch this run writes (SPEC §1 Runs). `empty` is
        dbt's --empty: the model's refs and sources give no rows, so the run checks and creates
        the relations and writes only what the model still returns; it adds none of
        chain_partition's empty "no changes" partitions (they would replace the day's real
        deltas with nothing) and expires nothing."""
        config = dict(config)
        opts = ChainOptions.from_config(model, config)
        tables = self.chain_tables(relation)
        exists = self._branches_exist(tables)
        forced = config.get("chain_branch")
        if forced is not None and forced not in BRANCHES:
            raise ChainConfigError(f"chain_incremental model '{model}': chain_branch '{forced}' is "
                                   f"not one of {list(BRANCHES)}")
        if exists and full_refresh_flag and not full_refresh:
            loaded = self._load(relation)
            logger.info(f"chain_incremental model '{model}': full_refresh is false in its config, "
                        f"so --full-refresh is ignored; it would have dropped "
                        f"{len(loaded.snapshots)} snapshot and {len(loaded.deltas)} delta partitions")
        if exists and not full_refresh:
            stored = ChainOptions.from_properties(str(tables.snapshot), self._properties(tables.snapshot))
            changed = opts.structural_differences(stored)
            if changed:
                desc = "; ".join(f"{k} {a} -> {b}" for k, (a, b) in changed.items())
                raise ChainConfigError(
                    f"chain_incremental model '{model}': {desc} changes how stored partitions are "
                    "read; run with --full-refresh to rebuild the chain table")
        view_rel = self.get_relation(relation.database, relation.schema, relation.identifier)
        if view_rel is not None and not view_rel.is_view:
            if not full_refresh:
                raise ChainConfigError(
                    f"chain_incremental model '{model}': {relation} exists as a {view_rel.type}, "
                    "not a chain view; run with --full-refresh to replace it")
            self.drop_relation(view_rel)
        # chain_branch forces the branch, on a first run too: deltas may come before any snapshot
        # (SPEC §2 rule 3 reads a group without one), as in Paimon, where a delta branch is
        # written whether or not the snapshot branch holds anything yet
        branch = forced or ("snapshot" if (not exists or full_refresh) else "delta")
        logger.info(f"chain_incremental model '{model}': writing the {branch} branch"
                    + (" (full refresh)" if full_refresh and exists else ""))
        return ChainRun(model, tables, opts, branch, full_refresh, exists, config, empty=bool(empty))

    @available
    def chain_is_incremental(self, relation: BaseRelation, config: Mapping[str, Any],
                             full_refresh: bool) -> bool:
        if full_refresh or dict(config).get("chain_branch") == "snapshot":
            return False
        tables = self.chain_tables(relation)
        return self._branches_exist(tables)

    @available
    def chain_execute(self, run: ChainRun, compiled_code: str) -> str:
        """The whole run under the table's lock: stage the model's rows, check them, publish
        them partition by partition, then invalidate, refresh the view and expire."""
        with self._locked(run.tables, f"run of model '{run.model}'"):
            self._stage(run, compiled_code)
            safety.failpoint("run.staged")
            self._plan_write(run)
            self._write(run)
            self._finish(run)
        return f"OK: {len(run.written)} {run.branch} partition(s)"

    def _describe_query(self, sql: str) -> List[Tuple[str, str]]:
        return [(str(r[0]).strip(), str(r[1]).strip()) for r in self._fetch(f"DESCRIBE QUERY {sql}")
                if r[0] and not str(r[0]).startswith("#")]

    def _stage(self, run: ChainRun, compiled_code: str) -> None:
        """The model's rows, once. On an existing chain the stage is an external table in a fresh
        directory below the target branch, partitioned like it: after the checks its partitions
        are published as they are (safety.py). A first run or full refresh stages a plain table."""
        tables, opts = run.tables, run.opts
        cols = self._describe_query(compiled_code)
        opts.validate_columns(run.model, [c for c, _ in cols])  # before anything is written
        # no stage is left over: taking the lock ran _recover, which drops it
        if not run.publishes:
            self._run(f"CREATE TABLE {tables.stage} USING parquet AS\n{compiled_code}")
            return
        target = run.target
        run.run_id = safety.new_run_id()
        info = self._formatted(target)
        run.location, run.provider = info["Location"], info.get("Provider", "parquet")
        self._run(self._create_sql(
            run, tables.stage, [], {safety.P_TARGET: str(target)},
            location=safety.version_location(run.location, run.run_id), as_select=compiled_code))

    def _check_stage(self, run: ChainRun, columns: List[Tuple[str, str]], opts: ChainOptions) -> List[Values]:
        """Bad input is refused before anything is written (SPEC §5); returns the partitions.
        One scan summarises every partition of the stage (merge.stage_summary_sql); only a rule
        it finds broken (or a partition where a tie is possible) costs a query of its own."""
        from dbt.adapters.chaintable import merge  # the merge rules decide what is refused

        stage, model = run.tables.stage, run.model
        names = [c for c, _ in columns]
        source = f"SELECT * FROM {stage}"
        chain_partition = run.config.get("chain_partition")
        spec = parse_partition_spec(chain_partition) if chain_partition else None
        inside = None
        if chain_partition:
            self._check_chain_partition(run, opts, spec)
            inside = Renderer(opts, names, dict(columns), "", "").predicate(list(spec), list(spec.values()))
        n = len(opts.partition_by)
        summary = self._fetch(merge.stage_summary_sql(opts, names, source, inside))
        parts = [r[:n] for r in summary]
        # per partition (stage_summary_sql's columns after the partition values)
        n_rows, n_keys, pk_null, bad_kind, refused, outside = (
            [r[n + i] for r in summary] for i in range(6))
        if sum(int(v or 0) for v in pk_null):
            row = self._fetch(merge.pk_null_sql(opts, source))[0]
            bad = [c for c, v in zip(opts.primary_key, row) if v is None]
            raise ChainConfigError(
                f"chain_incremental model '{model}': NULL in primary key column(s) {bad}, e.g. key "
                f"{self._key_text(opts.primary_key, row)}; nothing was written")
        if sum(int(v or 0) for v in bad_kind):
            row = self._fetch(merge.bad_kind_sql(opts, source))[0]
            raise ChainConfigError(
                f"chain_incremental model '{model}': rowkind_field '{opts.rowkind_field}' must be "
                f"one of {list(merge.ROW_KINDS)}, got {row[-1]!r} for key "
                f"{self._key_text(opts.primary_key, row)}; nothing was written")
        if sum(int(v or 0) for v in refused):
            row = self._fetch(merge.refused_sql(opts, names, source))[0]
            raise ChainConfigError(
                f"chain_incremental model '{model}': {merge.refusal(opts, names)}; got a "
                f"{row[-1]!r} row for key {self._key_text(opts.primary_key, row)}; "
                "nothing was written")
        sql = merge.tied_sql(opts, names, source)
        tie_possible = any(int(r) > int(k) for r, k in zip(n_rows, n_keys))
        rows = self._fetch(sql) if sql and tie_possible else []
        if rows:
            shown = list(opts.primary_key) + ([opts.sequence_field] if opts.sequence_field else [])
            same = " with the same sequence value" if opts.sequence_field else ""
            differ = (" that differ in order-sensitive columns"
                      if opts.merge_engine == "aggregation" else "")
            raise ChainConfigError(
                f"chain_incremental model '{model}': {rows[0][-1]} rows for key "
                f"{self._key_text(shown, rows[0])} in one partition{same}{differ}; "
                "the merge order cannot decide between them (add a sequence_field or dedupe "
                "the model); nothing was written")
        outside_parts = [p for p, o in zip(parts, outside) if str(o).lower() == "true"]
        if outside_parts:
            raise ChainConfigError(
                f"chain_incremental model '{model}': rows outside chain_partition "
                f"{spec}, e.g. partition "
                f"{format_partition(opts.partition_by, [str(v) for v in outside_parts[0]])}; "
                "nothing was written")
        return [tuple(str(v) for v in p) for p in parts]

    @staticmethod
    def _key_text(columns: Sequence[str], values: Sequence[Any]) -> str:
        return "(" + ", ".join(f"{c}={v!r}" for c, v in zip(columns, values)) + ")"

    @staticmethod
    def _check_chain_partition(run: ChainRun, opts: ChainOptions, spec: Mapping[str, str]) -> None:
        missing = [c for c in opts.chain_keys if c not in spec]
        unknown = [k for k in spec if k not in opts.partition_by]
        if missing or unknown:
            raise ChainConfigError(
                f"chain_incremental model '{run.model}': chain_partition {dict(spec)} must give "
                f"every chain key {list(opts.chain_keys)} (and optionally group keys), "
                f"missing {missing}, unknown {unknown}")

    def _reconcile_schema(self, run: ChainRun, stage_cols: List[Tuple[str, str]],
                          table_cols: List[Tuple[str, str]]) -> List[Tuple[str, str]]:
        """Keep both branches on one schema (on_schema_change: ignore | fail | append_new_columns)."""
        mode = run.config.get("on_schema_change") or "ignore"
        have = {c.lower(): t for c, t in table_cols}
        new = {c.lower(): t for c, t in stage_cols}
        added = [(c, t) for c, t in stage_cols if c.lower() not in have]
        removed = [c for c, _ in table_cols if c.lower() not in new]
        retyped = [f"{c} {have[c.lower()]} -> {new[c.lower()]}" for c, _ in table_cols
                   if c.lower() in new and new[c.lower()] != have[c.lower()]]
        if not (added or removed or retyped):
            return table_cols
        desc = (f"chain_incremental model '{run.model}': the model's columns differ from "
                f"{run.tables.delta}: added {[c for c, _ in added]}, removed {removed}, "
                f"type changed {retyped}")
        if mode == "fail" or removed or retyped:
            raise ChainConfigError(desc + f" (on_schema_change={mode}); nothing was written")
        if mode == "append_new_columns":
            defs = ", ".join(f"{q(c)} {t}" for c, t in added)
            for rel in (run.tables.snapshot, run.tables.delta):
                self._run(f"ALTER TABLE {rel} ADD COLUMNS ({defs})")
            logger.info(desc + "; appended to both branches")
            return self._describe(run.tables.snapshot)
        logger.info(desc + "; new columns ignored (on_schema_change=ignore)")
        return table_cols

    def _plan_write(self, run: ChainRun) -> None:
        """Check the staged rows (refused: nothing published), create the branches on a first
        run, and decide the partitions this run writes (the model's and the empty ones)."""
        tables, opts = run.tables, run.opts
        stage_cols = self._describe(tables.stage)
        run.stage_columns = stage_cols
        staged = self._check_stage(run, stage_cols, opts)
        self._check_partition_times(run, staged)
        props = opts.to_properties()
        if run.full_refresh and run.exists:
            loaded = self._load(tables.view)
            logger.info(f"full refresh of '{run.model}': dropping {len(loaded.snapshots)} snapshot "
                        f"and {len(loaded.deltas)} delta partitions")
        if not run.publishes:
            for rel in (tables.view, tables.snapshot, tables.delta, tables.cmap):
                self._run(f"DROP {'VIEW' if rel is tables.view else 'TABLE'} IF EXISTS {rel}")
            ordered = self._table_order(stage_cols, opts)
            for branch, rel in (("snapshot", tables.snapshot), ("delta", tables.delta)):
                self._run(self._create_sql(run, rel, ordered, {**props, P_BRANCH: branch}))
            loaded = self._load(tables.view)
        else:
            columns = self._reconcile_schema(run, self._table_order(stage_cols, opts),
                                             self._describe(tables.snapshot))
            stored = self._properties(tables.snapshot)  # under the lock: current
            if any(stored.get(k) != v for k, v in props.items()):  # a config option changed
                for rel in (tables.snapshot, tables.delta):
                    self._run(f"ALTER TABLE {rel} SET TBLPROPERTIES ({tblproperties_sql(props)})")
            # the catalog as it now is, from what this run read and wrote: no second listing
            loaded = self._loaded(tables, {**stored, **props}, columns)
        run.loaded = loaded
        state = loaded.state()
        if run.branch == "delta":
            early = [p for p in staged if state.before_history(p, loaded.history())]
            if early:
                raise ChainConfigError(
                    f"chain_incremental model '{run.model}': delta partition "
                    f"{format_partition(opts.partition_by, early[0])} is at or before the oldest "
                    "snapshot that expiration kept in its group; the history it would change is "
                    "gone, so the day cannot be rewritten (write it with chain_branch='snapshot' "
                    "as a full state instead); nothing was written")
        run.staged = staged
        run.empties = [] if run.empty else self._empty_partitions(run, state, staged)
        run.written = sorted(set(staged) | set(run.empties))
        logger.info(f"'{run.model}': {len(staged)} partition(s) with rows, {len(run.empties)} empty "
                    f"partition(s) to the {run.branch} branch"
                    + (" (--empty: no empty partitions)" if run.empty else ""))

    def _write(self, run: ChainRun) -> None:
        tables, opts = run.tables, run.opts
        loaded = run.loaded or self._load(tables.view)
        renderer = loaded.renderer()
        target = run.target
        before = loaded.snapshots if run.branch == "snapshot" else loaded.deltas
        source = f"SELECT {cols_sql(renderer.columns)} FROM {tables.stage}"
        merge = run.branch == "snapshot" and self._snapshot_write_needs_merge(opts)
        if merge:
            source = renderer.batch_merge(source)
        if not run.publishes:  # first run / full refresh: the tables are new, nothing to protect
            for part in run.empties:
                self._run(renderer.empty_partition(str(target), part))
            self._run(renderer.insert_overwrite(str(target), source))
            return
        if merge:  # the stage holds raw rows: publish the merged ones from a table of their own
            self._create_pub(target, loaded, source, run.written, run.run_id + "-m")
            self._publish(target, tables.pub, opts.partition_by, run.written, existing=before)
            return
        stage_renderer = Renderer(opts, [c for c, _ in self._table_order(run.stage_columns, opts)],
                                  dict(run.stage_columns), str(tables.stage), "")
        for part in run.empties:
            self._run(stage_renderer.empty_partition(str(tables.stage), part))
        self._publish(target, tables.stage, opts.partition_by, run.written, existing=before)
        run.stage_dropped = True  # _publish dropped it

    @staticmethod
    def _check_partition_times(run: ChainRun, parts: Sequence[Values]) -> None:
        """With a timestamp pattern and formatter, every partition written must parse: an
        unparseable one could never expire and would break the chain's time order."""
        opts = run.opts
        if not (opts.timestamp_pattern and opts.timestamp_formatter):
            return
        for part in parts:
            try:
                expire.partition_time(opts.timestamp_pattern, opts.timestamp_formatter,
                                      dict(zip(opts.partition_by, part)))
            except (ChainConfigError, ValueError) as e:
                raise ChainConfigError(
                    f"chain_incremental model '{run.model}': partition "
                    f"{format_partition(opts.partition_by, part)}: {e}; nothing was written") from None

    @staticmethod
    def _snapshot_write_needs_merge(opts: ChainOptions) -> bool:
        """A model's rows written to the snapshot branch are raw input: they need merging when
        a key may have several rows in a partition (allowed with a sequence or rowkind field;
        otherwise _check_stage refuses them) and always for aggregation (count counts rows)."""
        return bool(opts.rowkind_field or opts.sequence_field or opts.merge_engine == "aggregation")

    @staticmethod
    def _table_order(cols: List[Tuple[str, str]], opts: ChainOptions) -> List[Tuple[str, str]]:
        """Spark keeps partition columns last, in partition_by order."""
        by_name = {c.lower(): (c, t) for c, t in cols}
        parts = [by_name[p.lower()] for p in opts.partition_by]
        pset = {p.lower() for p in opts.partition_by}
        return [(c, t) for c, t in cols if c.lower() not in pset] + parts

    def _create_sql(self, run: ChainRun, rel: BaseRelation, cols: List[Tuple[str, str]],
                    props: Dict[str, str], location: Optional[str] = None,
                    as_select: Optional[str] = None) -> str:
        cfg = run.config
        user_props = cfg.get("tblproperties") or {}
        if location is None and cfg.get("location_root"):
            location = f"{cfg['location_root'].rstrip('/')}/{rel.identifier}"
        clustered = cfg.get("clustered_by") or ()
        if isinstance(clustered, str):
            clustered = [clustered]
        return create_table_sql(str(rel), cols, run.opts, {**user_props, **props},
                                file_format=run.provider if as_select else (cfg.get("file_format") or "parquet"),
                                location=location, clustered_by=clustered,
                                buckets=cfg.get("buckets"), as_select=as_select)

    def _empty_partitions(self, run: ChainRun, state: ChainState, staged: List[Values]) -> List[Values]:
        """With chain_partition, every known group without rows gets an empty partition there."""
        spec = run.config.get("chain_partition")
        if not spec:
            return []
        spec = parse_partition_spec(spec)
        chain = tuple(spec[c] for c in run.opts.chain_keys)
        groups = set(state.groups()) | {state.split(p)[0] for p in staged}
        gfilter = {i: spec[c] for i, c in enumerate(run.opts.group_keys) if c in spec}
        if len(gfilter) == state.n_group:
            groups.add(tuple(spec[c] for c in run.opts.group_keys))
        targets = {g + chain for g in groups if all(g[i] == v for i, v in gfilter.items())}
        return sorted(targets - set(staged))

    def _finish(self, run: ChainRun) -> None:
        """After the publish: record stale snapshots, point the view at the new state, then drop
        the snapshots a rewritten delta invalidates (the view no longer reads them), drop the
        stage, and expire when configured and due."""
        tables = run.tables
        loaded = self._after_publish(run) if run.publishes and run.loaded else self._load(tables.view)
        state = loaded.state()
        stale = stale_from_properties(loaded.props)
        written_paths = {format_partition(run.opts.partition_by, p) for p in run.written}
        invalidated: List[Values] = []
        if run.branch == "delta":
            invalidated = [p for p in run.written if p in state.snapshots]
            for snap, delta in state.stale_after_delta_write(run.written).items():
                stale[format_partition(run.opts.partition_by, snap)] = format_partition(
                    run.opts.partition_by, delta)
        else:
            stale = {k: v for k, v in stale.items() if k not in written_paths}
        if stale != stale_from_properties(loaded.props):
            self._set_stale(tables, stale)
        self._refresh_view(tables.view, loaded, state.without(snapshots=invalidated))
        safety.failpoint("run.view")
        if invalidated:
            logger.info(f"'{run.model}': rewritten delta partition(s) invalidate snapshot "
                        f"partition(s) {[format_partition(run.opts.partition_by, p) for p in invalidated]}")
            self._run(loaded.renderer().drop_partitions(str(tables.snapshot), invalidated))
        if not run.stage_dropped:
            self._drop_scratch(tables)
        if run.opts.expiration_enabled and not run.empty:
            self._auto_expire(tables.view)

    @staticmethod
    def _after_publish(run: ChainRun) -> Loaded:
        """The catalog after a run's publish, without reading it again: the publish switched or
        added exactly `run.written` in the target branch (every one of them, empty or not) and
        changed no properties or columns of the branches."""
        assert run.loaded is not None
        return run.loaded.with_published(run.branch, run.written)

    def _set_stale(self, tables: ChainTables, stale: Mapping[str, str]) -> None:
        self._run(f"ALTER TABLE {tables.snapshot} SET TBLPROPERTIES "
                  f"({tblproperties_sql({P_STALE: stale_to_property(stale)})})")

    def _refresh_view(self, relation: BaseRelation, loaded: Optional[Loaded] = None,
                      state: Optional[ChainState] = None) -> None:
        """Point the view at `state` (default: the catalog's). Before partitions are removed the
        view is pointed at the state without them, so it never reads a half-dropped chain."""
        loaded = loaded or self._load(relation)
        state = state or loaded.state()
        renderer, cmap = loaded.renderer(), loaded.tables.cmap
        recent = int(loaded.props.get(P_VIEW_RECENT) or DEFAULT_VIEW_RECENT)
        layout = state.view_layout(recent)
        mapped = layout[1]
        # older delta-only partitions: a new version of the mapping table first (the current
        # view reads its own version), then the view, then the record of which version it reads
        # and its digest, then the versions no view reads any more. A refresh whose mapped reads
        # are those of the recorded version reuses it (a daily run only adds newer partitions).
        rows = renderer.map_rows(mapped)
        digest = hashlib.sha1("\n".join(rows).encode()).hexdigest()[:16] if mapped else ""
        recorded = (loaded.props.get(P_VIEW_MAP) or "").split()
        # the mapping table exists while a version is recorded (both are removed together):
        # list it then, and create it only when none is recorded or it was dropped by hand
        held = self._map_versions(cmap) if mapped and recorded else None
        reuse = (bool(mapped) and len(recorded) == 2 and recorded[1] == digest
                 and recorded[0] in (held or []))
        version = recorded[0] if reuse else (safety.new_run_id() if mapped else "")
        if mapped and not reuse:
            if held is None:
                self._run(renderer.map_create(str(cmap)))
            self._run(renderer.map_insert(str(cmap), version, mapped))
        sql = renderer.view(layout, (str(cmap), version))
        self._replace_view(loaded.tables.view, sql)
        if reuse:
            return
        record = f"{version} {digest}" if mapped else ""
        if record != (loaded.props.get(P_VIEW_MAP) or ""):
            self._run(f"ALTER TABLE {loaded.tables.snapshot} SET TBLPROPERTIES "
                      f"({tblproperties_sql({P_VIEW_MAP: record})})")
            loaded.props[P_VIEW_MAP] = record  # a second refresh in this operation sees it
        if not mapped:
            self._run(f"DROP TABLE IF EXISTS {cmap}")
            return
        # versions listed before this one's insert (none listed: the next refresh that writes
        # a version drops whatever a crash between the record and the table's drop left)
        old = [v for v in held or [] if v != version]
        if old:
            self._run(f"ALTER TABLE {cmap} DROP IF EXISTS "
                      + ", ".join(f"PARTITION ({spec_sql([MAP_VERSION], [v])})" for v in old))

    def _replace_view(self, view: BaseRelation, sql: str) -> None:
        """CREATE OR REPLACE VIEW ... WITH SCHEMA EVOLUTION (Spark 4): the view takes its
        query's schema as it is, without the projection of casts to a stored schema that
        Spark adds otherwise; that projection doubled the time to plan a one-day read (measured:
        0.38 -> 0.18 s for the benchmark's compacted day). An older Spark refuses the clause:
        then the plain statement, remembered for the rest of this invocation."""
        modes = self.__dict__.setdefault("_chain_view_modes", [" WITH SCHEMA EVOLUTION", ""])
        for i, mode in enumerate(list(modes)):
            try:
                self._run(f"CREATE OR REPLACE VIEW {view}{mode} AS\n{sql}")
                del modes[:i]
                return
            except DbtRuntimeError:
                if i == len(modes) - 1:
                    raise

    def _map_versions(self, cmap: BaseRelation) -> Optional[List[str]]:
        """The versions the mapping table holds, None when it does not exist (dropped by hand:
        then it lacks the version the snapshot branch's record names, and the refresh writes
        a new one)."""
        try:
            rows = self._fetch(f"SHOW PARTITIONS {cmap}")
        except DbtRuntimeError:
            return None
        return [str(r[0]).split("=", 1)[1] for r in rows]

    # ---- locking and publishing (safety.py explains both) ------------------------------------
    @contextmanager
    def _locked(self, tables: ChainTables, operation: str):
        held = self.__dict__.setdefault("_chain_locks", {})
        key, me = str(tables.lock), safety.Owner.me()
        if held.get(key) == me.invocation:  # re-entrant (a run's automatic expiration)
            yield
            return
        self._acquire(tables, operation, me)
        held[key] = me.invocation
        try:
            self._recover(tables)
            yield
        except safety.SimulatedCrash:
            held.pop(key, None)
            raise
        except Exception:
            held.pop(key, None)
            try:
                self._recover(tables)  # a refused or failed write leaves nothing behind
            finally:
                self._run(f"DROP VIEW IF EXISTS {tables.lock}")
            raise
        held.pop(key, None)
        self._run(f"DROP VIEW IF EXISTS {tables.lock}")

    def _acquire(self, tables: ChainTables, operation: str, me: "safety.Owner") -> None:
        now = dt.datetime.now().replace(microsecond=0)
        props = {safety.P_OWNER: me.text(), safety.P_SINCE: now.strftime(safety.TS),
                 safety.P_OPERATION: operation}
        create = (f"CREATE VIEW {tables.lock} TBLPROPERTIES ({tblproperties_sql(props)}) "
                  "AS SELECT 1 AS locked")
        for attempt in (1, 2):
            try:
                self._run(create)
                return
            except Exception:
                if not self._exists(tables.lock):
                    raise
                holder = self._properties(tables.lock)
                why = safety.lock_is_stale(holder, me, now)
                if why is None or attempt == 2:
                    raise ChainPlanError(
                        f"{tables.view} is locked: {safety.lock_holder_text(holder)} is writing "
                        f"it, so this {operation} did not start and wrote nothing; retry when it "
                        f"is done (if that process is gone for good: DROP VIEW {tables.lock})")
                logger.info(f"{tables.view}: breaking the lock of "
                            f"{safety.lock_holder_text(holder)}: {why}")
                self._run(f"DROP VIEW IF EXISTS {tables.lock}")

    def _recover(self, tables: ChainTables) -> None:
        """Remove what an unfinished write left: its scratch tables and every directory of theirs
        that no partition of the branches references. Referenced ones were published: keep."""
        present = {str(r[1]).lower() for r in self._fetch(
            f"SHOW TABLES IN {tables.view.schema} LIKE '{tables.view.identifier}__chain_*'")}
        garbage: List[str] = []
        for rel in (tables.stage, tables.pub):
            if rel.identifier.lower() not in present:
                continue
            props = self._properties(rel)
            target = props.get(safety.P_TARGET)
            if target:
                garbage += self._unpublished(rel, target)
                garbage += self._switched_away(target, json.loads(props.get(safety.P_REPLACES, "{}")))
            self._run(f"DROP TABLE IF EXISTS {rel}")
        if garbage or tables.gc.identifier.lower() in present:
            self._gc(tables, garbage)

    def _unpublished(self, rel: BaseRelation, target: str) -> List[str]:
        """Directories of a leftover staging table that its target does not reference."""
        root = self._location(rel)
        parts = [str(r[0]) for r in self._fetch(f"SHOW PARTITIONS {rel}")]
        spec_cols = [kv.split("=", 1)[0] for kv in parts[0].split("/")] if parts else []
        target_parts = {str(r[0]) for r in self._fetch(f"SHOW PARTITIONS {target}")}
        referenced = [p for p in parts if p in target_parts and self._partition_location(
            target, spec_cols, parse_partition_path(p, spec_cols)) == self._partition_location(
            str(rel), spec_cols, parse_partition_path(p, spec_cols))]
        if not referenced:
            return [root]
        return [self._partition_location(str(rel), spec_cols, parse_partition_path(p, spec_cols))
                for p in parts if p not in referenced]

    def _formatted(self, rel: Any, partition: str = "") -> Dict[str, str]:
        """DESCRIBE FORMATTED's detail rows (Location, Provider, Num Buckets, ...)."""
        out: Dict[str, str] = {}
        for row in self._fetch(f"DESCRIBE FORMATTED {rel}{partition}"):
            key = str(row[0] or "").strip()
            if key and key not in out:
                out[key] = str(row[1] or "").strip()
        return out

    def _switched_away(self, target: str, replaced: Mapping[str, str]) -> List[str]:
        """Directories a crashed publish had already switched partitions away from."""
        out = []
        current = {str(r[0]) for r in self._fetch(f"SHOW PARTITIONS {target}")} if replaced else set()
        for path, old_dir in replaced.items():
            cols = [kv.split("=", 1)[0] for kv in path.split("/")]
            values = parse_partition_path(path, cols)
            if path not in current or self._partition_location(target, cols, values) != old_dir:
                out.append(old_dir)
        return out

    def _location(self, rel: Any) -> str:
        info = self._formatted(rel)
        if "Location" not in info:
            raise ChainPlanError(f"{rel}: no location in DESCRIBE FORMATTED")
        return info["Location"]

    def _partition_location(self, rel: Any, columns: Sequence[str], values: Values) -> str:
        info = self._formatted(rel, f" PARTITION ({spec_sql(columns, values)})")
        if "Location" not in info:
            raise ChainPlanError(f"{rel}: no location for partition {format_partition(columns, values)}")
        return info["Location"]

    def _create_pub(self, target: BaseRelation, loaded: Loaded, source_sql: str,
                    parts: Sequence[Values], run_id: str) -> None:
        """Merged rows in a fresh directory below `target`, laid out (format, buckets) like it,
        every partition of `parts` present (empty if the merge left no row), ready to publish."""
        pub = loaded.tables.pub
        self._run(f"DROP TABLE IF EXISTS {pub}")
        renderer = loaded.renderer()
        info = self._formatted(target)
        buckets = int(info.get("Num Buckets") or 0)
        bucket_cols = [c.strip(" `") for c in info.get("Bucket Columns", "").strip("[]").split(",")
                       if c.strip(" `")]
        self._run(create_table_sql(
            str(pub), loaded.columns, loaded.opts, {safety.P_TARGET: str(target)},
            file_format=info.get("Provider", "parquet"),
            location=safety.version_location(info["Location"], run_id),
            clustered_by=bucket_cols if buckets > 0 else (), buckets=buckets if buckets > 0 else None))
        if len(parts) == 1:  # one partition (one group): its rows carry its values
            self._run(renderer.insert_overwrite(str(pub), source_sql, only=parts[0]))
            return
        self._run(renderer.insert_overwrite(str(pub), source_sql))
        present = set(self._partitions(pub, loaded.opts.partition_by))
        for part in parts:
            if part not in present:
                self._run(renderer.empty_partition(str(pub), part))

    def _publish(self, target: BaseRelation, source: BaseRelation, partition_by: Sequence[str],
                 parts: Sequence[Values], existing: Optional[Sequence[Values]] = None) -> None:
        """Switch each partition of `target` to its new directory in `source`: one metastore
        operation per partition (atomic for readers). Old directories are deleted afterwards."""
        existing = set(self._partitions(target, partition_by) if existing is None else existing)
        replaced = {format_partition(partition_by, part):
                    self._partition_location(target, partition_by, part)
                    for part in parts if part in existing}
        if replaced:  # so that recovery after a crash can delete the ones switched away from
            self._run(f"ALTER TABLE {source} SET TBLPROPERTIES "
                      f"({tblproperties_sql({safety.P_REPLACES: json.dumps(replaced)})})")
        new_parts, old_dirs = [], []
        for part in parts:
            new_dir = self._partition_location(source, partition_by, part)
            if part in existing:
                old_dirs.append(replaced[format_partition(partition_by, part)])
                self._run(f"ALTER TABLE {target} PARTITION ({spec_sql(partition_by, part)}) "
                          f"SET LOCATION '{_esc(new_dir)}'")
                safety.failpoint("publish.first")
            else:
                new_parts.append(f"PARTITION ({spec_sql(partition_by, part)}) "
                                 f"LOCATION '{_esc(new_dir)}'")
        if new_parts:
            self._run(f"ALTER TABLE {target} ADD " + " ".join(new_parts))
        safety.failpoint("publish.done")
        self._run(f"DROP TABLE IF EXISTS {source}")  # external: its published files stay
        if old_dirs:  # nothing switched away: nothing to delete (the lock's _recover already
            # collected what a crashed writer left in the scratch table)
            self._gc(self.chain_tables(self._view_of(target)), old_dirs)

    def _view_of(self, branch: BaseRelation) -> BaseRelation:
        ident = branch.identifier
        for suffix in (SNAPSHOT_SUFFIX, DELTA_SUFFIX):
            if ident.endswith(suffix):
                ident = ident[: -len(suffix)]
        return branch.incorporate(path={"identifier": ident}, type="view")

    def _gc(self, tables: ChainTables, dirs: Sequence[str]) -> None:
        """Delete directories no partition references any more: attach each to a partition of
        a managed scratch table, then drop those partitions (which deletes their directories).
        Partitions already there were attached by a run that crashed before dropping them."""
        gc = tables.gc
        self._run(f"CREATE TABLE IF NOT EXISTS {gc} (unused INT, d STRING) USING parquet "
                  "PARTITIONED BY (d)")
        pending = [str(r[0]).split("=", 1)[1] for r in self._fetch(f"SHOW PARTITIONS {gc}")]
        stamp = safety.new_run_id()
        adds = [f"PARTITION ({spec_sql(['d'], [f'{stamp}-{i}'])}) LOCATION '{_esc(d)}'"
                for i, d in enumerate(dirs)]
        if adds:
            self._run(f"ALTER TABLE {gc} ADD " + " ".join(adds))
        names = pending + [f"{stamp}-{i}" for i in range(len(dirs))]
        if names:
            self._run(f"ALTER TABLE {gc} DROP IF EXISTS "
                      + ", ".join(f"PARTITION ({spec_sql(['d'], [n])})" for n in names))
        self._run(f"DROP TABLE IF EXISTS {gc}")

    def _drop_scratch(self, tables: ChainTables) -> None:
        """What is left of a run's stage after the publish (which drops a published stage): a
        first run's managed stage, or the raw rows of a merged snapshot write, never published."""
        if self._exists(tables.stage):
            raw = (self._location(tables.stage)
                   if self._properties(tables.stage).get(safety.P_TARGET) else None)
            self._run(f"DROP TABLE IF EXISTS {tables.stage}")
            if raw:
                self._gc(tables, [raw])

    # ---- reads --------------------------------------------------------------------------------
    @available
    def chain_read_sql(self, relation: BaseRelation, partition: Any) -> str:
        """Full state of one partition (all groups, or the groups the spec names) as a SELECT."""
        loaded = self._load(relation)
        plans = loaded.state().plan_partition_read(parse_partition_spec(partition))
        return loaded.renderer().partition_read(plans)

    # ---- compaction --------------------------------------------------------------------------
    @available
    def chain_compact(self, relation: BaseRelation, partition: Any, overwrite: bool = False) -> bool:
        with self._locked(self.chain_tables(relation), "compact_chain"):
            return self._compact(relation, partition, overwrite)

    def _compact(self, relation: BaseRelation, partition: Any, overwrite: bool) -> bool:
        loaded = self._load(relation)
        state, renderer = loaded.state(), loaded.renderer()
        plan = state.plan_compaction(parse_partition_spec(partition), overwrite=bool(overwrite),
                                     history=loaded.history())
        logger.info(f"compact_chain {relation}: {plan.message}")
        if not plan.written:
            return False
        for p in plan.writes:
            logger.info(f"  {state.describe_group(p.group)}: anchor "
                        f"{format_partition(loaded.opts.chain_keys, p.anchor) if p.anchor else 'none'}"
                        f" + {len(p.deltas)} delta partition(s) -> snapshot "
                        f"{format_partition(loaded.opts.chain_keys, p.chain)}")
        written = [p.group + p.chain for p in plan.writes]
        # merged rows land in a fresh directory, then each snapshot partition is switched to it;
        # the view's merged branch for a delta-only partition keeps reading the same rows until
        # the refresh below, because its snapshot branch excludes that partition
        self._create_pub(loaded.tables.snapshot, loaded, renderer.merged(plan.chain, plan.writes),
                         written, safety.new_run_id())
        safety.failpoint("compact.staged")
        self._publish(loaded.tables.snapshot, loaded.tables.pub, loaded.opts.partition_by, written,
                      existing=loaded.snapshots)
        counts = self._fetch(
            f"SELECT {cols_sql(loaded.opts.group_keys) + ', ' if loaded.opts.group_keys else ''}"
            f"count(*) FROM {loaded.tables.snapshot} WHERE {renderer.partitions_predicate(written)}"
            + (f" GROUP BY {cols_sql(loaded.opts.group_keys)}" if loaded.opts.group_keys else ""))
        for row in counts:
            logger.info(f"  wrote {row[-1]} row(s) for {state.describe_group(tuple(str(v) for v in row[:-1]))}")
        stale = stale_from_properties(loaded.props)
        by_values = {parse_partition_path(k, loaded.opts.partition_by): v for k, v in stale.items()}
        after = {format_partition(loaded.opts.partition_by, k): v
                 for k, v in state.stale_after_compaction(plan.writes, by_values).items()}
        if after != stale:
            self._set_stale(loaded.tables, after)
        # the publish added or switched exactly `written` in the snapshot branch (under the lock)
        self._refresh_view(relation, loaded.with_published("snapshot", written))
        return True

    # ---- status -------------------------------------------------------------------------------
    @available
    def chain_status(self, relation: BaseRelation, now: Optional[str] = None) -> str:
        loaded = self._load(relation)
        plan = self._expiration_plan(loaded, self._parse_now(now)) if loaded.opts.expiration_enabled else None
        return status_mod.render(loaded.opts, loaded.state(), stale_from_properties(loaded.props), plan)

    # ---- expiration ---------------------------------------------------------------------------
    @staticmethod
    def _parse_now(now: Optional[str]) -> dt.datetime:
        if not now:
            return dt.datetime.now().replace(microsecond=0)
        text = str(now).strip()
        for fmt in (TS_FORMAT, "%Y-%m-%d %H:%M", "%Y-%m-%d", "%Y-%m-%dT%H:%M:%S"):
            try:
                return dt.datetime.strptime(text, fmt)
            except ValueError:
                continue
        raise ChainPlanError(f"cannot parse now '{now}': expected 'yyyy-MM-dd HH:mm:ss'")

    def _expiration_plan(self, loaded: Loaded, now: dt.datetime) -> "expire.ExpirationPlan":
        opts, state = loaded.opts, loaded.state()
        if not opts.expiration_enabled:
            raise ChainConfigError(f"{loaded.tables.view}: partition_expiration_time is not configured")

        def time_of(group: Values, chain: Values) -> dt.datetime:
            return expire.partition_time(opts.timestamp_pattern, opts.timestamp_formatter,
                                         dict(zip(opts.partition_by, group + chain)))

        # a group with stale snapshots keeps its history until they are recompacted: expiring
        # it would drop the partitions they must be rebuilt from
        held = {state.split(parse_partition_path(k, opts.partition_by))[0]
                for k in stale_from_properties(loaded.props)}
        for g in sorted(held):
            logger.info(f"{loaded.tables.view}: {state.describe_group(g)} has stale snapshots "
                        "(chain_status lists them); not expired until they are recompacted")
        keep = lambda parts: [state.split(p) for p in parts if state.split(p)[0] not in held]  # noqa: E731
        return expire.plan_expiration(keep(state.snapshots), keep(state.deltas), time_of, now,
                                      expire.parse_duration(opts.expiration_time), opts.max_num)

    @available
    def chain_expire(self, relation: BaseRelation, now: Optional[str] = None,
                     dry_run: bool = False) -> List[str]:
        if dry_run:
            loaded = self._load(relation)
            return self._apply_expiration(loaded, self._expiration_plan(loaded, self._parse_now(now)), True)
        with self._locked(self.chain_tables(relation), "expire_chain"):
            loaded = self._load(relation)
            plan = self._expiration_plan(loaded, self._parse_now(now))
            return self._apply_expiration(loaded, plan, dry_run)

    def _apply_expiration(self, loaded: Loaded, plan: "expire.ExpirationPlan", dry_run: bool) -> List[str]:
        opts = loaded.opts
        lines = expire.format_plan(plan, lambda g, c: format_partition(opts.partition_by, g + c))
        verb = "would drop" if dry_run else "dropping"
        header = (f"expire_chain {loaded.tables.view} (cutoff {plan.cutoff:%Y-%m-%d %H:%M:%S}): "
                  + ("nothing to expire" if plan.is_empty() else f"{verb} "
                     f"{len(plan.snapshot_drops())} snapshot and {len(plan.delta_drops())} delta partition(s)"))
        if dry_run or plan.is_empty():
            return [header] + lines
        renderer = loaded.renderer()
        deltas = [g + c for g, c in plan.delta_drops()]
        snaps = [g + c for g, c in plan.snapshot_drops()]
        # The view stops reading the expired partitions first; then deltas go before snapshots:
        # a crash in between leaves extra snapshots, never deltas without their anchor.
        history = history_from_properties(loaded.props)
        for g in plan.groups:
            if g.segments:
                history[format_partition(opts.group_keys, g.group)] = format_partition(
                    opts.chain_keys, g.anchor)
        self._run(f"ALTER TABLE {loaded.tables.snapshot} SET TBLPROPERTIES "
                  f"({tblproperties_sql({P_HISTORY_START: stale_to_property(history)})})")
        self._refresh_view(loaded.tables.view, loaded,
                           loaded.state().without(snapshots=snaps, deltas=deltas))
        self._run(renderer.drop_partitions(str(loaded.tables.delta), deltas))
        safety.failpoint("expire.deltas")
        self._run(renderer.drop_partitions(str(loaded.tables.snapshot), snaps))
        stale = stale_from_properties(loaded.props)
        dropped = {format_partition(opts.partition_by, p) for p in snaps}
        if any(k in dropped for k in stale):
            self._set_stale(loaded.tables, {k: v for k, v in stale.items() if k not in dropped})
        for line in [header] + lines:
            logger.info(line)
        return [header] + lines

    def _auto_expire(self, relation: BaseRelation) -> None:
        """Runs at the end of a chain run when the check interval has elapsed since the last
        check; the last check time lives in the table's properties (survives processes)."""
        loaded = self._load(relation)
        opts = loaded.opts
        now = dt.datetime.now().replace(microsecond=0)
        last = loaded.props.get(P_LAST_EXPIRE_CHECK)
        interval = expire.parse_duration(opts.check_interval) if opts.check_interval else dt.timedelta(0)
        if last and now - dt.datetime.strptime(last, TS_FORMAT) < interval:
            logger.info(f"{relation}: partition expiration checked at {last}; next check after "
                        f"{opts.check_interval}")
            return
        self._apply_expiration(loaded, self._expiration_plan(loaded, now), dry_run=False)
        self._run(f"ALTER TABLE {loaded.tables.snapshot} SET TBLPROPERTIES "
                  f"({tblproperties_sql({P_LAST_EXPIRE_CHECK: now.strftime(TS_FORMAT)})})")

    @available
    def chain_drop_partition(self, relation: BaseRelation, partition: Any, branch: str = "snapshot") -> str:
        """Drop one partition of a branch, refusing a snapshot that later deltas depend on."""
        with self._locked(self.chain_tables(relation), "drop_chain_partition"):
            return self._drop_partition(relation, partition, branch)

    def _drop_partition(self, relation: BaseRelation, partition: Any, branch: str) -> str:
        loaded = self._load(relation)
        state = loaded.state()
        spec = parse_partition_spec(partition)
        missing = [c for c in loaded.opts.partition_by if c not in spec]
        if missing:
            raise ChainPlanError(f"drop_chain_partition {relation}: give every partition column, "
                                 f"missing {missing}")
        values = tuple(spec[c] for c in loaded.opts.partition_by)
        group, chain = state.split(values)
        label = format_partition(loaded.opts.partition_by, values)
        if branch not in BRANCHES:
            raise ChainPlanError(f"drop_chain_partition: branch must be one of {list(BRANCHES)}")
        parts = state.snapshots if branch == "snapshot" else state.deltas
        if values not in parts:
            return f"{relation}: no {branch} partition {label}; nothing dropped"
        if branch == "snapshot":
            error = expire.check_snapshot_drop(group, chain, state.snapshot_chains().get(group, []),
                                               state.delta_chains().get(group, []), state.sort_key)
            if error:
                raise ChainPlanError(f"drop_chain_partition {relation} {label}: {error}")
        table = loaded.tables.snapshot if branch == "snapshot" else loaded.tables.delta
        gone = {"snapshots" if branch == "snapshot" else "deltas": [values]}
        self._refresh_view(relation, loaded, state.without(**gone))
        self._run(loaded.renderer().drop_partitions(str(table), [values]))
        return f"{relation}: dropped {branch} partition {label}"
