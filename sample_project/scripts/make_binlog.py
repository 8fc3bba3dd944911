"""Writes seeds/orders_binlog.csv: a deterministic ODS binlog dump of an orders table.

Day 20250801 is the initial full export (every order as +I); each later day carries about 5 %
changes: status/amount updates (-U/+U pairs with one op_seq), new orders (+I) and deletes (-D),
for three regions. Run it again to regenerate the seed; the output is committed.
"""

import csv
import random
from pathlib import Path

REGIONS = ("CN", "EU", "US")
STATUSES = ("created", "paid", "shipped", "delivered", "cancelled")
DAYS = [f"202508{d:02d}" for d in range(1, 9)]


def main() -> None:
    rnd = random.Random(7)
    orders = {}
    rows = []
    seq = 0
    for oid in range(1, 121):
        region = REGIONS[oid % 3]
        orders[oid] = dict(
            order_id=oid,
            region=region,
            customer=f"c{rnd.randint(1, 40):03d}",
            status=rnd.choice(STATUSES[:3]),
            amount=f"{rnd.uniform(5, 500):.2f}",
        )
        seq += 1
        rows.append({**orders[oid], "op": "+I", "op_seq": seq, "dt": DAYS[0]})
    next_id = 121
    for day in DAYS[1:]:
        for oid in rnd.sample(sorted(orders), 5):  # updates
            old = orders[oid]
            new = {
                **old,
                "status": STATUSES[min(STATUSES.index(old["status"]) + 1, 3)],
                "amount": f"{float(old['amount']) * rnd.choice((1, 1, 0.9)):.2f}",
            }
            seq += 1
            rows.append({**old, "op": "-U", "op_seq": seq, "dt": day})
            rows.append({**new, "op": "+U", "op_seq": seq, "dt": day})
            orders[oid] = new
        for _ in range(2):  # new orders
            oid, next_id = next_id, next_id + 1
            orders[oid] = dict(
                order_id=oid,
                region=REGIONS[oid % 3],
                customer=f"c{rnd.randint(1, 40):03d}",
                status="created",
                amount=f"{rnd.uniform(5, 500):.2f}",
            )
            seq += 1
            rows.append({**orders[oid], "op": "+I", "op_seq": seq, "dt": day})
        oid = rnd.choice(sorted(orders))  # one delete
        seq += 1
        rows.append({**orders.pop(oid), "op": "-D", "op_seq": seq, "dt": day})
    out = Path(__file__).resolve().parents[1] / "seeds" / "orders_binlog.csv"
    with out.open("w", newline="") as f:
        w = csv.DictWriter(
            f, ["order_id", "region", "customer", "status", "amount", "op", "op_seq", "dt"]
        )
        w.writeheader()
        w.writerows(rows)
    print(f"{out}: {len(rows)} rows, {len(orders)} live orders after {DAYS[-1]}")


if __name__ == "__main__":
    main()
