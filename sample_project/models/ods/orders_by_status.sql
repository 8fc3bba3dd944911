{#-- A downstream aggregate maintained from the chain's changes (README "History"): each day is
     the previous day it holds plus the day's chain_changes, before images subtracted and after
     images added, so a day reads only the keys that changed, never the full day. The first day
     (or --full-refresh, or a day with no earlier one) aggregates the full day. Run the days in
     order: a rerun of an earlier day leaves the later ones as they were. --#}
{{ config(materialized='incremental', incremental_strategy='insert_overwrite',
          partition_by=['dt'], file_format='parquet') }}
{%- set dt = var('dt') -%}
{#- the latest day this model holds before dt, from the catalog's partition list (a query
     of max(dt) would read the table's files) -#}
{%- set found = namespace(prev=none) -%}
{%- if is_incremental() -%}
  {%- for row in run_query("show partitions " ~ this) -%}
    {%- set day = row[0].split('=', 1)[1] -%}
    {%- if day < dt and (found.prev is none or day > found.prev) -%}
      {%- set found.prev = day -%}
    {%- endif -%}
  {%- endfor -%}
{%- endif -%}
{%- set prev = found.prev -%}
{%- if prev is none %}
select status, count(*) as orders, cast(sum(amount) as decimal(22, 2)) as amount, '{{ dt }}' as dt
from {{ ref('ods_orders') }}
where dt = '{{ dt }}'
group by status
{%- else %}
with changes as (
  select * from {{ chain_changes(ref('ods_orders'), {'dt': prev}, {'dt': dt}) }} c
),
moves as (
  select status, orders, amount from {{ this }} where dt = '{{ prev }}'
  union all
  {# one read of the changes (Spark computes a CTE once per reference): each change's before
     image out, its after image in #}
  select m.status, m.orders, m.amount
  from changes
  lateral view inline(filter(array(
    case when ct__change <> 'insert'
      then named_struct('status', ct__before.status, 'orders', -1, 'amount', -ct__before.amount) end,
    case when ct__change <> 'delete'
      then named_struct('status', status, 'orders', 1, 'amount', amount) end
  ), x -> x is not null)) m
)
select status, sum(orders) as orders, cast(sum(amount) as decimal(22, 2)) as amount, '{{ dt }}' as dt
from moves
group by status
having sum(orders) <> 0
{%- endif %}
