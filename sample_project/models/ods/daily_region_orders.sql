{#-- A downstream incremental model over the chain: each run adds the days it does not hold
     yet, each day read in full from ref('ods_orders'). A microbatch model does the same per
     batch when the chain declares event_time='dt' (README, Batches). --#}
{{ config(materialized='incremental', incremental_strategy='insert_overwrite',
          partition_by=['dt']) }}
select region, count(*) as orders, sum(amount) as amount, dt
from {{ ref('ods_orders') }}
{% if is_incremental() -%}
where dt > (select max(dt) from {{ this }})
{%- endif %}
group by region, dt
