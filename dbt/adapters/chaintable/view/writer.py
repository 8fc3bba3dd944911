"""The view `t` that reads the chain, and the mapping table `t__chain_map` of older days."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import replace

from dbt.adapters.base.relation import BaseRelation
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.chaintable.base import statements as S
from dbt.adapters.chaintable.base import versions
from dbt.adapters.chaintable.base.keys import DEFAULT_VIEW_RECENT, P_VIEW_MAP, P_VIEW_RECENT
from dbt.adapters.chaintable.base.partitions import Values
from dbt.adapters.chaintable.chain.catalog import Catalog, Loaded
from dbt.adapters.chaintable.chain.state import ChainState
from dbt.adapters.chaintable.cumulative import sql as cumulative_sql
from dbt.adapters.chaintable.cumulative.plan import Cumulative, served_days
from dbt.adapters.chaintable.view.fit import plan_view
from dbt.adapters.chaintable.view.layout import view_branches
from dbt.adapters.chaintable.view.sql import MAP_STAMP, MAP_VERSION, ViewSql

# CREATE OR REPLACE VIEW ... WITH SCHEMA EVOLUTION (Spark 4): the view takes its query's schema
# as it is, without the projection of casts to a stored schema that Spark adds otherwise; that
# projection doubled the time to plan a one-day read (measured: 0.38 -> 0.18 s for the
# benchmark's compacted day). An older Spark refuses the clause: then the plain statement.
VIEW_CLAUSES = (" WITH SCHEMA EVOLUTION", "")


class ViewWriter:
    def __init__(self, catalog: Catalog):
        self.catalog = catalog
        self.run = catalog.runner.run
        self._clauses = list(VIEW_CLAUSES)  # the first one the server took, for this process
        # the mapping tables this process wrote a version into, for this process: the INSERT
        # names the stamp column, so they have it, and keep it (nothing drops the column, and a
        # table dropped is created again with it, map_create): a later version's insert need
        # not describe the table again
        self._stamped: set[str] = set()

    def refresh(
        self,
        loaded: Loaded,
        state: ChainState | None = None,
        unserved: Iterable[Values] = (),
        view_exists: bool | None = None,
    ) -> Loaded:
        """Point the view at `state` (default: the catalog's as `loaded` says). Before
        partitions are removed the view is pointed at the state without them, so it never reads
        a half-dropped chain. Delta-only days are read from the cumulative delta where it holds
        them for `state`, but for the days `unserved` names (group + chain values: inputs about
        to change in place); then the cumulative partitions that serve no day of `state` are
        dropped. `view_exists`: whether the view exists, when the caller knows (else asked).
        Returns `loaded` with what the refresh recorded."""
        state = state or loaded.state()
        loaded = self._refresh(loaded, state, set(unserved), view_exists)
        if loaded.cumulative is not None and not loaded.opts.cumulative_delta:
            self.run(S.drop_table(str(loaded.tables.cumulative)))  # switched off: not kept
            return loaded.with_cumulative(None)
        cum = Cumulative.of(loaded, state)
        unserved_parts = [p + (s,) for p in unserved for s in sorted(cum.stored.get(p, ()))]
        garbage = sorted(set(cum.garbage()) | set(unserved_parts))
        if garbage and loaded.cumulative is not None:
            self.catalog.retire(
                "cumulative partitions no day reads",
                cumulative_sql.drop(ViewSql.of(loaded), garbage),
            )
            loaded = loaded.with_cumulative([p for p in loaded.cumulative if p not in garbage])
        return loaded

    def _refresh(
        self, loaded: Loaded, state: ChainState, unserved: set[Values], view_exists: bool | None
    ) -> Loaded:
        renderer, cmap = ViewSql.of(loaded), str(loaded.tables.cmap)
        recent = int(loaded.props.get(P_VIEW_RECENT) or DEFAULT_VIEW_RECENT)
        branches = view_branches(state)
        plans = [p for _, day in branches for p in day]
        serving = {k: v for k, v in served_days(loaded, plans, state).items() if k not in unserved}
        # snapshot partitions `state` leaves out but the table still holds are dropped next:
        # the view stops reading them now, so the drop after the reader grace fails no query
        hidden = sorted(set(loaded.snapshots) - state.snapshots)
        # the layout whose text the metastore keeps (view/fit.py)
        plan = plan_view(renderer, state, branches, recent, serving, hidden, cmap)
        # older delta-only partitions: a new version of the mapping table first (the current
        # view reads its own version), then the view, then the record of which version it reads
        # and its digest, then the versions no view reads any more. A refresh whose mapped reads
        # are those of the recorded version reuses it (a daily run only adds newer partitions).
        # A mapped day the cumulative delta serves is mapped to its anchor and C partition.
        rows = plan.map_rows(serving)
        digest = hashlib.sha1("\n".join(rows).encode()).hexdigest()[:16] if rows else ""
        recorded = (loaded.props.get(P_VIEW_MAP) or "").split()
        loaded, version, reuse, held = self._mapping(loaded, renderer, rows, recorded, digest)
        self._replace(loaded.tables.view, plan.text((cmap, version), serving), view_exists)
        if reuse:
            return loaded
        record = f"{version} {digest}" if rows else ""
        if record != (loaded.props.get(P_VIEW_MAP) or ""):
            self.catalog.set_properties(loaded.tables.snapshot, {P_VIEW_MAP: record})
            loaded = loaded.with_props({P_VIEW_MAP: record})
        if not rows:
            # the table stays: a reader in another session that resolved the previous view
            # just before it was altered still looks it up (tests/functional/test_cluster.py)
            return loaded
        # versions listed before this one's insert but the one the previous view read, for the
        # same reason (the next refresh that writes a version drops it; none listed: what a
        # crash between the record and the drop left goes then too)
        keep = {version, recorded[0] if recorded else version}
        old = [[v] for v in held or [] if v not in keep]
        self.catalog.retire(
            "mapping versions no view reads", S.drop_partitions(cmap, [MAP_VERSION], old)
        )
        return loaded

    def _mapping(
        self,
        loaded: Loaded,
        renderer: ViewSql,
        mapped: Sequence[str],
        recorded: Sequence[str],
        digest: str,
    ) -> tuple[Loaded, str, bool, list[str] | None]:
        """The mapping's version of the rows `mapped` (ViewPlan.map_rows, their `digest`): the
        `recorded` one reused, or a new one written. Returns the catalog, the version, whether
        it was reused, and the versions the table held, listed when a version is written
        (None: not listed)."""
        cmap = str(loaded.tables.cmap)
        # the mapping table exists while a version is recorded, and the recorded version's
        # partition with it (a refresh drops only other versions; both go together otherwise):
        # a recorded version of the same digest is reused without listing them (a listing
        # under the lock says whether the table is there: dropped by hand, it is created again)
        exists = bool(mapped and recorded) and self.catalog.exists(
            loaded.tables.cmap, loaded.cmap_exists
        )
        reuse = bool(exists) and len(recorded) == 2 and recorded[1] == digest
        held: list[str] | None = None  # the versions the table holds, listed when written
        if exists and not reuse:
            held = self.catalog.partition_versions(loaded.tables.cmap, exists=True)
        version = recorded[0] if reuse else (versions.new_run_id() if mapped else "")
        if mapped and not reuse:
            if held is None:
                self.run(renderer.map_create(cmap))
                loaded = replace(loaded, cmap_exists=True)
            elif cmap not in self._stamped and not self._has_stamp(loaded):
                self.run(renderer.map_add_stamp(cmap))  # created before it had the column
            self.run(renderer.map_insert_rows(cmap, version, mapped))
            self._stamped.add(cmap)
        return loaded, version, reuse, held

    def _has_stamp(self, loaded: Loaded) -> bool:
        """Whether the mapping table (it exists) has the stamp column, asked (DESCRIBE)."""
        return MAP_STAMP in {c.lower() for c, _ in self.catalog.describe(loaded.tables.cmap)}

    def _replace(self, view: BaseRelation, sql: str, exists: bool | None = None) -> None:
        """Point the view at `sql`. An existing view is altered in place: Spark runs CREATE OR
        REPLACE VIEW as a drop and a create in the metastore, so a reader in another session
        could find no view in between (tests/functional/test_cluster.py); ALTER VIEW AS
        changes the stored text and schema in one metastore update and keeps the view's schema
        mode. A view that `exists` says is there but is not (dropped meanwhile) is created."""
        if self.catalog.exists(view) if exists is None else exists:
            try:
                self.run(S.alter_view(str(view), sql))
                self.catalog.changed()
                return
            except DbtRuntimeError:
                if exists is None or self.catalog.exists(view):
                    raise
        for i, clause in enumerate(list(self._clauses)):
            try:
                self.run(S.replace_view(str(view), sql, clause))
                self.catalog.changed()
                del self._clauses[:i]
                return
            except DbtRuntimeError:
                if i == len(self._clauses) - 1:
                    raise
