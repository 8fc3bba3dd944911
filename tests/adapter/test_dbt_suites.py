"""dbt's own base suites (dbt-tests-adapter) run against `chaintable`: the classes dbt-spark
passes, snapshots on parquet and clone without SHALLOW CLONE. README (Development) lists the
suites skipped and why."""

from __future__ import annotations

import pytest
from dbt.tests.adapter.basic import test_snapshot_check_cols, test_snapshot_timestamp
from dbt.tests.adapter.basic.expected_catalog import base_expected_catalog, no_stats
from dbt.tests.adapter.basic.test_adapter_methods import BaseAdapterMethod
from dbt.tests.adapter.basic.test_base import BaseSimpleMaterializations
from dbt.tests.adapter.basic.test_docs_generate import BaseDocsGenerate
from dbt.tests.adapter.basic.test_empty import BaseEmpty
from dbt.tests.adapter.basic.test_ephemeral import BaseEphemeral
from dbt.tests.adapter.basic.test_generic_tests import BaseGenericTests
from dbt.tests.adapter.basic.test_incremental import BaseIncremental
from dbt.tests.adapter.basic.test_singular_tests import BaseSingularTests
from dbt.tests.adapter.basic.test_singular_tests_ephemeral import BaseSingularTestsEphemeral
from dbt.tests.adapter.basic.test_snapshot_check_cols import BaseSnapshotCheckCols
from dbt.tests.adapter.basic.test_snapshot_timestamp import BaseSnapshotTimestamp
from dbt.tests.adapter.dbt_clone.test_dbt_clone import BaseCloneNotPossible
from dbt.tests.adapter.dbt_show.test_dbt_show import BaseShowLimit
from dbt.tests.adapter.empty.test_empty import BaseTestEmpty
from dbt.tests.adapter.unit_testing.test_case_insensitivity import BaseUnitTestCaseInsensivity
from dbt.tests.adapter.unit_testing.test_invalid_input import BaseUnitTestInvalidInput
from dbt.tests.adapter.unit_testing.test_types import BaseUnitTestingTypes
from dbt.tests.util import relation_from_name


class TestSimpleMaterializations(BaseSimpleMaterializations):
    pass


class TestEmpty(BaseEmpty):
    pass


class TestEmptyFlag(BaseTestEmpty):
    pass


class TestEphemeral(BaseEphemeral):
    pass


class TestGenericTests(BaseGenericTests):
    pass


class TestSingularTests(BaseSingularTests):
    pass


class TestShowLimit(BaseShowLimit):
    pass


class TestUnitTestCaseInsensitivity(BaseUnitTestCaseInsensivity):
    pass


class TestUnitTestInvalidInput(BaseUnitTestInvalidInput):
    pass


def update_parquet_rows(adapter, config) -> None:
    """dbt's update_rows for a parquet table, which Spark cannot UPDATE: the table is rewritten
    with the column replaced where the condition holds (through a copy, as Spark refuses to
    overwrite a table it reads)."""
    from dbt.tests.util import generate_update_clause, get_connection

    relation = relation_from_name(adapter, config["name"])
    clause = generate_update_clause(adapter, config["clause"])
    copy = f"{relation}__updated"
    with get_connection(adapter):
        names = [c.name for c in adapter.get_columns_in_relation(relation)]
        cols = ", ".join(
            f"case when {config['where']} then {clause} else {n} end as {n}"
            if n == config["dst_col"]
            else n
            for n in names
        )
        for sql in (
            f"drop table if exists {copy}",
            f"create table {copy} using parquet as select {cols} from {relation}",
            f"insert overwrite table {relation} select * from {copy}",
            f"drop table {copy}",
        ):
            adapter.execute(sql)


@pytest.fixture
def parquet_updates(monkeypatch):
    for module in (test_snapshot_check_cols, test_snapshot_timestamp):
        monkeypatch.setattr(module, "update_rows", update_parquet_rows)


@pytest.mark.usefixtures("parquet_updates")
class TestSnapshotCheckCols(BaseSnapshotCheckCols):
    pass


@pytest.mark.usefixtures("parquet_updates")
class TestSnapshotTimestamp(BaseSnapshotTimestamp):
    pass


class TestCloneNotPossible(BaseCloneNotPossible):
    """Every node a view over the state's relation (materializations/clone.sql)."""

    @pytest.fixture(autouse=True)
    def clean_up(self, project, other_schema):
        yield
        with project.adapter.connection_named("__test"):
            for schema in (other_schema, f"{project.test_schema}_seeds"):
                relation = project.adapter.Relation.create(database=project.database, schema=schema)
                project.adapter.drop_schema(relation)


class TestSingularTestsEphemeral(BaseSingularTestsEphemeral):
    pass


class TestIncremental(BaseIncremental):
    pass


class TestAdapterMethod(BaseAdapterMethod):
    pass


class TestUnitTestingTypes(BaseUnitTestingTypes):
    @pytest.fixture
    def data_types(self):
        # sql_value, yaml_value: Spark's literals
        return [
            ["1", "1"],
            ["2.0", "2.0"],
            ["'12345'", "12345"],
            ["'string'", "string"],
            ["true", "true"],
            ["date '2011-11-11'", "2011-11-11"],
            ["timestamp '2013-11-03 00:00:00-0'", "2013-11-03 00:00:00-0"],
        ]


class TestDocsGenerate(BaseDocsGenerate):
    """The catalog as Spark's session describes it: the tables' owner is the user the session
    runs as, and Spark's own type names; a seed loaded by dbt-spark's INSERT has no statistics
    in the embedded catalog."""

    @pytest.fixture(scope="class")
    def expected_catalog(self, project):
        import getpass

        return base_expected_catalog(
            project,
            role=getpass.getuser(),
            id_type="long",
            text_type="string",
            time_type="timestamp",
            view_type="view",
            table_type="table",
            model_stats=no_stats(),
            seed_stats=no_stats(),
        )
