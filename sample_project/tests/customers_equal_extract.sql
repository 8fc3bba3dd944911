-- every day the customers chain holds reads exactly as that day's export (chain_input='full')
with chain as (
    select customer_id, name, tier, region, dt from {{ ref('ods_customers') }}
),
export as (
    select customer_id, name, tier, region, dt from {{ ref('customers_extract') }}
    where dt in (select distinct dt from chain)
)
select 'only in the chain' as side, c.* from (select * from chain except select * from export) c
union all
select 'only in the export' as side, e.* from (select * from export except select * from chain) e
