{#-- For chain models (chain_incremental, or incremental with chain_table) `this` is a view, so
     dbt's is_incremental() would always be false: here it is true when the run writes the
     delta branch. Every other model gets dbt-core's rule, inlined: `dbt.is_incremental()`
     resolves back to this override (adapter macros shadow the global project's in the `dbt`
     namespace) and would recurse forever. --#}
{% macro is_incremental() %}
  {%- if not execute -%}
    {{ return(False) }}
  {%- elif model.config.materialized == 'chain_incremental' or model.config.get('chain_table') -%}
    {{ return(adapter.chain_is_incremental(this, model.config, should_full_refresh())) }}
  {%- else -%}
    {%- set relation = adapter.get_relation(this.database, this.schema, this.table) -%}
    {{ return(relation is not none
              and relation.type == 'table'
              and model.config.materialized == 'incremental'
              and not should_full_refresh()) }}
  {%- endif -%}
{% endmacro %}
