{#-- chain_incremental: the first run (or --full-refresh) writes the snapshot branch, later runs
     write the day's changes to the delta branch; chain_branch forces either, on any run. The
     relation `this` becomes a view that reads the chain (full state of every partition). Python
     plans, checks, publishes and cleans up under the table's lock (adapter.chain_*); this macro
     only calls it. --#}
{% materialization chain_incremental, adapter='chaintable', supported_languages=['sql'] %}
  {%- set run = adapter.chain_prepare(this, model.name, model.config, should_full_refresh(), flags.FULL_REFRESH, flags.EMPTY) -%}
  {{ return(chain_write(run, adapter.chain_execute)) }}
{% endmaterialization %}

{#-- The steps of a chain run once prepared, for chain_incremental and for each batch of a chain
     with batches (incremental.sql): `write(run, compiled_code)` writes it and gives the message. --#}
{% macro chain_write(run, write) %}
  {{ run_hooks(pre_hooks, inside_transaction=False) }}

  {#-- an enforced contract: dbt's own check of the query's columns and types, before any write --#}
  {%- if run.writes and config.get('contract').enforced -%}
    {%- do assert_columns_equivalent(compiled_code) -%}
  {%- endif -%}

  {%- set message = write(run, compiled_code) -%}
  {%- call noop_statement('main', message) -%}{{ compiled_code }}{%- endcall -%}

  {{ run_hooks(post_hooks, inside_transaction=False) }}
  {{ return({'relations': run.relations}) }}
{% endmacro %}
