"""benchmarks/cycle.py: the cycle cost of a bench_chain run and the sweep's policy rule. Reads no
files but the module, no Spark."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("bench_cycle", ROOT / "benchmarks" / "cycle.py")
assert spec is not None and spec.loader is not None
cycle = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cycle)


def run_result() -> dict:
    """Three days: a full load (left out of the cycle), a delta day and a compaction day."""
    return {
        "daily_runs": {
            "baseline": [
                {"day": "d1", "wall_s": 50.0},
                {"day": "d2", "wall_s": 10.0},
                {"day": "d3", "wall_s": 12.0},
            ],
            "chain": [
                {"day": "d1", "wall_s": 90.0},
                {"day": "d2", "wall_s": 2.0},
                {"day": "d3", "wall_s": 11.0},
            ],
        },
        "day_reads": [
            {"day": "d2", "baseline": {"median_s": 1.0}, "view": {"median_s": 1.5}},
            {"day": "d3", "baseline": {"median_s": 2.0}, "view": {"median_s": 2.0}},
        ],
    }


def test_a_cycle_is_every_run_after_the_first_load_plus_k_reads_of_each_new_day() -> None:
    res = run_result()
    assert cycle.cycle_seconds(res, "baseline", 3) == 10 + 3 * 1 + 12 + 3 * 2
    assert cycle.cycle_seconds(res, "chain", 3) == 2 + 3 * 1.5 + 11 + 3 * 2
    assert cycle.cycle_ratio(res, 1) == pytest.approx((2 + 1.5 + 11 + 2) / (10 + 1 + 12 + 2))
    assert cycle.cycle_ratios(res) == {
        "cycle_k1": pytest.approx(16.5 / 25),
        "cycle_k3": pytest.approx(23.5 / 31),
        "cycle_k10": pytest.approx(48.0 / 52),
    }


def test_the_policy_compacts_sooner_the_more_a_table_changes_and_is_read() -> None:
    assert cycle.policy_ratio(0.01, 3) == pytest.approx(0.153)
    assert cycle.policy_ratio(0.05, 3) > cycle.policy_ratio(0.01, 3)
    assert cycle.policy_ratio(0.01, 10) < cycle.policy_ratio(0.01, 3)
    # the days between compactions, x / rate, shrink as the rate grows
    assert 0.2 / 0.2 < cycle.policy_ratio(0.2, 3) / 0.2 < cycle.policy_ratio(0.01, 3) / 0.01
