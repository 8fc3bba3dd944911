"""Where a write puts its files: a fresh directory per run below the table,
`<table>/_chain_v/<run id>` (publish/safety.py says why a write never overwrites in place)."""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import threading
import uuid

VERSIONS_DIR = "_chain_v"


def new_run_id(now: dt.datetime | None = None) -> str:
    """Sortable and unique: a fresh directory name for every write."""
    now = now or dt.datetime.now()
    return f"{now:%Y%m%d%H%M%S}-{uuid.uuid4().hex[:8]}"


def version_location(table_location: str, run_id: str) -> str:
    return f"{table_location.rstrip('/')}/{VERSIONS_DIR}/{run_id}"


def in_version(location: str, run_id: str) -> bool:
    """Whether `location` is run `run_id`'s directory or lies below it (a partition of a
    staging table there)."""
    return f"/{VERSIONS_DIR}/{run_id}/" in location.rstrip("/") + "/"


def is_version(location: str, run_id: str) -> bool:
    """Whether `location` (as the metastore prints it) is run `run_id`'s directory: compared by
    its last two path elements, which a metastore's spelling of the scheme leaves alone."""
    return location.rstrip("/").endswith(f"/{VERSIONS_DIR}/{run_id}")


def writer_id() -> str:
    """A short name for the writer this thread of this dbt invocation is: the scratch tables it
    creates carry it, so that two writers of one chain (one whose lease ran out and one that
    took the lock over) never create, fill or drop the same table."""
    try:
        from dbt_common.invocation import get_invocation_id

        invocation = get_invocation_id()
    except Exception:  # pragma: no cover - outside dbt
        invocation = ""
    me = f"{invocation}:{os.getpid()}:{threading.get_ident()}"
    return hashlib.sha1(me.encode()).hexdigest()[:10]
