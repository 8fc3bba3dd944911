{#-- clone: a parquet or orc table has no zero-copy clone in Spark (dbt-spark's needs delta's
     SHALLOW CLONE), so every node becomes a view over the state's relation, what dbt does
     where a table cannot be cloned; a chain model's view over the state's chain view. A
     relation already there is kept unless --full-refresh (README: dbt commands). --#}
{% macro chaintable__can_clone_table() %}
  {{ return(False) }}
{% endmacro %}

{%- materialization clone, adapter='chaintable' -%}
  {%- if not defer_relation -%}
    {{ log("No relation found in state manifest for " ~ model.unique_id, info=True) }}
    {{ return({'relations': []}) }}
  {%- endif -%}
  {%- set existing = load_cached_relation(this) -%}
  {%- if existing and not flags.FULL_REFRESH -%}
    {{ log("Relation " ~ existing ~ " already exists", info=True) }}
    {{ return({'relations': []}) }}
  {%- endif -%}
  {#-- a table (a chain's view counts as one, adapter.get_relation) makes way for the view --#}
  {%- if existing and not existing.is_view -%}
    {% do adapter.drop_relation(existing) %}
  {%- endif -%}
  {%- set target = this.incorporate(type='view') -%}
  {%- call statement('main') -%}
    {{ get_create_view_as_sql(target, sql) }}
  {%- endcall -%}
  {%- do apply_grants(target, config.get('grants'), should_revoke(existing, full_refresh_mode=True)) -%}
  {%- do persist_docs(target, model) -%}
  {{ return({'relations': [target]}) }}
{%- endmaterialization -%}
