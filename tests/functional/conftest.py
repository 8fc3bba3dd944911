"""Real dbt against real Spark: one embedded SparkSession (session method) per pytest process.

Each test gets its own dbt project directory and its own schema; tests read results through
the same SparkSession (the tests may use PySpark; the adapter never does).
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest
from helpers import (
    CHILD_JVM_OPTS,
    PROJECT_NAME,
    SESSION_JVM_OPTS,
    Project,
    drop_temporary_views,
    schema_project,
    session_params,
)
from node_ids import split_group

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("DBT_SEND_ANONYMOUS_USAGE_STATS", "false")
# the JVMs started beside this process's session compile with C1 only (helpers.CHILD_JVM_OPTS)
os.environ.setdefault("SPARK_SUBMIT_OPTS", CHILD_JVM_OPTS)


@pytest.fixture(scope="session", autouse=True)
def partial_parse_across_vars():
    """dbt parses a project again from scratch, its ~1,000 macros included (~0.8 s of CPU),
    whenever --vars differ from the last parse, and nearly every invocation here passes a new
    day. Within this process the tests instead let partial parsing keep the parsed macros and
    reparse the project's own files, which Project.dbt marks as changed whenever the vars do
    (macros render at execution time and read the current vars there). A project whose
    dbt_project.yml reads a var is parsed in full as dbt does, and so is every project
    Project.dbt does not mark: a worker runs tests/adapter too, in this process, and those
    projects change their models through --vars alone (three of dbt's suites failed there)."""
    from dbt.parser.manifest import ManifestLoader

    original = ManifestLoader.is_partial_parsable

    def is_partial_parsable(self, manifest):
        project_file = Path(self.root_project.project_root) / "dbt_project.yml"
        ours = self.root_project.project_name == PROJECT_NAME
        if ours and "var(" not in project_file.read_text():
            manifest.state_check.vars_hash = self.manifest.state_check.vars_hash
        return original(self, manifest)

    ManifestLoader.is_partial_parsable = is_partial_parsable
    yield
    ManifestLoader.is_partial_parsable = original


@pytest.fixture(scope="session", autouse=True)
def macros_parsed_once():
    """Nearly every test has a new project, which dbt parses in full: its ~1,000 macros (dbt's,
    dbt-spark's, ours) included, each parsed twice (its blocks, then the macros it calls), the
    greater part of this process's own CPU. The macros of a set of macro files (the packages'
    and the project's, by content) are the same every time, so they are parsed once per process
    and each later load gets copies of them. The copies keep their creation time, so dbt does
    not look again for the macros they call (ManifestLoader.macro_depends_on)."""
    import copy

    from dbt.parser.manifest import ManifestLoader

    original = ManifestLoader.load_and_parse_macros
    parsed: dict[tuple, list] = {}

    def load_and_parse_macros(self, project_parser_files):
        files = self.manifest.files
        key = (self.root_project.project_name,) + tuple(
            sorted(
                (file_id, files[file_id].checksum.checksum)
                for parsers in project_parser_files.values()
                for parser in ("MacroParser", "GenericTestParser")
                for file_id in parsers.get(parser, ())
            )
        )
        if key not in parsed:
            before = set(self.manifest.macros)
            original(self, project_parser_files)
            parsed[key] = [
                (file_id, copy.deepcopy(self.manifest.macros[uid]))
                for file_id, _ in key[1:]
                for uid in files[file_id].macros
                if uid not in before
            ]
            return
        for file_id, macro in parsed[key]:
            self.manifest.add_macro(files[file_id], copy.deepcopy(macro))
        self.build_macro_resolver()
        self.macro_depends_on()

    ManifestLoader.load_and_parse_macros = load_and_parse_macros
    yield
    ManifestLoader.load_and_parse_macros = original


@pytest.fixture(scope="session", autouse=True)
def behavior_flags_named_once():
    """dbt's two base behavior flags name no source, so every adapter dbt builds (one per
    invocation) takes the whole Python stack, each frame's source line read, to name the module
    that built it: always dbt.adapters.base.impl, whose setter builds them (~35 ms a time under
    pytest's deep stack). That name is given here."""
    from dbt_common.behavior_flags import BehaviorFlagRendered

    original = BehaviorFlagRendered.__dict__["_default_source"]
    BehaviorFlagRendered._default_source = staticmethod(lambda: "dbt.adapters.base.impl")
    yield
    BehaviorFlagRendered._default_source = original


@pytest.fixture(scope="session")
def spark_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("spark")
    os.environ["DERBY_SYSTEM_HOME"] = str(root)
    return root


@pytest.fixture(scope="session")
def spark(spark_root):
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.enableHiveSupport()
    for k, v in session_params(spark_root).items():
        builder = builder.config(k, v)
    # this process's JVM starts without the child JVMs' C1 options (CHILD_JVM_OPTS), and they
    # stay set for the JVMs started after it; it maps the shared classes and collects with the
    # serial collector too (SESSION_JVM_OPTS)
    ours = os.environ.get("SPARK_SUBMIT_OPTS") == CHILD_JVM_OPTS
    if ours:
        os.environ["SPARK_SUBMIT_OPTS"] = SESSION_JVM_OPTS
    try:
        session = builder.getOrCreate()
    finally:
        if ours:
            os.environ["SPARK_SUBMIT_OPTS"] = CHILD_JVM_OPTS
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def project(spark, spark_root, tmp_path) -> Project:
    with schema_project(spark, spark_root, tmp_path / "proj") as p:
        yield p


@pytest.fixture
def schema(spark):
    """A schema of its own in this process's session, for tests that write tables directly."""
    name = "c_" + uuid.uuid4().hex[:8]
    spark.sql(f"CREATE DATABASE {name}")
    yield name
    spark.sql(f"DROP DATABASE {name} CASCADE")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tests of the Thrift Server run in one worker (scripts/test.sh: --dist loadgroup), which
    starts it once, and so do those of the metastore service; the others go to whichever worker
    is free. xdist's scheduler groups the tests whose ids end in `@<group>`; its worker appends
    that to an attribute pytest 9 no longer reads its ids from, so the group is appended here,
    as pytest 9 keeps an id."""
    if not getattr(config.option, "loadgroup", False):  # set in xdist's workers only
        return
    from _pytest.nodeid import NodeId

    for item in items:
        groups = sorted(s for s in ("thrift_server", "metastore") if s in item.fixturenames)
        # a module whose tests share one module-scoped history marks them
        # `pytest.mark.xdist_group(name)`, so that the history is built on one worker only
        groups += [
            m.kwargs.get("name", m.args[0] if m.args else "")
            for m in item.iter_markers("xdist_group")
        ]
        groups = [g for g in groups if g]
        if groups and "@" not in item.nodeid:
            item._id = NodeId.parse(f"{item.nodeid}@{'_'.join(groups)}")  # type: ignore[attr-defined]
    longest_first(items)


DURATIONS = Path(__file__).with_name("durations.json")


def longest_first(items: list[pytest.Item]) -> None:
    """The longest work first, so that no long test starts last while the other worker has
    nothing left (a clean-clone run ended with one core idle for ~60 s). xdist hands out the
    groups first (the most tests first) and then the single tests in this order; a group's
    tests keep theirs. The seconds are a run's (scripts/test_durations.py writes them); a test
    not in the file counts 10 s."""
    known = json.loads(DURATIONS.read_text())
    scopes: dict[str, str] = {}  # nodeid: its group, or the test itself when it has none
    cost: dict[str, float] = {}
    for item in items:
        plain, group = split_group(item.nodeid)
        scopes[item.nodeid] = group or plain
        cost[scopes[item.nodeid]] = cost.get(scopes[item.nodeid], 0.0) + known.get(plain, 10.0)
    items.sort(key=lambda item: -cost[scopes[item.nodeid]])


@pytest.fixture(scope="session")
def threads_reference(spark, spark_root, tmp_path_factory):
    """The days of threads_project.py run with --threads 1 in a test process's session, built on
    first use (a getter): what its runs with --threads 4 read as (test_threads.py, and
    test_metastore.py on a metastore service)."""
    import threads_project

    return threads_project.shared_reference(spark, spark_root, tmp_path_factory)


@pytest.fixture(scope="session")
def thrift_server(tmp_path_factory):
    """One Spark Thrift Server per test process, for the files that use it."""
    import servers

    server = servers.start_thrift(tmp_path_factory.mktemp("thrift"))  # ANSI on
    yield server
    server.stop()
    assert not server.alive()


@pytest.fixture(scope="session")
def metastore(tmp_path_factory):
    """One Hive metastore service on PostgreSQL per test process, for the files that use it."""
    import shutil
    import tempfile

    import servers

    # not below pytest's basetemp (mode 0700): PostgreSQL runs as the postgres user
    state = Path(tempfile.mkdtemp(prefix="chaintable-metastore-"))
    state.chmod(0o755)
    server = servers.start_metastore(state)
    yield server
    server.stop()
    assert not server.alive()
    shutil.rmtree(state, ignore_errors=True)


@pytest.fixture(autouse=True)
def no_temporary_views_left():
    """What a test leaves in the shared session's temporary views is not the next one's
    (helpers.drop_temporary_views)."""
    yield
    drop_temporary_views()
