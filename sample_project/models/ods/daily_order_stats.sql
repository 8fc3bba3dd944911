{#-- A downstream model: reads the full state of the day from the chain, as if it were stored. --#}
{{ config(materialized='table') }}

select region, status, count(*) as orders, sum(amount) as amount, '{{ var("dt") }}' as dt
from {{ ref('ods_orders') }}
where dt = '{{ var("dt") }}'
group by region, status
