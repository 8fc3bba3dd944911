"""What the catalog says about a chain table: its relations' names, properties, columns and the
partitions of both branches, read with a few statements and returned as one `Loaded` value."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from dbt.adapters.base.relation import BaseRelation

from dbt.adapters.chaintable.base import statements as S
from dbt.adapters.chaintable.base.keys import (
    P_HISTORY_START,
    P_STALE,
    history_from_properties,
    stale_from_properties,
    stale_to_property,
)
from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.base.partitions import (
    ChainPlanError,
    Layout,
    Values,
    format_partition,
    parse_partition_path,
)
from dbt.adapters.chaintable.base.properties import read_back
from dbt.adapters.chaintable.base.runner import Runner, logger
from dbt.adapters.chaintable.base.values import ChainConfigError
from dbt.adapters.chaintable.chain.state import ChainState
from dbt.adapters.chaintable.chain.tables import (
    STAMP_COLUMN,
    ChainTables,
    listed,
    name_of,
    schema_of,
)


@dataclass(frozen=True)
class Loaded:
    """One chain table as the catalog describes it at one moment."""

    tables: ChainTables
    opts: ChainOptions
    columns: tuple[tuple[str, str], ...]
    props: Mapping[str, str]
    snapshots: tuple[Values, ...]
    deltas: tuple[Values, ...]
    # partitions of the cumulative delta (values + stamp); None: the table does not exist
    cumulative: tuple[Values, ...] | None = None
    # whether the mapping table t__chain_map exists, when a listing said so (None: not known)
    cmap_exists: bool | None = None

    @property
    def layout(self) -> Layout:
        return Layout.of(self.opts)

    @property
    def column_names(self) -> list[str]:
        return [c for c, _ in self.columns]

    @property
    def types(self) -> dict[str, str]:
        return dict(self.columns)

    def state(self) -> ChainState:
        return ChainState.build(self.opts, self.snapshots, self.deltas, self.types)

    def stale(self) -> dict[str, str]:
        """{path of a stale snapshot: path of the rewritten delta it was built on}."""
        return stale_from_properties(self.props)

    def stale_after_delta_write(
        self, written: Sequence[Values], dropped: Sequence[Values]
    ) -> dict[str, str]:
        """The stale marks once delta partitions `written` are published (this catalog holds
        them) and snapshot partitions `dropped` are gone: later snapshots built on a rewritten
        delta are marked, and a dropped snapshot keeps no mark. One rule for a run and for the
        recovery that finishes a crashed run's write."""
        lay, stale = self.layout, self.stale()
        for snap, delta in self.state().stale_after_delta_write(written).items():
            stale[lay.path(snap)] = lay.path(delta)
        for p in dropped:
            stale.pop(lay.path(p), None)
        return stale

    def history(self) -> dict[Values, Values]:
        """{group: oldest snapshot kept by expiration}, as values."""
        lay = self.layout
        return {
            lay.parse_group(g): lay.parse_chain(c)
            for g, c in history_from_properties(self.props).items()
        }

    def with_published(self, branch: str, parts: Sequence[Values]) -> Loaded:
        """This catalog state after a publish of `parts` to `branch` (it adds or switches
        exactly them), so the caller need not list the partitions again."""
        have = self.snapshots if branch == "snapshot" else self.deltas
        added = have + tuple(p for p in parts if p not in set(have))
        if branch == "snapshot":
            return replace(self, snapshots=added)
        return replace(self, deltas=added)

    def without(self, snapshots: Sequence[Values] = (), deltas: Sequence[Values] = ()) -> Loaded:
        """This catalog state once these partitions are dropped."""
        gone_s, gone_d = set(snapshots), set(deltas)
        return replace(
            self,
            snapshots=tuple(p for p in self.snapshots if p not in gone_s),
            deltas=tuple(p for p in self.deltas if p not in gone_d),
        )

    def with_props(self, props: Mapping[str, str]) -> Loaded:
        return replace(self, props={**self.props, **props})

    def with_cumulative(self, parts: Sequence[Values] | None) -> Loaded:
        return replace(self, cumulative=None if parts is None else tuple(parts))


# how long a session of a shared server keeps a table's schema cached (Spark's default: for
# good); a table given new columns reads with its old ones in a session that cached it before
METADATA_CACHE_TTL = "spark.sql.metadataCacheTTLSeconds"
_UNITS = {"ms": 0.001, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}


def duration_seconds(text: str) -> float | None:
    """A Spark time setting (`5`, `5s`, `2min`, `-1000ms`; seconds without a unit) in seconds,
    None when it is not positive or not a duration."""
    m = re.fullmatch(r"\s*(-?\d+(?:\.\d+)?)\s*([a-z]*)\s*", text.lower())
    if not m or m.group(2) not in {"", *_UNITS}:
        return None
    seconds = float(m.group(1)) * _UNITS.get(m.group(2), 1)
    return seconds if seconds > 0 else None


# seconds a reader of another session may still read what a change stopped pointing at (a
# query planned just before it): files are deleted only that long after the change
READER_GRACE_ENV = "CHAINTABLE_READER_GRACE_SECONDS"
DEFAULT_READER_GRACE = 15.0


class Catalog:
    """Catalog reads and property writes through the runner."""

    def __init__(self, runner: Runner):
        self.runner = runner
        self._changed_at: float | None = None  # time.monotonic() of the last change readers see

    # ---- readers of other sessions ----------------------------------------------------------
    def changed(self) -> None:
        """What readers see changed now (a view altered, a partition switched)."""
        self._changed_at = time.monotonic()

    def reader_grace(self) -> float:
        raw = os.environ.get(READER_GRACE_ENV)
        if raw:
            return max(float(raw), 0.0)
        return DEFAULT_READER_GRACE if self.runner.shared_server() else 0.0

    def retire(self, what: str, *drops: str | None) -> None:
        """Run `drops`, which delete what the last change stopped pointing at, once the reader
        grace has passed since that change: a query another session planned just before the
        change still lists and reads it (no wait in an embedded session: no other readers).
        Every such deletion goes through here, so none can forget the grace."""
        if not any(drops):
            return
        if self._changed_at is not None:
            wait = self.reader_grace() - (time.monotonic() - self._changed_at)
            if wait > 0:
                logger.info(f"waiting {wait:.1f}s for queries planned before the change ({what})")
                time.sleep(wait)
        for sql in drops:
            self.runner.run(sql)

    # ---- listings and descriptions ----------------------------------------------------------
    def exists(self, relation: BaseRelation, known: bool | None = None) -> bool:
        """Whether `relation` exists: `known` when a listing already said (listed()), else asked."""
        if known is not None:
            return known
        return bool(self.runner.fetch(S.show_tables(schema_of(relation), name_of(relation))))

    def metadata_cache_ttl(self) -> float | None:
        """Seconds after which other sessions of the server read a table's schema again, None
        when they keep it (METADATA_CACHE_TTL unset)."""
        rows = self.runner.fetch(S.show_conf(METADATA_CACHE_TTL))
        return duration_seconds(str(rows[0][1])) if rows else None

    def names_like(self, schema: str, pattern: str) -> set[str]:
        """Lower-case names of the tables and views matching `pattern`."""
        return {str(r[1]).lower() for r in self.runner.fetch(S.show_tables(schema, pattern))}

    def branches_exist(self, tables: ChainTables) -> bool:
        """Both branches exist (one listing: `|` separates alternatives in SHOW TABLES LIKE)."""
        snapshot, delta = name_of(tables.snapshot), name_of(tables.delta)
        names = self.names_like(schema_of(tables.snapshot), f"{snapshot}|{delta}")
        return {snapshot.lower(), delta.lower()} <= names

    def describe(self, relation: Any) -> list[tuple[str, str]]:
        out = []
        for row in self.runner.fetch(S.describe_table(str(relation))):
            name = (row[0] or "").strip()
            if not name or name.startswith("#"):
                break
            out.append((name, str(row[1]).strip()))
        return out

    def describe_query(self, sql: str) -> list[tuple[str, str]]:
        return [
            (str(r[0]).strip(), str(r[1]).strip())
            for r in self.runner.fetch(S.describe_query(sql))
            if r[0] and not str(r[0]).startswith("#")
        ]

    def properties(self, relation: Any) -> dict[str, str]:
        """The table's properties, each as stored: never a value Spark redacted (read_back)."""
        rows = self.runner.fetch(S.show_properties(str(relation)))
        return read_back(str(relation), [(str(r[0]), str(r[1])) for r in rows])

    def partition_paths(self, relation: Any) -> list[str]:
        return [str(r[0]) for r in self.runner.fetch(S.show_partitions(str(relation)))]

    def partitions(self, relation: Any, partition_by: Sequence[str]) -> list[Values]:
        return [parse_partition_path(p, partition_by) for p in self.partition_paths(relation)]

    def partition_versions(
        self, relation: BaseRelation, exists: bool | None = None
    ) -> list[str] | None:
        """The values of a one-column partitioned table's partitions (the mapping table's
        versions), None when it does not exist (`exists`: when a listing already said)."""
        if not self.exists(relation, exists):  # asked first: see cumulative_partitions
            return None
        return [p.split("=", 1)[1] for p in self.partition_paths(relation)]

    def formatted(
        self, relation: Any, columns: Sequence[str] = (), values: Sequence[str] = ()
    ) -> dict[str, str]:
        """DESCRIBE FORMATTED's detail rows (Location, Provider, Num Buckets, ...) of a table,
        or of one of its partitions when `columns` and `values` are given."""
        out: dict[str, str] = {}
        partition = (columns, values) if columns else None
        for row in self.runner.fetch(S.describe_formatted(str(relation), partition)):
            key = str(row[0] or "").strip()
            if key and key not in out:
                out[key] = str(row[1] or "").strip()
        return out

    def location(self, relation: Any) -> str:
        info = self.formatted(relation)
        if "Location" not in info:
            raise ChainPlanError(f"{relation}: no location in DESCRIBE FORMATTED")
        return info["Location"]

    def partition_location(self, relation: Any, columns: Sequence[str], values: Values) -> str:
        info = self.formatted(relation, columns, values)
        if "Location" not in info:
            raise ChainPlanError(
                f"{relation}: no location for partition {format_partition(columns, values)}"
            )
        return info["Location"]

    # ---- a chain table ------------------------------------------------------------------------
    def load(self, relation: BaseRelation) -> Loaded:
        tables = ChainTables.of(relation)
        wanted = (tables.snapshot, tables.cumulative, tables.cmap)
        names = self.names_like(schema_of(tables.snapshot), "|".join(map(name_of, wanted)))
        if name_of(tables.snapshot).lower() not in names:
            raise ChainConfigError(
                f"'{relation}' is not a chain table: {tables.snapshot} does not exist "
                "(run the chain_incremental model first)"
            )
        return self.loaded(
            tables, self.properties(tables.snapshot), self.describe(tables.snapshot), names
        )

    def loaded(
        self,
        tables: ChainTables,
        props: Mapping[str, str],
        columns: Sequence[tuple[str, str]],
        names: Collection[str] | None = None,
    ) -> Loaded:
        """The chain's state from its properties and columns (already read) and both branches'
        partitions (listed now). `names`: the lower-case names of the chain's tables, when a
        listing under the lock already gave them (whether the cumulative delta and the mapping
        table exist); else asked."""

        opts = ChainOptions.from_properties(str(tables.snapshot), props)
        return Loaded(
            tables,
            opts,
            tuple(columns),
            dict(props),
            tuple(self.partitions(tables.snapshot, opts.partition_by)),
            tuple(self.partitions(tables.delta, opts.partition_by)),
            self.cumulative_partitions(tables, opts, listed(names, tables.cumulative)),
            cmap_exists=listed(names, tables.cmap),
        )

    def cumulative_partitions(
        self, tables: ChainTables, opts: ChainOptions, exists: bool | None = None
    ) -> tuple[Values, ...] | None:
        """The cumulative delta's partitions (values + stamp), None when it does not exist.
        Existence is asked first (or given): SHOW PARTITIONS of a missing table would fail, and
        Spark logs every failed statement with its stack trace."""
        if not self.exists(tables.cumulative, exists):
            return None
        paths = self.partition_paths(tables.cumulative)
        return tuple(parse_partition_path(p, [*opts.partition_by, STAMP_COLUMN]) for p in paths)

    # ---- properties of the snapshot branch ----------------------------------------------------
    def set_properties(self, relation: Any, props: Mapping[str, str]) -> None:
        self.runner.run(S.set_properties(str(relation), props))

    def set_stale(self, tables: ChainTables, stale: Mapping[str, str]) -> None:
        self.set_properties(tables.snapshot, {P_STALE: stale_to_property(stale)})

    def set_history(self, tables: ChainTables, history: Mapping[str, str]) -> None:
        self.set_properties(tables.snapshot, {P_HISTORY_START: stale_to_property(history)})
