"""A fake Spark catalog behind the dbt connection, for tests that pin the SQL the adapter sends.

It answers the catalog questions the adapter asks (SHOW TABLES, DESCRIBE, SHOW TBLPROPERTIES,
SHOW PARTITIONS, DESCRIBE FORMATTED, DESCRIBE QUERY) from an in-memory model of the tables,
follows the statements that change that model (CREATE/DROP TABLE and VIEW, ADD/DROP PARTITION,
SET TBLPROPERTIES) and records every statement. Queries of data get the rows a test scripts
for them (`answers`: substring -> rows), otherwise none. It runs no SQL: it checks what is
sent, not what Spark would do with it (the functional tests do that).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from dbt_common.exceptions import DbtRuntimeError

WAREHOUSE = "file:/warehouse"


# TABLE_PARAMS.PARAM_VALUE's length in the metastore's schema (Derby and PostgreSQL alike)
METASTORE_VALUE_LIMIT = 32_672
# TABLE_PARAMS.PARAM_KEY's length, same schema
METASTORE_KEY_LIMIT = 256


@dataclass
class FakeTable:
    columns: list[tuple[str, str]] = field(default_factory=list)
    partition_by: tuple[str, ...] = ()
    props: dict[str, str] = field(default_factory=dict)
    partitions: list[str] = field(default_factory=list)
    view: bool = False
    location: str = ""
    part_locations: dict[str, str] = field(default_factory=dict)
    buckets: int = 0
    bucket_columns: tuple[str, ...] = ()

    def part_location(self, path: str) -> str:
        return self.part_locations.get(path, f"{self.location}/{path}")


def _unquote(text: str) -> str:
    return text.strip().strip("`")


def _spec_path(spec: str) -> str:
    """ "`region` = 'CN', `dt` = '20250101'" -> 'region=CN/dt=20250101'."""
    pairs = re.findall(r"`?([\w]+)`?\s*=\s*'((?:[^'\\]|\\.)*)'", spec)
    return "/".join(f"{k}={v.replace(chr(92) + chr(39), chr(39))}" for k, v in pairs)


class FakeCursor:
    def __init__(self, rows: Sequence[tuple[Any, ...]]):
        self.rows = list(rows)

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self.rows


class FakeConnections:
    """Stands in for the adapter's ConnectionManager: `add_query` is all the adapter uses."""

    def __init__(self, schema: str = "s"):
        self.schema = schema
        self.tables: dict[str, FakeTable] = {}
        self.statements: list[str] = []
        self.answers: list[tuple[str, list[tuple[Any, ...]]]] = []
        self.query_columns: list[tuple[str, str]] = []
        self.query_partitions: list[str] = []  # what a CREATE TABLE ... AS <query> writes
        # table -> the partitions a dynamic INSERT OVERWRITE (statement -> paths) writes into it
        self.dynamic_writes: dict[str, Callable[[str], list[str]]] = {}

    # ---- setting up -------------------------------------------------------------------------
    def table(self, name: str, **kw: Any) -> FakeTable:
        t = FakeTable(**kw)
        t.location = t.location or f"{WAREHOUSE}/{self.schema}.db/{name}"
        self.tables[f"{self.schema}.{name}"] = t
        return t

    def answer(self, needle: str, rows: list[tuple[Any, ...]]) -> None:
        self.answers.append((needle, rows))

    # ---- the connection ---------------------------------------------------------------------
    def add_query(self, sql: str, auto_begin: bool = True, **_: Any) -> tuple[None, FakeCursor]:
        self.statements.append(sql)
        return None, FakeCursor(self._answer(sql))

    def _get(self, name: str) -> FakeTable:
        key = _unquote(name)
        if key not in self.tables:
            raise DbtRuntimeError(f"[TABLE_OR_VIEW_NOT_FOUND] {key}")
        return self.tables[key]

    def _answer(self, sql: str) -> list[tuple[Any, ...]]:
        s = sql.strip()
        m = re.match(r"SHOW TABLES IN (\S+) LIKE '([^']*)'", s)
        if m:
            schema, pattern = m.group(1), m.group(2)
            alts = [
                re.compile(re.escape(a).replace(r"\*", ".*") + "$", re.I)
                for a in pattern.split("|")
            ]
            names = sorted(k.split(".", 1)[1] for k in self.tables if k.split(".", 1)[0] == schema)
            return [(schema, n, False) for n in names if any(a.match(n) for a in alts)]
        m = re.match(r"DESCRIBE TABLE (\S+)$", s)
        if m:
            t = self._get(m.group(1))
            return [(c, ty, None) for c, ty in t.columns] + [("# Partition Information", "", "")]
        m = re.match(r"SHOW TBLPROPERTIES (\S+)$", s)
        if m:
            return sorted(self._get(m.group(1)).props.items())
        m = re.match(r"SHOW PARTITIONS (\S+)$", s)
        if m:
            return [(p,) for p in self._get(m.group(1)).partitions]
        m = re.match(r"DESCRIBE FORMATTED (\S+)(?: PARTITION \((.*)\))?$", s, re.S)
        if m:
            t = self._get(m.group(1))
            if m.group(2):
                path = _spec_path(m.group(2))
                if path not in t.partitions:
                    raise DbtRuntimeError(f"[PARTITIONS_NOT_FOUND] {path}")
                return [("Location", t.part_location(path), "")]
            rows = [("Provider", "parquet", ""), ("Location", t.location, "")]
            if t.buckets:
                cols = ", ".join(f"`{c}`" for c in t.bucket_columns)
                rows += [("Num Buckets", str(t.buckets), ""), ("Bucket Columns", f"[{cols}]", "")]
            return rows
        if s.startswith("DESCRIBE QUERY "):
            return [(c, ty, None) for c, ty in self.query_columns]
        self._follow(s)
        for needle, rows in self.answers:
            if needle in s:
                return rows
        return []

    def _follow(self, s: str) -> None:
        """Track the statements that change the catalog."""
        m = re.match(r"CREATE (?:OR REPLACE )?VIEW (\S+)", s)
        if m:
            name = _unquote(m.group(1))
            if name in self.tables and "OR REPLACE" not in s[:30]:
                raise DbtRuntimeError(f"[TABLE_OR_VIEW_ALREADY_EXISTS] {name}")
            self.tables[name] = FakeTable(view=True)
            props = re.search(r"TBLPROPERTIES \((.*?)\) AS SELECT", s, re.S)
            if props:
                self._set_props(self.tables[name], props.group(1))
            return
        m = re.match(r"ALTER VIEW (\S+) RENAME TO (\S+)$", s)
        if m:
            source, target = _unquote(m.group(1)), _unquote(m.group(2))
            if target in self.tables:
                raise DbtRuntimeError(f"[TABLE_OR_VIEW_ALREADY_EXISTS] {target}")
            self.tables[target] = self._get(source)
            del self.tables[source]
            return
        m = re.match(r"ALTER (?:TABLE|VIEW) (\S+) SET TBLPROPERTIES \((.*)\)$", s, re.S)
        if m:
            self._set_props(self._get(m.group(1)), m.group(2))
            return
        m = re.match(r"ALTER VIEW (\S+) UNSET TBLPROPERTIES IF EXISTS \((.*)\)$", s, re.S)
        if m:
            table = self._get(m.group(1))
            for k in re.findall(r"'((?:[^'\\]|\\.)*)'", m.group(2)):
                table.props.pop(k, None)
            return
        m = re.match(r"ALTER VIEW (\S+) AS\n", s)
        if m:
            name = _unquote(m.group(1))
            if name not in self.tables or not self.tables[name].view:
                raise DbtRuntimeError(f"[TABLE_OR_VIEW_NOT_FOUND] {name}")
            return
        m = re.match(r"CREATE TABLE (IF NOT EXISTS )?(\S+)", s)
        if m:
            name = _unquote(m.group(2))
            if name in self.tables and m.group(1):
                return
            loc = re.search(r"LOCATION '((?:[^'\\]|\\.)*)'", s)
            parts = re.search(r"PARTITIONED BY \(([^)]*)\)", s)
            cols = re.match(r"CREATE TABLE (?:IF NOT EXISTS )?\S+ \((.*?)\)\s*\n?USING", s, re.S)
            columns = (
                [tuple(c.strip().split(" ", 1)) for c in cols.group(1).split(", ")]
                if cols
                else list(self.query_columns)
            )
            self.tables[name] = FakeTable(
                columns=[(_unquote(c), t) for c, t in columns],
                partition_by=tuple(_unquote(c) for c in parts.group(1).split(",")) if parts else (),
                location=loc.group(1) if loc else f"{WAREHOUSE}/{name.replace('.', '.db/')}",
                partitions=list(self.query_partitions) if "\nAS\n" in s or " AS\n" in s else [],
            )
            props = re.search(r"TBLPROPERTIES \((.*?)\)(?:\nAS\n|$)", s, re.S)
            if props:
                self._set_props(self.tables[name], props.group(1))
            return
        m = re.match(r"DROP (?:TABLE|VIEW) IF EXISTS (\S+)$", s)
        if m:
            self.tables.pop(_unquote(m.group(1)), None)
            return
        m = re.match(
            r"ALTER TABLE (\S+) (ADD(?: IF NOT EXISTS)?|DROP IF EXISTS) (PARTITION .*)$", s, re.S
        )
        if m:
            t = self._get(m.group(1))
            for spec, loc in re.findall(
                r"PARTITION \((.*?)\)(?: LOCATION '((?:[^'\\]|\\.)*)')?(?:,|\s|$)", m.group(3), re.S
            ):
                path = _spec_path(spec)
                if m.group(2).startswith("ADD"):
                    if path not in t.partitions:
                        t.partitions.append(path)
                    if loc:
                        t.part_locations[path] = loc
                elif path in t.partitions:
                    t.partitions.remove(path)
            return
        m = re.match(
            r"ALTER TABLE (\S+) PARTITION \((.*)\) SET LOCATION '((?:[^'\\]|\\.)*)'$", s, re.S
        )
        if m:
            self._get(m.group(1)).part_locations[_spec_path(m.group(2))] = m.group(3)
            return
        m = re.match(r"INSERT OVERWRITE TABLE (\S+) PARTITION \((.*?)\)", s, re.S)
        if m:
            t = self._get(m.group(1))
            name = _unquote(m.group(1))
            # a writer's own scratch table is named after it (`t__chain_pub_<writer>`)
            write = next(
                (
                    w
                    for k, w in self.dynamic_writes.items()
                    if name in (k, f"{k}_") or name.startswith(f"{k}_")
                ),
                None,
            )
            paths = [_spec_path(m.group(2))] if "=" in m.group(2) else write(s) if write else []
            t.partitions += [p for p in paths if p not in t.partitions]

    @staticmethod
    def _set_props(table: FakeTable, body: str) -> None:
        for k, v in re.findall(r"'((?:[^'\\]|\\.)*)' = '((?:[^'\\]|\\.)*)'", body):
            key, value = (x.replace("\\'", "'").replace("\\\\", "\\") for x in (k, v))
            if len(key) > METASTORE_KEY_LIMIT:  # as the metastore refuses it
                raise RuntimeError(f"property key {key}: {len(key)} characters, over the limit")
            if len(value) > METASTORE_VALUE_LIMIT:  # as the metastore refuses it
                raise RuntimeError(f"property {k}: {len(value)} characters, over the limit")
            table.props[k] = value


def fake_adapter(connections: FakeConnections, adapter_cls: type | None = None) -> Any:
    """A ChainTableAdapter whose connection is `connections` (no profile, no Spark)."""
    import multiprocessing

    from dbt.adapters.chaintable.impl import ChainTableAdapter

    cls = adapter_cls or ChainTableAdapter
    config = SimpleNamespace(
        log_cache_events=False,
        credentials=SimpleNamespace(method="fake", server_side_parameters={}),
        quoting={},
        project_name="p",
        threads=1,
    )
    adapter = cls(config, multiprocessing.get_context("spawn"))
    adapter.connections = connections
    return adapter
