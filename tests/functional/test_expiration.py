"""Chain-safe partition expiration (docs/design.md#expiration), real dbt against Spark, exact partitions."""

import pytest

EXPIRING = """
{{{{ config(materialized='chain_incremental', partition_by=['region', 'dt'],
          chain_partition_keys=['dt'], primary_key=['id', 'region', 'dt'],
          chain_branch=var('branch', none),
          partition_timestamp_pattern='$dt', partition_timestamp_formatter='yyyyMMdd',
          partition_expiration_time='30 d', {extra}) }}}}
select id, v, region, dt from {{{{ target.schema }}}}.changes
where dt = '{{{{ var("dt") }}}}' and region in ({{{{ var("regions", "'CN', 'US', 'EU'") }}}})
"""

# docs/design.md#expiration's example for CN; US has one snapshot before the cutoff; EU is delta-only.
ROWS = [
    (1, "a", "CN", "20250101"),
    (2, "b", "CN", "20250101"),
    (1, "a2", "CN", "20250110"),
    (1, "a3", "CN", "20250201"),
    (2, "b", "CN", "20250201"),
    (2, "b4", "CN", "20250210"),
    (1, "a3", "CN", "20250301"),
    (2, "b4", "CN", "20250301"),
    (3, "c", "CN", "20250315"),
    (7, "u", "US", "20250301"),
    (7, "u2", "US", "20250315"),
    (9, "e", "EU", "20250110"),
    (9, "e2", "EU", "20250315"),
]
# (dt, branch, regions written): snapshots through chain_branch='snapshot', the rest as deltas
STEPS = [
    ("20250101", "snapshot", "'CN'"),
    ("20250110", None, "'CN', 'EU'"),
    ("20250201", "snapshot", "'CN'"),
    ("20250210", None, "'CN'"),
    ("20250301", "snapshot", "'CN', 'US'"),
    ("20250315", None, "'CN', 'US', 'EU'"),
]


def build(p, extra="partition_expiration_check_interval='1 d'"):
    p.table("changes", "id int, v string, region string, dt string", ROWS)
    p.model("t", EXPIRING.format(extra=extra))
    for d, branch, regions in STEPS:
        vars = {"dt": d, "regions": regions}
        if branch:
            vars["branch"] = branch
        p.dbt("run", vars=vars)


def every_partition(p):
    return p.full_state()


def test_dry_run_then_expire_per_group_reads_unchanged(project):
    p = project
    build(p, extra="partition_expiration_check_interval='1000 d'")
    # the automatic check ran at the first run (real clock, 2026) and found one snapshot only;
    # the 1000-day interval has not elapsed since, so nothing was expired by later runs
    assert len(p.partitions("t__snapshot")) == 4
    before = every_partition(p)
    assert before["region=CN/dt=20250315"] == [(1, "a3"), (2, "b4"), (3, "c")]
    assert before["region=EU/dt=20250315"] == [(9, "e2")]

    p.run_op("expire_chain", {"model": "t", "now": "2025-03-31 00:00:00", "dry_run": True})
    log = p.log_text()
    assert "would drop 1 snapshot and 1 delta partition(s)" in log
    assert "keep anchor snapshot region=CN/dt=20250201" in log
    assert "drop snapshot region=CN/dt=20250101 with region=CN/dt=20250110" in log
    assert "region=US" not in log and "region=EU" not in log
    assert len(p.partitions("t__snapshot")) == 4 and len(p.partitions("t__delta")) == 6

    p.run_op("chain_status", {"model": "t", "now": "2025-03-31 00:00:00"})
    assert "would drop" in p.log_text()
    assert "drop snapshot region=CN/dt=20250101 with region=CN/dt=20250110" in p.log_text()

    # cutoff 2025-03-01: CN has S0101, S0201 before it (0301 is not strictly before) -> drop the
    # 0101 segment (with D0110), keep anchor 0201; US (S0301 only) and EU (no snapshot) keep all
    p.run_op("expire_chain", {"model": "t", "now": "2025-03-31 00:00:00"})
    assert "dropping 1 snapshot and 1 delta partition(s)" in p.log_text()
    p.run_op("expire_chain", {"model": "t", "now": "2025-03-31 00:00:00"})
    assert "nothing to expire" in p.log_text()  # idempotent
    # the example of docs/design.md#expiration: 30 d on 2025-03-31 -> cutoff 2025-03-01, drop S 0101 and D 0110
    assert p.partitions("t__snapshot") == [
        "region=CN/dt=20250201",
        "region=CN/dt=20250301",
        "region=US/dt=20250301",
    ]
    assert p.partitions("t__delta") == [
        "region=CN/dt=20250210",
        "region=CN/dt=20250315",
        "region=EU/dt=20250110",
        "region=EU/dt=20250315",
        "region=US/dt=20250315",
    ]
    after = every_partition(p)
    assert after == {k: v for k, v in before.items() if k in after}
    assert set(before) - set(after) == {"region=CN/dt=20250101", "region=CN/dt=20250110"}

    # later: both older segments go, the anchor 0301 stays; deltas before it went with them
    p.run_op("expire_chain", {"model": "t", "now": "2025-04-20 00:00:00"})
    assert p.partitions("t__snapshot") == ["region=CN/dt=20250301", "region=US/dt=20250301"]
    assert "region=CN/dt=20250210" not in p.partitions("t__delta")
    assert every_partition(p) == {k: v for k, v in before.items() if k in every_partition(p)}


def test_max_num_limits_segments_per_run(project):
    p = project
    build(p, extra="partition_expiration_check_interval='1000 d', partition_expiration_max_num=1")
    p.run_op("expire_chain", {"model": "t", "now": "2025-04-20 00:00:00"})
    assert p.partitions("t__snapshot") == [
        "region=CN/dt=20250201",
        "region=CN/dt=20250301",
        "region=US/dt=20250301",
    ]
    p.run_op("expire_chain", {"model": "t", "now": "2025-04-20 00:00:00"})
    assert p.partitions("t__snapshot") == ["region=CN/dt=20250301", "region=US/dt=20250301"]


def test_stale_snapshots_keep_only_what_they_are_rebuilt_from(project):
    """max_num leaves CN's history from snapshot 0201 on, so delta 0205 can be backfilled; it
    leaves nothing stale (0301 after it is a full write). 0315 is compacted; a backfilled delta
    0305 leaves it stale. Until 0315 is recompacted, expiration keeps what it is rebuilt from
    (snapshot 0301 and the deltas after it) but older segments still expire; afterwards the
    0301 segment expires too."""
    p = project
    build(p, extra="partition_expiration_check_interval='1000 d', partition_expiration_max_num=1")
    p.run_op("expire_chain", {"model": "t", "now": "2025-04-20 00:00:00"})
    assert "dropping 1 snapshot and 1 delta partition(s)" in p.log_text()  # CN 0101, 0110
    p.table(
        "changes",
        "id int, v string, region string, dt string",
        [*ROWS, (5, "e", "CN", "20250205"), (4, "d", "CN", "20250305")],
    )
    p.dbt("run", vars={"dt": "20250205", "regions": "'CN'"})  # history kept from 0201: allowed
    p.run_op("chain_status", {"model": "t"})
    assert "stale snapshots (built before" not in p.log_text()
    assert p.rows("select id, v from {s}.t where dt = '20250210'") == [
        (1, "a3"),
        (2, "b4"),
        (5, "e"),
    ]
    p.run_op("compact_chain", {"model": "t", "partition": {"dt": "20250315"}})
    p.dbt("run", vars={"dt": "20250305", "regions": "'CN'"})
    p.run_op("chain_status", {"model": "t"})
    assert "region=CN/dt=20250315  (delta region=CN/dt=20250305 rewritten)" in p.log_text()
    assert "region=CN/dt=20250301  (delta" not in p.log_text()  # a full write: not stale
    p.run_op("expire_chain", {"model": "t", "now": "2025-04-20 00:00:00"})  # cutoff 0321
    log = p.log_text()
    assert "region=CN has stale snapshots" in log
    assert "only its history before the snapshot the first of them is rebuilt from" in log
    # CN: only S0201 (with D0205, D0210) goes, S0301 stays for 0315; US: S0301 goes
    assert "dropping 2 snapshot and 2 delta partition(s)" in log
    assert p.partitions("t__snapshot") == [
        "region=CN/dt=20250301",
        "region=CN/dt=20250315",
        "region=EU/dt=20250315",
        "region=US/dt=20250315",
    ]
    assert p.partitions("t__delta") == [
        "region=CN/dt=20250305",
        "region=CN/dt=20250315",
        "region=EU/dt=20250110",
        "region=EU/dt=20250315",
        "region=US/dt=20250315",
    ]
    p.run_op("compact_chain", {"model": "t", "partition": {"dt": "20250315"}, "overwrite": True})
    before = every_partition(p)
    assert before["region=CN/dt=20250315"] == [(1, "a3"), (2, "b4"), (3, "c"), (4, "d")]
    assert before["region=US/dt=20250315"] == [(7, "u2")]
    p.run_op("expire_chain", {"model": "t", "now": "2025-04-20 00:00:00"})
    assert "dropping 1 snapshot and 1 delta partition(s)" in p.log_text()  # CN 0301, 0305
    assert p.partitions("t__snapshot") == [
        "region=CN/dt=20250315",
        "region=EU/dt=20250315",
        "region=US/dt=20250315",
    ]
    after = every_partition(p)
    assert after == {k: v for k, v in before.items() if k in after}
    assert set(before) - set(after) == {"region=CN/dt=20250301", "region=CN/dt=20250305"}


def test_automatic_expiration_after_a_run_respects_the_check_interval(project):
    p = project
    build(p)  # interval 1 d: first check at the first run, later runs on the same day skip it
    assert "partition expiration checked at" in p.log_text()
    assert len(p.partitions("t__snapshot")) == 4
    before = every_partition(p)
    # pretend the last check was two days ago: the next run checks again, with the real clock
    # (2026 and later: every 2025 partition is older than 30 d)
    p.spark.sql(
        f"ALTER TABLE {p.schema}.t__snapshot SET TBLPROPERTIES "
        "('chaintable.last-expire-check' = '2000-01-01 00:00:00')"
    )
    p.dbt("run", vars={"dt": "20250315", "regions": "'CN', 'US', 'EU'"})
    assert "dropping 2 snapshot and 2 delta partition(s)" in p.log_text()
    assert p.partitions("t__snapshot") == ["region=CN/dt=20250301", "region=US/dt=20250301"]
    assert p.partitions("t__delta") == [
        "region=CN/dt=20250315",
        "region=EU/dt=20250110",
        "region=EU/dt=20250315",
        "region=US/dt=20250315",
    ]
    after = every_partition(p)
    assert after == {k: v for k, v in before.items() if k in after}
    last = p.rows("show tblproperties {s}.t__snapshot ('chaintable.last-expire-check')")[0][-1]
    assert last > "2025"
    p.dbt("run", vars={"dt": "20250315", "regions": "'CN', 'US', 'EU'"})
    assert "partition expiration checked at" in p.log_text()


def test_drop_guard_refuses_breaking_a_chain(project):
    p = project
    build(p, extra="partition_expiration_check_interval='1000 d'")
    before = every_partition(p)
    # S 0101 anchors D 0110 and has no earlier snapshot in CN: refused, nothing dropped
    res = p.run_op(
        "drop_chain_partition",
        {"model": "t", "partition": {"region": "CN", "dt": "20250101"}},
        expect_ok=False,
    )
    assert "region=CN/dt=20250101" in p.log_text() + str(res.exception)
    assert len(p.partitions("t__snapshot")) == 4
    # US S 0301 anchors D 0315 with no earlier snapshot: refused too
    p.run_op(
        "drop_chain_partition",
        {"model": "t", "partition": "region=US,dt=20250301"},
        expect_ok=False,
    )
    # a delta partition may go (it changes later reads, as the user asked)
    p.run_op(
        "drop_chain_partition",
        {"model": "t", "partition": {"region": "EU", "dt": "20250315"}, "branch": "delta"},
    )
    assert "region=EU/dt=20250315" not in p.partitions("t__delta")
    assert every_partition(p)["region=CN/dt=20250315"] == before["region=CN/dt=20250315"]


@pytest.mark.parametrize(
    "extra, message",
    [
        (
            "partition_expiration_check_interval='1 d', partition_timestamp_formatter='yyyyMM'",
            "does not give a complete date",
        ),
        (
            "partition_expiration_check_interval='1 d', partition_timestamp_formatter='yyyyMMdd QQQ'",
            "unsupported pattern letters 'QQQ'",
        ),
        (
            "partition_timestamp_formatter='yyyyMMdd', partition_timestamp_pattern='$day'",
            "partition_timestamp_pattern",
        ),
    ],
)
def test_incomplete_formatter_fails_at_config_time(project, extra, message):
    p = project
    p.table("changes", "id int, v string, region string, dt string", ROWS)
    p.model(
        "t",
        EXPIRING.replace(
            "partition_timestamp_pattern='$dt', partition_timestamp_formatter='yyyyMMdd',",
            "partition_timestamp_pattern='$dt'," if "timestamp_pattern" not in extra else "",
        ).format(extra=extra),
    )
    p.dbt("run", vars={"dt": "20250101"}, expect_ok=False)
    assert message in p.log_text() and "'t'" in p.log_text()
    # nothing written (temporary views another test left in the session are not the schema's)
    assert [r[1] for r in p.rows("show tables in {s}") if not r[2]] == ["changes"]
