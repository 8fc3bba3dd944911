{#-- The ODS orders table: each run stores only the day's binlog changes (delta branch); the
     first run (or --full-refresh) stores the initial full export (snapshot branch).
     `ref('ods_orders')` always reads full days. History is kept ten years: expiration is
     checked at the end of a run, at most once a day. Each run also stores the day's changes
     (chain_store_changes), which orders_by_status reads through chain_changes. --#}
{{ config(
    materialized='chain_incremental',
    partition_by=['region', 'dt'],
    chain_partition_keys=['dt'],
    primary_key=['order_id', 'region', 'dt'],
    sequence_field='op_seq',
    rowkind_field='op',
    chain_partition={'dt': var('dt')},
    partition_timestamp_pattern='$dt',
    partition_timestamp_formatter='yyyyMMdd',
    partition_expiration_time='3650 d',
    partition_expiration_check_interval='1 d',
    chain_store_changes=true,
) }}

select order_id, customer, status, amount, op, op_seq, region, dt
from {{ ref('orders_binlog') }}
where dt = '{{ var("dt") }}'
