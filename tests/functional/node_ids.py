"""The group suffix of a test's id under `--dist loadgroup` (conftest.py appends it), shared by
conftest.py and scripts/test_durations.py."""

from __future__ import annotations


def split_group(nodeid: str) -> tuple[str, str | None]:
    """(the id without its group, the group): `a.py::t[x]@g` -> (`a.py::t[x]`, `g`). An `@`
    inside the parameters' brackets is no group."""
    at = nodeid.rfind("@")
    if at > nodeid.rfind("]"):
        return nodeid[:at], nodeid[at + 1 :]
    return nodeid, None
