{#-- chain_incremental: the first run (or --full-refresh, or chain_branch='snapshot') writes the
     snapshot branch, later runs write the day's changes to the delta branch. The relation `this`
     becomes a view that reads the chain (full state of every partition). Python plans and checks
     (adapter.chain_*); this macro only runs the steps in order. --#}
{% materialization chain_incremental, adapter='chaintable', supported_languages=['sql'] %}
  {%- set run = adapter.chain_prepare(this, model.name, model.config, should_full_refresh(), flags.FULL_REFRESH) -%}

  {{ run_hooks(pre_hooks, inside_transaction=False) }}

  {%- for sql in adapter.chain_stage_sql(run, compiled_code) -%}
    {%- call statement('chain_stage') -%}{{ sql }}{%- endcall -%}
  {%- endfor -%}

  {%- set main_sql = adapter.chain_plan_write(run) -%}
  {%- call statement('main') -%}{{ main_sql }}{%- endcall -%}

  {%- do adapter.chain_finish(run) -%}

  {{ run_hooks(post_hooks, inside_transaction=False) }}
  {{ return({'relations': run.relations}) }}
{% endmaterialization %}
