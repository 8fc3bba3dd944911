{#-- snapshot: dbt's snapshot on plain parquet or orc tables (dbt-spark's needs delta, iceberg or
     hudi, for MERGE INTO). dbt's own SQL builds the first table (build_snapshot_table) and the
     staging rows of each later run (snapshot_staging_table, as dbt-spark's view); the new
     table is then computed whole (the old rows, closed where the staging says so, plus its
     inserts), written aside and switched in with one metastore statement (README: dbt
     commands). Hooks run in dbt's order without the `commit;` Spark refuses. --#}
{% materialization snapshot, adapter='chaintable' %}
  {%- set file_format = config.get('file_format') or 'parquet' -%}
  {%- if file_format not in ['parquet', 'orc'] -%}
    {% do exceptions.raise_compiler_error("snapshot '" ~ model.name ~ "': file_format '" ~ file_format
         ~ "' is not supported; the snapshot is a parquet (default) or orc table") %}
  {%- endif -%}
  {%- if config.get('partition_by') -%}
    {#-- the switch moves the table's location, and a partition keeps its own --#}
    {% do exceptions.raise_compiler_error("snapshot '" ~ model.name ~ "': partition_by is not supported"
         ~ " (each run replaces the whole table by switching its location)") %}
  {%- endif -%}
  {%- set exists, target = get_or_create_relation(database=none, schema=model.schema,
        identifier=model.get('alias', model.get('name')), type='table') -%}
  {%- if not adapter.check_schema_exists(model.database, model.schema) -%}
    {% do create_schema(target) %}
  {%- endif -%}
  {%- if not target.is_table -%}
    {% do exceptions.relation_wrong_type(target, 'table') %}
  {%- endif -%}

  {{ chain_run_hooks(pre_hooks, inside_transaction=False) }}
  {{ chain_run_hooks(pre_hooks, inside_transaction=True) }}
  {%- set strategy = strategy_dispatch(config.get('strategy'))(model, "snapshotted_data", "source_data", model['config'], exists) -%}

  {%- if not exists -%}
    {%- call statement('main') -%}
      {{ create_table_as(False, target, build_snapshot_table(strategy, model['compiled_code'])) }}
    {%- endcall -%}
  {%- else -%}
    {%- set names = config.get('snapshot_table_column_names') or get_snapshot_table_column_names() -%}
    {{ adapter.assert_valid_snapshot_target_given_strategy(target, names, strategy) }}
    {%- set staging = spark_build_snapshot_staging_table(strategy, sql, target) -%}
    {%- set internal = chaintable_snapshot_internal_columns(strategy) -%}
    {%- do create_columns(target, adapter.get_missing_columns(staging, target) | rejectattr('name', 'in', internal) | list) -%}
    {%- do chaintable_snapshot_replace(target, staging, names, file_format) -%}
    {%- do post_snapshot(staging) -%}
  {%- endif -%}

  {%- do apply_grants(target, config.get('grants'), should_revoke(exists, full_refresh_mode=False)) -%}
  {%- do persist_docs(target, model) -%}
  {{ chain_run_hooks(post_hooks, inside_transaction=True) }}
  {{ chain_run_hooks(post_hooks, inside_transaction=False) }}
  {{ return({'relations': [target]}) }}
{% endmaterialization %}

{#-- the staging columns that are dbt's bookkeeping, not the snapshot's (as dbt's default) --#}
{% macro chaintable_snapshot_internal_columns(strategy) %}
  {%- set names = ['dbt_change_type', 'dbt_unique_key'] -%}
  {%- if strategy.unique_key | is_list -%}
    {%- for key in strategy.unique_key -%}{%- do names.append('dbt_unique_key_' ~ loop.index) -%}{%- endfor -%}
  {%- endif -%}
  {{ return(names + names | map('upper') | list) }}
{% endmacro %}

{#-- The new table: every old row, its valid_to set where the staging closes it (an update or a
     delete of a current row, as dbt's MERGE does), and the staging's inserts, each column taken
     by name (a column the source no longer has stays null). --#}
{% macro chaintable_snapshot_rows_sql(target, staging, names) %}
  {%- set columns = adapter.get_columns_in_relation(target) -%}
  {%- set staged = adapter.get_columns_in_relation(staging) | map(attribute='name') | map('lower') | list -%}
  {%- set current = config.get('dbt_valid_to_current') -%}
  select
  {%- for c in columns %}
    {% if c.name | lower == names.dbt_valid_to | lower -%}
    case when closing.scd_id is null then old.{{ adapter.quote(c.name) }} else closing.valid_to end
    {%- else -%}
    old.{{ adapter.quote(c.name) }}
    {%- endif %} as {{ adapter.quote(c.name) }}{{ ',' if not loop.last }}
  {%- endfor %}
  from {{ target }} as old
  left join (
    select {{ names.dbt_scd_id }} as scd_id, {{ names.dbt_valid_to }} as valid_to
    from {{ staging }} where dbt_change_type in ('update', 'delete')
  ) as closing
    on closing.scd_id = old.{{ names.dbt_scd_id }}
    and (old.{{ names.dbt_valid_to }} is null
         {%- if current %} or old.{{ names.dbt_valid_to }} = {{ current }}{% endif %})
  union all
  select
  {%- for c in columns %}
    {% if c.name | lower in staged -%}
    new.{{ adapter.quote(c.name) }}
    {%- else -%}
    cast(null as {{ c.data_type }})
    {%- endif %} as {{ adapter.quote(c.name) }}{{ ',' if not loop.last }}
  {%- endfor %}
  from {{ staging }} as new
  where new.dbt_change_type = 'insert'
{% endmacro %}

{#-- Writes the new table aside and switches the snapshot to it. The rows go to a scratch table
     of this run (a managed table: its own new directory), which records the directory the
     snapshot reads now; `ALTER TABLE ... SET LOCATION` then points the snapshot at the new
     directory: one metastore statement (0.12-0.36 s in tests/functional/test_snapshot_clone.py),
     so a reader sees the old table or the new one, never part of either, and a run that fails
     before it leaves the snapshot as it was (renaming the old table away and the new one in
     would leave a moment with no table, and dbt's create-or-replace rewrites the files in place). The scratch table is then pointed at the
     old directory and dropped, which deletes it. --#}
{% macro chaintable_snapshot_replace(target, staging, names, file_format) %}
  {%- set old_location = chaintable_table_location(target) -%}
  {%- do chaintable_snapshot_clean(target, old_location) -%}
  {%- set scratch = target.incorporate(path={'identifier': target.identifier ~ '__dbt_snapshot_' ~ (invocation_id | replace('-', ''))[:16]}) -%}
  {%- call statement('main') -%}
    create table {{ scratch }} using {{ file_format }} {{ clustered_cols(label="clustered by") }}
    tblproperties ('chaintable.snapshot.replaces' = '{{ old_location }}')
    as {{ chaintable_snapshot_rows_sql(target, staging, names) }}
  {%- endcall -%}
  {%- do adapter.chain_failpoint('snapshot.written') -%}
  {%- set new_location = chaintable_table_location(scratch) -%}
  {%- call statement('chaintable_snapshot_switch') -%}
    alter table {{ target }} set location '{{ new_location }}'
  {%- endcall -%}
  {%- do chaintable_snapshot_retire(scratch, old_location) -%}
{% endmacro %}

{#-- The scratch table takes the directory the snapshot left, and dropping it (a managed table)
     deletes that directory. --#}
{% macro chaintable_snapshot_retire(scratch, old_location) %}
  {%- call statement('chaintable_snapshot_retire') -%}
    alter table {{ scratch }} set location '{{ old_location }}'
  {%- endcall -%}
  {%- do adapter.drop_relation(scratch) -%}
{% endmacro %}

{#-- A scratch table an earlier run left: one that failed before its switch holds rows no one
     reads (dropped with them); one that failed after it is the snapshot's directory now, and
     retires the directory it records instead. --#}
{% macro chaintable_snapshot_clean(target, location) %}
  {%- set prefix = (target.identifier ~ '__dbt_snapshot_') | lower -%}
  {%- for row in run_query("show tables in " ~ target.schema ~ " like '" ~ prefix ~ "*'") -%}
    {%- set found = target.incorporate(path={'identifier': row[1]}) -%}
    {%- if (row[1] | lower).startswith(prefix) -%}
      {%- if chaintable_table_location(found) == location -%}
        {%- set props = run_query('show tblproperties ' ~ found ~ " ('chaintable.snapshot.replaces')") -%}
        {%- do chaintable_snapshot_retire(found, props.rows[0][1]) -%}
      {%- else -%}
        {%- do adapter.drop_relation(found) -%}
      {%- endif -%}
    {%- endif -%}
  {%- endfor -%}
{% endmacro %}

{% macro chaintable_table_location(relation) %}
  {%- for row in run_query('describe table extended ' ~ relation) -%}
    {%- if row[0] == 'Location' -%}{{ return(row[1] | trim) }}{%- endif -%}
  {%- endfor -%}
  {% do exceptions.raise_compiler_error("no location found for " ~ relation) %}
{% endmacro %}

{#-- dbt's columns of a relation. dbt-spark's macro returns the rows of `describe extended`,
     which have no `name`: dbt's hard_deletes='new_record' staging, its one caller, then took
     every column of a deletion record from the missing source row (all null) --#}
{% macro chaintable__get_columns_in_relation(relation) %}
  {{ return(adapter.get_columns_in_relation(relation)) }}
{% endmacro %}
