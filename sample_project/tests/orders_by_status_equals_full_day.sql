{#-- orders_by_status, built day by day from the chain's changes, must hold on every day it has
     exactly the aggregate of the chain's full day read through the view. Any row returned is a
     difference (the test fails). --#}
with days as (select distinct dt from {{ ref('orders_by_status') }}),
recomputed as (
  select status, count(*) as orders, cast(sum(amount) as decimal(22, 2)) as amount, dt
  from {{ ref('ods_orders') }}
  where dt in (select dt from days)
  group by status, dt
),
maintained as (select status, orders, amount, dt from {{ ref('orders_by_status') }})
(select 'missing from orders_by_status' as problem, * from (select * from recomputed except all select * from maintained))
union all
(select 'extra in orders_by_status' as problem, * from (select * from maintained except all select * from recomputed))
