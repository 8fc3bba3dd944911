"""The group suffix that tests/functional/conftest.py appends to a test's id and reads back to
hand out the longest work first (and scripts/test_durations.py strips)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "functional"))
from node_ids import split_group


@pytest.mark.parametrize(
    ("nodeid", "expected"),
    [
        ("tests/functional/a.py::t", ("tests/functional/a.py::t", None)),
        ("tests/functional/a.py::t@metastore", ("tests/functional/a.py::t", "metastore")),
        ("tests/functional/a.py::t[4]@policy", ("tests/functional/a.py::t[4]", "policy")),
        # an @ among the parameters is part of the test's id
        ("tests/functional/a.py::t[a@b]", ("tests/functional/a.py::t[a@b]", None)),
        ("tests/functional/a.py::t[a@b]@g", ("tests/functional/a.py::t[a@b]", "g")),
    ],
)
def test_split_group(nodeid, expected):
    assert split_group(nodeid) == expected
