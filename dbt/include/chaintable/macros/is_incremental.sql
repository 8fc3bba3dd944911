{#-- For chain_incremental models `this` is a view, so dbt's is_incremental() would always be
     false: here it is true when the run writes the delta branch. --#}
{% macro is_incremental() %}
  {%- if not execute -%}
    {{ return(False) }}
  {%- elif model.config.materialized == 'chain_incremental' -%}
    {{ return(adapter.chain_is_incremental(this, model.config, should_full_refresh())) }}
  {%- else -%}
    {{ return(dbt.is_incremental()) }}
  {%- endif -%}
{% endmacro %}
