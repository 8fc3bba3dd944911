#!/usr/bin/env bash
# The sample project end to end on a fresh catalog: seed a binlog, bootstrap the ODS chain table
# from the initial full export, run five daily change loads (each also updating a downstream
# aggregate from the day's chain_changes), compact one day, run a downstream model and the dbt
# tests on merged days, then print chain_status and an expiration dry run.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
bash "$repo/scripts/setup.sh"
export PATH="$repo/.venv/bin:$PATH" SPARK_LOCAL_IP=127.0.0.1 DBT_SEND_ANONYMOUS_USAGE_STATS=false
export CHAINTABLE_STATE="${CHAINTABLE_STATE:-$repo/sample_project/.state}"
rm -rf "$CHAINTABLE_STATE" && mkdir -p "$CHAINTABLE_STATE"
cd "$repo/sample_project"
export DBT_PROFILES_DIR="$PWD"
step() { echo; echo "==> $*"; }

step "seed the binlog (8 days of order changes, 3 regions) and the customers' daily exports"
dbt seed --quiet
step "bootstrap: day 20250801 is the full export -> snapshot branch"
dbt run --select ods_orders orders_by_status ods_customers --vars '{dt: "20250801"}'
for d in 20250802 20250803 20250804 20250805 20250806; do
  step "daily run $d: only the day's changes -> delta branch; orders_by_status from chain_changes"
  dbt run --select ods_orders orders_by_status ods_customers --vars "{dt: \"$d\"}"
done
step "compact 20250804 into the snapshot branch (every region)"
dbt run-operation compact_chain --args '{model: ods_orders, partition: {dt: "20250804"}}'
step "daily run 20250807 (anchors on the compacted day)"
dbt run --select ods_orders orders_by_status ods_customers --vars '{dt: "20250807"}'
step "downstream model and dbt tests on the merged day 20250807"
dbt run --select daily_order_stats --vars '{dt: "20250807"}'
dbt test --vars '{dt: "20250807"}'
step "dbt tests on an uncompacted day in the middle of the chain (20250803)"
dbt test --select ods_orders chain_equals_full_recompute --vars '{dt: "20250803"}'
step "a downstream incremental model over the chain: the days it does not hold yet"
dbt run --select daily_region_orders
step "chain_status"
dbt run-operation chain_status --args '{model: ods_orders}'
step "expiration dry run: what the ten-year retention will drop on 2035-08-06"
dbt run-operation expire_chain --args '{model: ods_orders, now: "2035-08-06 00:00:00", dry_run: true}'
echo
echo "sample project: OK (catalog in $CHAINTABLE_STATE)"
