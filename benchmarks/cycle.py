"""The cycle cost of a bench_chain.py run: what a table costs over the days of the run when it is
read k times a day, chain / classic. Reads only a run's JSON (no Spark), so report.py and
bench_sweep.py compute it for any committed run.

A cycle is days 2..D: every daily run (the chain's compaction days with their inline
compaction) plus k reads of each new day right after its run (the chain through its view, the
classic job from its stored partition; each read the median of the run's rounds). Day 1, the
first load, happens once per table, not once per cycle: it is left out, and reported apart.
"""

from __future__ import annotations

from typing import Any

READS_A_DAY = (1, 3, 10)  # the k of the break-even map


def cycle_seconds(result: dict[str, Any], which: str, k: int) -> float:
    """Seconds `which` ('baseline' or 'chain') spends over days 2..D with k reads a day."""
    via = "baseline" if which == "baseline" else "view"
    runs = {r["day"]: r["wall_s"] for r in result["daily_runs"][which]}
    return sum(runs[d["day"]] + k * d[via]["median_s"] for d in result["day_reads"])


def cycle_ratio(result: dict[str, Any], k: int) -> float:
    """The chain's cycle cost over the classic job's, read k times a day."""
    return cycle_seconds(result, "chain", k) / cycle_seconds(result, "baseline", k)


def cycle_ratios(result: dict[str, Any]) -> dict[str, float]:
    return {f"cycle_k{k}": cycle_ratio(result, k) for k in READS_A_DAY}


def policy_ratio(rate: float, reads_a_day: int) -> float:
    """The `max_cumulative_ratio` a table changing `rate` of its keys a day and read
    `reads_a_day` times a day is given (docs in benchmarks/README.md, "bench_sweep.py").

    A compaction costs C, about what the classic job's daily run costs (bench_chain at 10M:
    compaction 0.83 of it). Between compactions a read of a delta-only day costs more than a
    stored day's by a part that grows with the keys changed since the anchor (the cumulative
    delta the read merges): a * c of a stored day's read R, c = rate * days since the anchor.
    Over L days the reads' excess is k * R * a * rate * L^2 / 2 and the compaction C, so the
    cost a day is least at L = sqrt(2 C / (k R a rate)), which is a policy of
    x = rate * L = sqrt(2 C rate / (k R a)). Measured at 10M (bench_chain_n10000000_g1.json):
    C / R ~ 7 (a compaction 15.8 s, a read 2.3 s) and a ~ 2 (a day 1 delta after its anchor,
    c ~ 0.01, read at 1.08x; the days 2-6 deltas after it, c ~ 0.04, at 1.18x on average), so
    x ~ sqrt(7 rate / k)."""
    return round((7 * rate / reads_a_day) ** 0.5, 3)
