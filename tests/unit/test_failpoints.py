"""The failpoints the crash and lock tests set (base/failpoints.py): each mode does what the
functional tests rely on, and an unset or other failpoint does nothing."""

import threading
import time

import pytest
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.chaintable.base.failpoints import SimulatedCrash, failpoint


def test_unset_or_another_step_does_nothing(monkeypatch):
    monkeypatch.delenv("CHAINTABLE_FAILPOINT", raising=False)
    failpoint("publish.done")
    monkeypatch.setenv("CHAINTABLE_FAILPOINT", "run.staged:error")
    failpoint("publish.done")


def test_error_raises_a_statements_error_and_a_bare_name_a_simulated_crash(monkeypatch):
    monkeypatch.setenv("CHAINTABLE_FAILPOINT", "publish.done:error")
    with pytest.raises(DbtRuntimeError, match=r"\n  failpoint publish\.done: a statement failed$"):
        failpoint("publish.done")
    monkeypatch.setenv("CHAINTABLE_FAILPOINT", "publish.done")
    with pytest.raises(SimulatedCrash, match=r"^failpoint publish\.done$"):
        failpoint("publish.done")


def test_wait_holds_the_step_until_the_file_exists(monkeypatch, tmp_path):
    release = tmp_path / "release"
    monkeypatch.setenv("CHAINTABLE_FAILPOINT", f"run.staged:wait={release}")
    done = threading.Event()
    held = threading.Thread(target=lambda: (failpoint("run.staged"), done.set()))
    held.start()
    assert not done.wait(0.5)  # still held: no file yet
    release.write_text("")
    assert done.wait(5)
    held.join()


def test_sleep_holds_the_step_that_long(monkeypatch):
    monkeypatch.setenv("CHAINTABLE_FAILPOINT", "run.staged:sleep=0.3")
    start = time.monotonic()
    failpoint("run.staged")
    assert time.monotonic() - start >= 0.3
