{#-- chain_incremental: the first run (or --full-refresh) writes the snapshot branch, later runs
     write the day's changes to the delta branch; chain_branch forces either, on any run. The
     relation `this` becomes a view that reads the chain (full state of every partition). Python
     plans, checks, publishes and cleans up under the table's lock (adapter.chain_*); this macro
     only calls it, then applies dbt's conventions (README: dbt conventions). --#}
{% materialization chain_incremental, adapter='chaintable', supported_languages=['sql'] %}
  {#-- batch_size and no chain_partition: the model's batches, each a chain run of its own,
       in this one node (docs/design.md#batches) --#}
  {%- if adapter.chain_loops(model.config) -%}
    {%- set run = adapter.chain_prepare_loop(this, model.name, model.config, invocation_args_dict,
          var('chain_rewrite', false), should_full_refresh(), flags.FULL_REFRESH,
          chain_partial_input(), model, chain_grants_probe()) -%}
    {{ return(chain_write(run, adapter.chain_execute_loop)) }}
  {%- endif -%}
  {%- set run = adapter.chain_prepare(this, model.name, model.config, should_full_refresh(), flags.FULL_REFRESH, chain_partial_input(), model, chain_grants_probe()) -%}
  {{ return(chain_write(run, adapter.chain_execute)) }}
{% endmaterialization %}

{#-- Whether the model's refs and sources give only part of their rows: --empty (none), or
     --sample (those with event_time give only its window's). The run then writes only the rows
     the model returns: no empty "no changes" partition, which would replace a held day's real
     deltas with nothing, and no expiration (README: dbt conventions). Written, not refused: a
     sampled `dbt run` of a whole project runs its chains too, as dbt's own incremental models
     take the sample's rows (tests/functional/test_dbt_features.py). --#}
{% macro chain_partial_input() %}
  {{ return(flags.EMPTY or invocation_args_dict.get('sample') is not none) }}
{% endmacro %}

{#-- dbt's own statement that shows the view's grants, when the model configures some: the run
     refuses grants before writing anything where the server has none --#}
{% macro chain_grants_probe() %}
  {{ return(get_show_grant_sql(this) if config.get('grants') else none) }}
{% endmacro %}

{#-- The steps of a chain run once prepared, for chain_incremental and for each batch of a chain
     with batches (incremental.sql): `write(run, compiled_code)` writes it and gives the result
     (its message and the rows it wrote). --#}
{% macro chain_write(run, write) %}
  {#-- the hooks in dbt's order (pre outside, pre inside, ..., post inside, post outside), after
       chain_prepare's checks: a config it refuses runs none --#}
  {{ chain_run_hooks(pre_hooks, inside_transaction=False) }}
  {{ chain_run_hooks(pre_hooks, inside_transaction=True) }}

  {#-- an enforced contract: dbt's own check of the query's columns and types, before any write --#}
  {%- if run.writes and config.get('contract').enforced -%}
    {%- do assert_columns_equivalent(compiled_code) -%}
  {%- endif -%}

  {%- set result = write(run, compiled_code) -%}
  {%- call noop_statement('main', result.message, rows_affected=result.rows_affected) -%}{{ compiled_code }}{%- endcall -%}

  {%- if run.writes -%}
    {#-- readers read the view: the grants are its own (the branches get none) --#}
    {%- do apply_grants(run.relations[0], config.get('grants'), should_revoke(run.view_exists, full_refresh_mode=run.full_refresh)) -%}
    {%- do adapter.chain_persist_docs(run, model) -%}
  {%- endif -%}

  {{ chain_run_hooks(post_hooks, inside_transaction=True) }}
  {{ chain_run_hooks(post_hooks, inside_transaction=False) }}
  {{ return({'relations': run.relations}) }}
{% endmacro %}

{#-- dbt's run_hooks without the `commit;` it sends before the hooks outside the transaction
     (before_begin, after_commit): Spark has no transactions and refuses COMMIT; dbt-spark's
     connection makes dbt's own begin and commit no-ops (README: dbt conventions) --#}
{% macro chain_run_hooks(hooks, inside_transaction) %}
  {%- for hook in hooks | selectattr('transaction', 'equalto', inside_transaction) -%}
    {%- set rendered = render(hook.get('sql')) | trim -%}
    {%- if rendered | length > 0 -%}
      {%- call statement(auto_begin=inside_transaction) -%}{{ rendered }}{%- endcall -%}
    {%- endif -%}
  {%- endfor -%}
{% endmacro %}
