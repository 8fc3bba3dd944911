"""Property tests: random histories of delta writes (new days and backfills), compactions and
expirations, planned by chain/state.py, compaction/plan.py and expiration/plan.py and executed
in memory, against a reference model that simply replays every delta ever written on top of the
bootstrap snapshot.

Invariant: every partition that still exists reads exactly the reference's full state of its
day, except reads built on a snapshot that chain_status would list as stale (a delta before it
was rewritten later); recompacting those (overwrite) in chain order restores the invariant."""

import datetime as dt
import random

import pytest

from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.chain.state import ChainState
from dbt.adapters.chaintable.compaction.plan import plan_compaction, stale_after_compaction
from dbt.adapters.chaintable.expiration import plan as expire
from dbt.adapters.chaintable.expiration.plan import expirable

OPTS = ChainOptions(partition_by=("g", "dt"), chain_keys=("dt",), primary_key=("k", "g", "dt"))
GROUPS = [("a",), ("b",), ("c",)]
DAY0 = dt.datetime(2025, 1, 1)


def day(n):
    return ((DAY0 + dt.timedelta(days=n)).strftime("%Y%m%d"),)


def time_of(group, chain):
    return dt.datetime.strptime(chain[0], "%Y%m%d")


class Model:
    """Both branches in memory: {(group, chain): {key: (kind, value)}}."""

    def __init__(self, rnd):
        self.rnd = rnd
        self.snap, self.delta = {}, {}
        self.history = {}  # every delta ever written (expiration does not forget them)
        self.stale = set()  # snapshot partitions built before a delta they include was rewritten
        self.kept_from = {}  # what expiration records: {group: oldest snapshot kept}
        self.boot = {}
        for g in GROUPS[: rnd.randint(1, 3)]:
            self.boot[g] = {k: f"{g[0]}{k}v0" for k in range(rnd.randint(0, 6))}
            self.snap[g + day(0)] = {k: ("+I", v) for k, v in self.boot[g].items()}

    def state(self):
        return ChainState.build(OPTS, self.snap, self.delta)

    # ---- reference ------------------------------------------------------------------------
    def truth(self, group, chain):
        full = dict(self.boot.get(group, {}))
        for part, rows in sorted(self.history.items(), key=lambda kv: kv[0][1:]):
            if part[:1] == tuple(group) and part[1:] <= tuple(chain):
                for k, (kind, v) in rows.items():
                    if kind in ("-D", "-U"):
                        full.pop(k, None)
                    else:
                        full[k] = v
        return full

    # ---- execution of a plan ----------------------------------------------------------------
    def read(self, plan):
        if plan.from_snapshot:
            return {k: v for k, (kind, v) in self.snap[plan.group + plan.chain].items()}
        full = (
            {k: v for k, (kind, v) in self.snap[plan.group + plan.anchor].items()}
            if plan.anchor
            else {}
        )
        for d in plan.deltas:
            for k, (kind, v) in self.delta[plan.group + d].items():
                if kind in ("-D", "-U"):
                    full.pop(k, None)
                else:
                    full[k] = v
        return full

    def depends_on_stale(self, plan):
        if plan.from_snapshot:
            return plan.group + plan.chain in self.stale
        return plan.anchor is not None and plan.group + plan.anchor in self.stale

    # ---- operations -------------------------------------------------------------------------
    def write_delta(self, n):
        groups = [g for g in GROUPS if self.rnd.random() < 0.7] or [GROUPS[0]]
        state = self.state()
        written = [g + day(n) for g in groups]
        if any(state.before_history(p, self.kept_from) for p in written):
            return  # the run is refused (run/planner.py, RunPlanner.plan): expired history cannot change
        for part in written:
            rows = {}
            for k in self.rnd.sample(range(10), self.rnd.randint(0, 4)):
                rows[k] = ("-D", None) if self.rnd.random() < 0.3 else ("+U", f"{part[0]}{k}v{n}")
            self.delta[part] = rows
            self.history[part] = rows
        # what chain_finish does: invalidate the same-valued snapshot, mark later ones stale
        self.stale |= set(state.stale_after_delta_write(written))
        for part in written:
            self.snap.pop(part, None)
            self.stale.discard(part)

    def compact(self, n, overwrite):
        plan = plan_compaction(
            self.state(), {"dt": day(n)[0]}, overwrite=overwrite, history=self.kept_from
        )
        for p in plan.writes:
            merged = self.read(p)
            if not self.depends_on_stale(p):
                assert merged == self.truth(p.group, p.chain)
            self.snap[p.group + p.chain] = {k: ("+I", v) for k, v in merged.items()}
        # what chain_compact does with the stale marks
        self.stale = {
            tuple(k) for k in stale_after_compaction(plan.writes, {s: s for s in self.stale})
        }
        return plan

    def expire(self, now_day, max_num):
        state = self.state()
        # what expiration_plan does: keep what the stale snapshots are rebuilt from
        snapshots, deltas, _ = expirable(state, self.stale)
        plan = expire.plan_expiration(
            [state.layout.split(p) for p in snapshots],
            [state.layout.split(p) for p in deltas],
            time_of,
            DAY0 + dt.timedelta(days=now_day),
            dt.timedelta(days=10),
            max_num,
        )
        for g, c in plan.delta_drops():
            del self.delta[g + c]
        for g in plan.groups:
            if g.segments:
                self.kept_from[g.group] = g.kept_from
        for g, c in plan.snapshot_drops():
            del self.snap[g + c]
            self.stale.discard(g + c)

    # ---- the invariant --------------------------------------------------------------------
    def check(self, allow_stale=True):
        state = self.state()
        for part in state.snapshots | state.deltas:
            g, c = state.layout.split(part)
            plan = state.plan_read(g, c)
            if allow_stale and self.depends_on_stale(plan):
                continue
            assert not self.depends_on_stale(plan), (part, plan)
            assert self.read(plan) == self.truth(g, c), (part, plan)


@pytest.mark.parametrize("seed", range(300))
def test_random_histories_read_like_the_reference(seed):
    rnd = random.Random(seed)
    m = Model(rnd)
    last = 0
    for _ in range(rnd.randint(5, 40)):
        op = rnd.random()
        if op < 0.55:
            last += rnd.randint(1, 3)
            m.write_delta(last)
        elif op < 0.65 and last > 0:
            m.write_delta(rnd.randint(1, last))  # backfill an old day
        elif op < 0.85 and last > 0:
            m.compact(rnd.randint(1, last), overwrite=rnd.random() < 0.3)
        elif last > 0:
            m.expire(rnd.randint(0, last + 15), rnd.choice([None, 1, 2]))
        m.check()
    # recompact every stale snapshot in chain order: then every read equals the reference
    for part in sorted(m.stale, key=lambda p: p[1]):
        if part in m.snap:
            state = m.state()
            if part not in state.deltas:
                # a stale snapshot with no delta of its own day: rebuild it from its inputs
                plan = state.plan_read(part[:1], part[1:], use_snapshot=False)
                assert plan is None
                continue
            m.compact(int((dt.datetime.strptime(part[1], "%Y%m%d") - DAY0).days), overwrite=True)
    m.stale = {p for p in m.stale if p in m.snap and p not in m.state().deltas}
    m.check(allow_stale=bool(m.stale))
