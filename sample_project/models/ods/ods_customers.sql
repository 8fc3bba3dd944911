{{ config(
    materialized='chain_incremental',
    partition_by=['region', 'dt'],
    chain_partition_keys=['dt'],
    primary_key=['customer_id', 'region', 'dt'],
    chain_input='full',
    chain_partition={'dt': var('dt')}
) }}
-- the CRM gives a full export of its customers every day and no change log: with
-- chain_input='full' the chain stores only what differs from the day before (a customer gone
-- from the export is a delete), and every day reads back as its export
select customer_id, name, tier, region, dt
from {{ ref('customers_extract') }}
where dt = '{{ var("dt") }}'
