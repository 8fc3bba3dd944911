"""The chaintable adapter: dbt-spark plus the chain table runtime.

Every statement goes through the dbt connection (`_fetch`/`_run`), never a PySpark object, so
session, thrift, odbc and http connections all work the same. The runtime lists partitions and
table properties from the catalog, asks planner.py what to do and renders it with sqlgen.py.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from dbt.adapters.base import available
from dbt.adapters.base.relation import BaseRelation
from dbt.adapters.events.logging import AdapterLogger
from dbt.adapters.spark.impl import SparkAdapter
from dbt.adapters.spark.relation import SparkRelation

from dbt.adapters.chaintable import expire
from dbt.adapters.chaintable.connections import ChainTableConnectionManager
from dbt.adapters.chaintable.merge import cols_sql, q
from dbt.adapters.chaintable.options import (
    BRANCHES, P_BRANCH, P_LAST_EXPIRE_CHECK, P_STALE, ChainConfigError, ChainOptions,
    stale_from_properties, stale_to_property,
)
from dbt.adapters.chaintable.planner import (
    ChainPlanError, ChainState, Values, format_partition, parse_partition_path,
    parse_partition_spec,
)
from dbt.adapters.chaintable.sqlgen import Renderer, create_table_sql, tblproperties_sql
from dbt.adapters.chaintable import status as status_mod

logger = AdapterLogger("chaintable")

SNAPSHOT_SUFFIX = "__snapshot"
DELTA_SUFFIX = "__delta"
STAGE_SUFFIX = "__chain_stage"
TS_FORMAT = "%Y-%m-%d %H:%M:%S"


@dataclass
class ChainTables:
    view: BaseRelation
    snapshot: BaseRelation
    delta: BaseRelation
    stage: BaseRelation

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
    main_sql: str = ""

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
                           delta=rel(DELTA_SUFFIX, "table"), stage=rel(STAGE_SUFFIX, "table"))

    def _load(self, relation: BaseRelation) -> Loaded:
        tables = self.chain_tables(relation)
        if not self._exists(tables.snapshot):
            raise ChainConfigError(
                f"'{relation}' is not a chain table: {tables.snapshot} does not exist "
                "(run the chain_incremental model first)")
        props = self._properties(tables.snapshot)
        opts = ChainOptions.from_properties(str(tables.snapshot), props)
        columns = self._describe(tables.snapshot)
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
                      full_refresh: bool, full_refresh_flag: bool) -> ChainRun:
        """Validate the config and decide which branch this run writes (SPEC §1 Runs)."""
        config = dict(config)
        opts = ChainOptions.from_config(model, config)
        tables = self.chain_tables(relation)
        exists = self._exists(tables.snapshot) and self._exists(tables.delta)
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
        branch = "snapshot" if (not exists or full_refresh or forced == "snapshot") else "delta"
        logger.info(f"chain_incremental model '{model}': writing the {branch} branch"
                    + (" (full refresh)" if full_refresh and exists else ""))
        return ChainRun(model, tables, opts, branch, full_refresh, exists, config)

    @available
    def chain_is_incremental(self, relation: BaseRelation, config: Mapping[str, Any],
                             full_refresh: bool) -> bool:
        if full_refresh or dict(config).get("chain_branch") == "snapshot":
            return False
        tables = self.chain_tables(relation)
        return self._exists(tables.snapshot) and self._exists(tables.delta)

    @available
    def chain_stage_sql(self, run: ChainRun, compiled_code: str) -> List[str]:
        stage = run.tables.stage
        return [f"DROP TABLE IF EXISTS {stage}",
                f"CREATE TABLE {stage} USING parquet AS\n{compiled_code}"]

    def _check_stage(self, run: ChainRun, columns: List[Tuple[str, str]], opts: ChainOptions) -> List[Values]:
        """Bad input is refused before anything is written (SPEC §5); returns the partitions."""
        stage, model = run.tables.stage, run.model
        parts = cols_sql(opts.partition_by)
        pk_null = " OR ".join(f"{q(c)} IS NULL" for c in opts.primary_key)
        rows = self._fetch(f"SELECT {cols_sql(opts.primary_key)} FROM {stage} WHERE {pk_null} LIMIT 1")
        if rows:
            bad = [c for c, v in zip(opts.primary_key, rows[0]) if v is None]
            raise ChainConfigError(
                f"chain_incremental model '{model}': NULL in primary key column(s) {bad}, e.g. key "
                f"{self._key_text(opts.primary_key, rows[0])}; nothing was written")
        from dbt.adapters.chaintable import merge  # the merge rules decide what is refused

        names = [c for c, _ in columns]
        source = f"SELECT * FROM {stage}"
        sql = merge.bad_kind_sql(opts, source)
        rows = self._fetch(sql) if sql else []
        if rows:
            raise ChainConfigError(
                f"chain_incremental model '{model}': rowkind_field '{opts.rowkind_field}' must be "
                f"one of {list(merge.ROW_KINDS)}, got {rows[0][-1]!r} for key "
                f"{self._key_text(opts.primary_key, rows[0])}; nothing was written")
        sql = merge.refused_sql(opts, names, source)
        rows = self._fetch(sql) if sql else []
        if rows:
            raise ChainConfigError(
                f"chain_incremental model '{model}': {merge.refusal(opts, names)}; got a "
                f"{rows[0][-1]!r} row for key {self._key_text(opts.primary_key, rows[0])}; "
                "nothing was written")
        sql = merge.tied_sql(opts, names, source)
        rows = self._fetch(sql) if sql else []
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
        chain_partition = run.config.get("chain_partition")
        if chain_partition:
            spec = parse_partition_spec(chain_partition)
            self._check_chain_partition(run, opts, spec)
            typed = Renderer(opts, [c for c, _ in columns], dict(columns), "", "")
            cond = " AND ".join(f"{q(k)} = {typed.lit(k, v)}" for k, v in spec.items())
            rows = self._fetch(f"SELECT DISTINCT {parts} FROM {stage} WHERE NOT ({cond}) LIMIT 1")
            if rows:
                raise ChainConfigError(
                    f"chain_incremental model '{model}': rows outside chain_partition {spec}, e.g. "
                    f"partition {format_partition(opts.partition_by, [str(v) for v in rows[0]])}; "
                    "nothing was written")
        return [tuple(str(v) for v in r) for r in self._fetch(f"SELECT DISTINCT {parts} FROM {stage}")]

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

    @available
    def chain_plan_write(self, run: ChainRun) -> str:
        """Check the staged rows, create the branches if needed, prepare the partitions this run
        writes besides the model's rows; returns the main INSERT for the materialization to run."""
        try:
            return self._plan_write(run)
        except ChainConfigError:
            self._run(f"DROP TABLE IF EXISTS {run.tables.stage}")  # refused: leave nothing behind
            raise

    def _plan_write(self, run: ChainRun) -> str:
        tables, opts = run.tables, run.opts
        stage_cols = self._describe(tables.stage)
        opts.validate_columns(run.model, [c for c, _ in stage_cols])
        staged = self._check_stage(run, stage_cols, opts)
        props = opts.to_properties()
        if run.full_refresh and run.exists:
            loaded = self._load(tables.view)
            logger.info(f"full refresh of '{run.model}': dropping {len(loaded.snapshots)} snapshot "
                        f"and {len(loaded.deltas)} delta partitions")
        if run.full_refresh or not run.exists:
            for rel in (tables.view, tables.snapshot, tables.delta):
                self._run(f"DROP {'VIEW' if rel is tables.view else 'TABLE'} IF EXISTS {rel}")
            ordered = self._table_order(stage_cols, opts)
            for branch, rel in (("snapshot", tables.snapshot), ("delta", tables.delta)):
                self._run(self._create_sql(run, rel, ordered, {**props, P_BRANCH: branch}))
            table_cols = ordered
        else:
            table_cols = self._reconcile_schema(run, self._table_order(stage_cols, opts),
                                                self._describe(tables.snapshot))
            for rel in (tables.snapshot, tables.delta):
                self._run(f"ALTER TABLE {rel} SET TBLPROPERTIES ({tblproperties_sql(props)})")
        loaded = self._load(tables.view)
        renderer = loaded.renderer()
        state = loaded.state()
        target = tables.snapshot if run.branch == "snapshot" else tables.delta
        empties = self._empty_partitions(run, state, staged)
        run.written = sorted(set(staged) | set(empties))
        for part in empties:
            self._run(renderer.empty_partition(str(target), part))
        source = f"SELECT {cols_sql(renderer.columns)} FROM {tables.stage}"
        if run.branch == "snapshot" and self._snapshot_write_needs_merge(opts):
            source = renderer.batch_merge(source)
        run.main_sql = renderer.insert_overwrite(str(target), source)
        logger.info(f"'{run.model}': {len(staged)} partition(s) with rows, {len(empties)} empty "
                    f"partition(s) to the {run.branch} branch")
        return run.main_sql

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
                    props: Dict[str, str]) -> str:
        cfg = run.config
        user_props = cfg.get("tblproperties") or {}
        location = None
        if cfg.get("location_root"):
            location = f"{cfg['location_root'].rstrip('/')}/{rel.identifier}"
        clustered = cfg.get("clustered_by") or ()
        if isinstance(clustered, str):
            clustered = [clustered]
        return create_table_sql(str(rel), cols, run.opts, {**user_props, **props},
                                file_format=cfg.get("file_format") or "parquet", location=location,
                                clustered_by=clustered, buckets=cfg.get("buckets"))

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

    @available
    def chain_finish(self, run: ChainRun) -> None:
        """After the main write: invalidate snapshots (delta runs), record stale ones, refresh the
        view, drop the stage, and expire when configured and due."""
        tables = run.tables
        loaded = self._load(tables.view)
        state = loaded.state()
        renderer = loaded.renderer()
        stale = stale_from_properties(loaded.props)
        written_paths = {format_partition(run.opts.partition_by, p) for p in run.written}
        if run.branch == "delta":
            invalidated = [p for p in run.written if p in state.snapshots]
            if invalidated:
                logger.info(f"'{run.model}': rewritten delta partition(s) invalidate snapshot "
                            f"partition(s) {[format_partition(run.opts.partition_by, p) for p in invalidated]}")
                self._run(renderer.drop_partitions(str(tables.snapshot), invalidated))
            for snap, delta in state.stale_after_delta_write(run.written).items():
                stale[format_partition(run.opts.partition_by, snap)] = format_partition(
                    run.opts.partition_by, delta)
        else:
            stale = {k: v for k, v in stale.items() if k not in written_paths}
        if stale != stale_from_properties(loaded.props):
            self._set_stale(tables, stale)
        self._run(f"DROP TABLE IF EXISTS {tables.stage}")
        self._refresh_view(tables.view)
        if run.opts.expiration_enabled:
            self._auto_expire(tables.view)

    def _set_stale(self, tables: ChainTables, stale: Mapping[str, str]) -> None:
        self._run(f"ALTER TABLE {tables.snapshot} SET TBLPROPERTIES "
                  f"({tblproperties_sql({P_STALE: stale_to_property(stale)})})")

    def _refresh_view(self, relation: BaseRelation) -> Loaded:
        loaded = self._load(relation)
        sql = loaded.renderer().view(loaded.state())
        self._run(f"CREATE OR REPLACE VIEW {loaded.tables.view} AS\n{sql}")
        return loaded

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
        loaded = self._load(relation)
        state, renderer = loaded.state(), loaded.renderer()
        plan = state.plan_compaction(parse_partition_spec(partition), overwrite=bool(overwrite))
        logger.info(f"compact_chain {relation}: {plan.message}")
        if not plan.written:
            return False
        for p in plan.writes:
            logger.info(f"  {state.describe_group(p.group)}: anchor "
                        f"{format_partition(loaded.opts.chain_keys, p.anchor) if p.anchor else 'none'}"
                        f" + {len(p.deltas)} delta partition(s) -> snapshot "
                        f"{format_partition(loaded.opts.chain_keys, p.chain)}")
        written = [p.group + p.chain for p in plan.writes]
        self._run(renderer.insert_overwrite(str(loaded.tables.snapshot),
                                            renderer.merged(plan.chain, plan.writes)))
        # A group whose merged state is empty (every key deleted) still gets its snapshot
        # partition, created after the data so a crash never leaves an empty one shadowing rows.
        present = set(self._partitions(loaded.tables.snapshot, loaded.opts.partition_by))
        for part in written:
            if part not in present:
                self._run(renderer.empty_partition(str(loaded.tables.snapshot), part))
        counts = self._fetch(
            f"SELECT {cols_sql(loaded.opts.group_keys) + ', ' if loaded.opts.group_keys else ''}"
            f"count(*) FROM {loaded.tables.snapshot} WHERE {renderer.partitions_predicate(written)}"
            + (f" GROUP BY {cols_sql(loaded.opts.group_keys)}" if loaded.opts.group_keys else ""))
        for row in counts:
            logger.info(f"  wrote {row[-1]} row(s) for {state.describe_group(tuple(str(v) for v in row[:-1]))}")
        stale = stale_from_properties(loaded.props)
        paths = {format_partition(loaded.opts.partition_by, p) for p in written}
        if any(k in paths for k in stale):
            self._set_stale(loaded.tables, {k: v for k, v in stale.items() if k not in paths})
        self._refresh_view(relation)
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

        return expire.plan_expiration([state.split(p) for p in state.snapshots],
                                      [state.split(p) for p in state.deltas], time_of, now,
                                      expire.parse_duration(opts.expiration_time), opts.max_num)

    @available
    def chain_expire(self, relation: BaseRelation, now: Optional[str] = None,
                     dry_run: bool = False) -> List[str]:
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
        # Deltas first: a crash in between leaves extra snapshots, never deltas without anchor.
        self._run(renderer.drop_partitions(str(loaded.tables.delta), deltas))
        self._run(renderer.drop_partitions(str(loaded.tables.snapshot), snaps))
        stale = stale_from_properties(loaded.props)
        dropped = {format_partition(opts.partition_by, p) for p in snaps}
        if any(k in dropped for k in stale):
            self._set_stale(loaded.tables, {k: v for k, v in stale.items() if k not in dropped})
        self._refresh_view(loaded.tables.view)
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
                raise ChainPlanError(f"drop_chain_partition {relation}: {error}")
        table = loaded.tables.snapshot if branch == "snapshot" else loaded.tables.delta
        self._run(loaded.renderer().drop_partitions(str(table), [values]))
        self._refresh_view(relation)
        return f"{relation}: dropped {branch} partition {label}"
