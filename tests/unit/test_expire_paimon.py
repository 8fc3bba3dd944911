"""Paimon's own expiration scenarios (docs/design.md#expiration) ported to our pure planner.

Sources (apache/paimon): org.apache.paimon.operation.ChainTablePartitionExpireTest, and the
partition-level part of org.apache.paimon.table.ChainTableSnapshotExpireTest. Each test keeps
Paimon's partitions, expiration time, max-num, "now" and expected result; Paimon's
`partition.timestamp-pattern` is `$dt` with formatter `yyyyMMdd` throughout (our `daily`).
Paimon's "list partitions after expire" becomes "partitions minus the plan's drops" of the same
branch; its returned `expired` list (deltas, then snapshots) becomes `expired(plan)`; its
`isValueAllExpired(partitions, now)` becomes "every given partition is dropped by the plan"
(equivalent without max-num: Paimon retains exactly what is at or after the group's anchor).
"""

import datetime as dt

from test_expire import D30, parts, plan_daily, ts

NOW = "2025-03-31 00:00:00"  # Paimon's LocalDateTime.of(2025, 3, 31, 0, 0)


def expired(plan):
    """Paimon's return value of expire(): the dropped delta specs, then the snapshot specs."""
    return plan.delta_drops() + plan.snapshot_drops()


def remaining(partitions, drops):
    """A branch's partitions after the plan ran (Paimon's listPartitions after expire)."""
    dropped = set(drops)
    return sorted(p for p in partitions if p not in dropped)


def all_expired(plan, partitions):
    """Paimon's isValueAllExpired: every partition given is one the plan drops."""
    dropped = set(expired(plan))
    return all(p in dropped for p in partitions)


class TestChainTablePartitionExpire:
    def test_expire_with_single_partition_key(self):
        """Paimon ChainTablePartitionExpireTest.testExpireWithSinglePartitionKey."""
        snaps = parts("20250101", "20250201", "20250301")
        deltas = parts("20250110", "20250115", "20250210", "20250215", "20250315")
        plan = plan_daily(snaps, deltas, NOW, expiration=dt.timedelta(days=20))
        assert plan.cutoff == ts("2025-03-11 00:00:00")
        assert expired(plan)
        assert remaining(snaps, plan.snapshot_drops()) == parts("20250301")
        assert remaining(deltas, plan.delta_drops()) == parts("20250315")

    def test_no_expire_when_only_one_snapshot_before_cutoff(self):
        """Paimon ChainTablePartitionExpireTest.testNoExpireWhenOnlyOneSnapshotBeforeCutoff."""
        snaps, deltas = parts("20250201", "20250315"), parts("20250205")
        plan = plan_daily(snaps, deltas, NOW, expiration=D30)
        assert expired(plan) == [] and plan.is_empty()
        assert remaining(snaps, plan.snapshot_drops()) == parts("20250201", "20250315")
        assert remaining(deltas, plan.delta_drops()) == parts("20250205")

    def test_expire_multiple_segments(self):
        """Paimon ChainTablePartitionExpireTest.testExpireMultipleSegments."""
        snaps = parts("20250101", "20250115", "20250201", "20250315")
        deltas = parts("20250105", "20250120", "20250210")
        plan = plan_daily(snaps, deltas, NOW, expiration=D30)
        assert plan.cutoff == ts("2025-03-01 00:00:00")
        assert remaining(snaps, plan.snapshot_drops()) == parts("20250201", "20250315")
        assert remaining(deltas, plan.delta_drops()) == parts("20250210")

    def test_no_expire_when_no_snapshots_before_cutoff(self):
        """Paimon ChainTablePartitionExpireTest.testNoExpireWhenNoSnapshotsBeforeCutoff."""
        plan = plan_daily(parts("20250315", "20250320"), parts("20250316"), NOW, expiration=D30)
        assert expired(plan) == [] and plan.is_empty()

    def test_max_expire_num_limits_segments(self):
        """Paimon ChainTablePartitionExpireTest.testMaxExpireNumLimitsSegments."""
        snaps = parts("20250101", "20250115", "20250201", "20250315")
        deltas = parts("20250105", "20250120", "20250210")
        plan = plan_daily(snaps, deltas, NOW, max_num=1, expiration=D30)
        assert len(expired(plan)) == 2  # 1 segment = S 0101 + D 0105
        assert remaining(snaps, plan.snapshot_drops()) == parts("20250115", "20250201", "20250315")
        assert remaining(deltas, plan.delta_drops()) == parts("20250120", "20250210")

    def test_expire_with_group_partition(self):
        """Paimon ChainTablePartitionExpireTest.testExpireWithGroupPartition."""
        snaps = parts("20250101", "20250201", "20250301", group=("US",)) + parts(
            "20250215", "20250320", group=("EU",)
        )
        deltas = parts("20250110", "20250210", group=("US",)) + parts("20250220", group=("EU",))
        plan = plan_daily(snaps, deltas, NOW, expiration=D30)
        assert len(expired(plan)) == 2
        assert remaining(snaps, plan.snapshot_drops()) == sorted(
            parts("20250201", "20250301", group=("US",))
            + parts("20250215", "20250320", group=("EU",))
        )
        assert remaining(deltas, plan.delta_drops()) == sorted(
            parts("20250210", group=("US",)) + parts("20250220", group=("EU",))
        )

    def test_uses_branch_specific_partition_modifications(self):
        """Paimon ChainTablePartitionExpireTest.testUsesBranchSpecificPartitionModifications."""
        # only the partition values: the `.done` partitions Paimon also drops through its
        # metastore callbacks have no counterpart here
        plan = plan_daily(
            parts("20250101", "20250201", "20250301"),
            parts("20250110", "20250210"),
            NOW,
            expiration=D30,
        )
        assert plan.delta_drops() == parts("20250110")
        assert plan.snapshot_drops() == parts("20250101")

    def test_is_value_all_expired_returns_false_for_anchor(self):
        """Paimon ChainTablePartitionExpireTest.testIsValueAllExpiredReturnsFalseForAnchor."""
        plan = plan_daily(parts("20250101", "20250201", "20250301"), [], NOW, expiration=D30)
        [expired0101], [anchor0201] = parts("20250101"), parts("20250201")
        assert not all_expired(plan, [anchor0201])
        assert all_expired(plan, [expired0101])
        assert not all_expired(plan, [expired0101, anchor0201])

    def test_is_value_all_expired_returns_false_when_too_few_snapshots(self):
        """Paimon ChainTablePartitionExpireTest.testIsValueAllExpiredReturnsFalseWhenTooFewSnapshots."""
        plan = plan_daily(parts("20250201", "20250315"), [], NOW, expiration=D30)
        assert not all_expired(plan, parts("20250201"))

    def test_is_value_all_expired_returns_false_for_delta_only_group(self):
        """Paimon ChainTablePartitionExpireTest.testIsValueAllExpiredReturnsFalseForDeltaOnlyGroup."""
        plan = plan_daily([], parts("20250101", "20250201"), NOW, expiration=D30)
        assert not all_expired(plan, parts("20250101"))

    def test_is_value_all_expired_with_group_partitions(self):
        """Paimon ChainTablePartitionExpireTest.testIsValueAllExpiredWithGroupPartitions."""
        snaps = parts("20250101", "20250201", "20250301", group=("US",)) + parts(
            "20250215", "20250320", group=("EU",)
        )
        plan = plan_daily(snaps, [], NOW, expiration=D30)
        [us_expired] = parts("20250101", group=("US",))
        [us_anchor] = parts("20250201", group=("US",))
        [eu_retained] = parts("20250215", group=("EU",))
        assert all_expired(plan, [us_expired])
        assert not all_expired(plan, [us_anchor])
        assert not all_expired(plan, [eu_retained])
        assert not all_expired(plan, [us_expired, eu_retained])

    def test_is_value_all_expired_returns_false_for_partitions_after_cutoff(self):
        """Paimon ChainTablePartitionExpireTest.testIsValueAllExpiredReturnsFalseForPartitionsAfterCutoff."""
        plan = plan_daily(parts("20250101", "20250315"), [], NOW, expiration=D30)
        assert not all_expired(plan, parts("20250315"))


class TestChainTableSnapshotExpire:
    """Partition outcome only: Paimon's metadata-snapshot retention has no counterpart here.
    Paimon's dates are relative to LocalDate.now(); a fixed mid-day "now" stands for it."""

    TODAY = dt.datetime(2025, 6, 15, 13, 45, 7)

    def day(self, offset):
        return (self.TODAY + dt.timedelta(days=offset)).strftime("%Y%m%d")

    def plan(self, snaps, deltas):
        return plan_daily(snaps, deltas, self.TODAY.strftime("%Y-%m-%d %H:%M:%S"), expiration=D30)

    def test_delta_commit_expires_snapshot_branch_snapshots_after_partition_expiration(self):
        """Paimon ChainTableSnapshotExpireTest.testDeltaCommitExpiresSnapshotBranchSnapshotsAfterPartitionExpiration."""
        snaps = parts(self.day(-90), self.day(-65), self.day(-40))
        deltas = parts(self.day(-10))
        plan = self.plan(snaps, deltas)
        assert remaining(snaps, plan.snapshot_drops()) == parts(self.day(-40))
        assert (
            remaining(deltas, plan.delta_drops()) == deltas
        )  # follows; Paimon asserts snapshots only

    def test_delta_commit_preserves_snapshot_branch_retention_policy(self):
        """Paimon ChainTableSnapshotExpireTest.testDeltaCommitPreservesSnapshotBranchRetentionPolicy."""
        # the partition outcome is the same for every @CsvSource row (they vary snapshot retention)
        snaps = parts(self.day(-90), self.day(-65), self.day(-40))
        deltas = parts(self.day(-10), self.day(-9), self.day(-8), self.day(-7))
        plan = self.plan(snaps, deltas)
        assert remaining(snaps, plan.snapshot_drops()) == parts(self.day(-40))
        assert (
            remaining(deltas, plan.delta_drops()) == deltas
        )  # follows; Paimon asserts snapshots only
