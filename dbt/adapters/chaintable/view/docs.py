"""What dbt's docs say of a chain (README: dbt conventions): a model's descriptions stored as
comments on the view and on both branch tables (persist_docs), and the chain's relations named
in the view's entry of `dbt docs generate`'s catalog. catalog.json keeps only the relations that
are nodes of the project, and a branch is none, so the view's entry carries them as statistics
(dbt docs lists them under the model's details)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from dbt.adapters.chaintable.base import statements as S
from dbt.adapters.chaintable.base.config import ModelSettings
from dbt.adapters.chaintable.chain.catalog import Catalog
from dbt.adapters.chaintable.chain.tables import (
    CHANGES_SUFFIX,
    CUMULATIVE_SUFFIX,
    DELTA_SUFFIX,
    MAP_SUFFIX,
    SNAPSHOT_SUFFIX,
    ChainTables,
)

# (statistic id, relation suffix, label, what it holds), in the order dbt docs lists them
CHAIN_RELATIONS = (
    ("chain_snapshot", SNAPSHOT_SUFFIX, "Snapshot branch", "full states of some days"),
    ("chain_delta", DELTA_SUFFIX, "Delta branch", "each run's changes, a partition per day"),
    (
        "chain_cumulative",
        CUMULATIVE_SUFFIX,
        "Cumulative delta",
        "derived: every key changed since its anchor, per delta-only day",
    ),
    ("chain_map", MAP_SUFFIX, "Mapping table", "derived: what feeds each older delta-only day"),
    (
        "chain_changes",
        CHANGES_SUFFIX,
        "Stored changes",
        "derived (chain_store_changes): each day's changes from the group's day before",
    ),
)


class Docs:
    def __init__(self, catalog: Catalog):
        self.catalog = catalog
        self.run = catalog.runner.run

    def persist(
        self,
        settings: ModelSettings,
        tables: ChainTables,
        description: str,
        columns: Mapping[str, str],
    ) -> None:
        """persist_docs: the model's description on the view and both branches; each column's
        on both branches where it differs from what they hold. Spark keeps no column comment
        of a view's own (its columns' comments are its query's) and refuses one on a partition
        column after CREATE TABLE, so those are left as they are."""
        relation, with_columns = settings.persist_docs
        if relation and description:
            self.run(S.set_view_properties(str(tables.view), {"comment": description}))
            for branch in (tables.snapshot, tables.delta):
                self.catalog.set_properties(branch, {"comment": description})
        if not (with_columns and columns):
            return
        parts = {c.lower() for c in settings.opts.partition_by}
        wanted = {c.lower(): (c, d) for c, d in columns.items() if d and c.lower() not in parts}
        for branch in (tables.snapshot, tables.delta):
            for name, comment in self._comments(branch).items():
                column, doc = wanted.get(name.lower(), (None, None))
                if column is not None and doc != comment:
                    self.run(S.comment_column(str(branch), name, str(doc)))

    def _comments(self, relation: Any) -> dict[str, str | None]:
        """Each column's comment (DESCRIBE TABLE, before its partition information)."""
        out: dict[str, str | None] = {}
        for row in self.catalog.runner.fetch(S.describe_table(str(relation))):
            name = str(row[0] or "").strip()
            if not name or name.startswith("#"):
                break
            out[name] = row[2] if len(row) > 2 else None
        return out


def column_docs(node: Mapping[str, Any] | None) -> dict[str, str]:
    """{column: description} of a model node (dbt's `model` as the materialization sees it)."""
    cols = (node or {}).get("columns") or {}
    return {str(c): str(v.get("description") or "") for c, v in cols.items()}


def with_chain_relations(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Catalog rows (one per column of each relation of a schema, as dbt-spark lists them) with
    the chain's relations added as statistics of each chain view's rows: a view `t` with
    `t__snapshot` and `t__delta` beside it."""
    out = [dict(r) for r in rows]
    names = {(str(r.get("table_schema")), str(r.get("table_name")).lower()) for r in out}
    for row in out:
        schema, name = str(row.get("table_schema")), str(row.get("table_name"))
        if str(row.get("table_type")).lower() != "view" or not all(
            (schema, (name + s).lower()) in names for s in (SNAPSHOT_SUFFIX, DELTA_SUFFIX)
        ):
            continue
        for stat, suffix, label, holds in CHAIN_RELATIONS:
            if (schema, (name + suffix).lower()) in names:
                row[f"stats:{stat}:label"] = label
                row[f"stats:{stat}:value"] = f"{schema}.{name}{suffix}"
                row[f"stats:{stat}:description"] = holds
                row[f"stats:{stat}:include"] = True
    return out


def catalog_with_chain_relations(table: Any) -> Any:
    """dbt-spark's catalog of a schema (an agate table) with with_chain_relations applied. Its
    columns keep their names and types (built again from its rows, a schema without relations
    lost every column, and dbt's catalog then failed on it); the statistics columns follow."""
    import agate

    rows = with_chain_relations(dict(zip(table.column_names, r, strict=True)) for r in table.rows)
    names, types = list(table.column_names), list(table.column_types)
    for row in rows:
        for key in row:
            if key not in names:
                names.append(key)
                types.append(agate.Boolean() if key.endswith(":include") else agate.Text())
    return agate.Table([tuple(r.get(k) for k in names) for r in rows], names, types)
