{#-- The classic job recomputes the day's full state from the whole binlog; the chain must give
     exactly the same rows. Any row returned is a difference (the test fails). --#}
{% set dt = var('dt') %}
with recomputed as (
  select order_id, customer, status, amount, region from (
    select *, row_number() over (partition by order_id, region
                                 order by op_seq desc, case when op in ('-U', '-D') then 0 else 1 end desc) as rn
    from {{ ref('orders_binlog') }} where dt <= '{{ dt }}'
  ) where rn = 1 and op not in ('-U', '-D')
),
chain as (
  select order_id, customer, status, amount, region from {{ ref('ods_orders') }} where dt = '{{ dt }}'
)
(select 'missing from chain' as problem, * from (select * from recomputed except all select * from chain))
union all
(select 'extra in chain' as problem, * from (select * from chain except all select * from recomputed))
