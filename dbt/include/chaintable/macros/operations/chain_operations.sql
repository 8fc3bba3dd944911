{#-- dbt run-operation entry points; each resolves the chain table then lets Python do the work.
     Each takes **kwargs (Jinja catches them where the body names `kwargs`) to refuse a misspelt
     argument in its own words, naming the operation and the chain, rather than Jinja's "takes no
     keyword argument" (tests/functional/test_dbt_features.py). --#}

{% macro chain_target(model=none, relation=none, operation=none, unknown={}, accepted=[]) %}
  {%- if relation is not none and relation is not string -%}
    {{ return(relation) }}
  {%- endif -%}
  {%- if operation is not none -%}
    {%- set chain = ("model '" ~ model ~ "'") if model else ("relation '" ~ relation ~ "'") -%}
    {%- set where = operation ~ ((" of " ~ chain) if (model or relation) else "") -%}
    {%- if unknown -%}
      {%- set names = unknown.keys() | sort -%}
      {%- do exceptions.raise_compiler_error(where ~ ": unknown argument" ~ ("s" if names | length > 1 else "")
            ~ " '" ~ (names | join("', '")) ~ "'; " ~ operation ~ " takes " ~ (accepted | join(", "))
            ~ "; nothing was done") -%}
    {%- endif -%}
    {%- if not model and not relation -%}
      {%- do exceptions.raise_compiler_error(operation ~ ": give the chain table as `model: <name>` or "
            ~ "`relation: schema.name`; nothing was done") -%}
    {%- endif -%}
  {%- endif -%}
  {{ return(adapter.chain_relation(model, relation, target.schema, graph.nodes.values() | list)) }}
{% endmacro %}

{% macro compact_chain(model=none, partition=none, overwrite=false, relation=none) %}
  {%- set rel = chain_target(model, relation, 'compact_chain', kwargs,
        ['model', 'partition', 'overwrite', 'relation']) -%}
  {%- set written = adapter.chain_compact(rel, partition, overwrite) -%}
  {{ log("compact_chain " ~ rel ~ ": " ~ ("written" if written else "nothing written") ~ " (result: " ~ (written | string | lower) ~ ")", info=True) }}
  {{ return(written) }}
{% endmacro %}

{% macro expire_chain(model=none, now=none, dry_run=false, relation=none) %}
  {%- set rel = chain_target(model, relation, 'expire_chain', kwargs,
        ['model', 'now', 'dry_run', 'relation']) -%}
  {%- for line in adapter.chain_expire(rel, now, dry_run) -%}
    {{ log(line, info=True) }}
  {%- endfor -%}
{% endmacro %}

{% macro chain_status(model=none, relation=none, now=none) %}
  {%- set rel = chain_target(model, relation, 'chain_status', kwargs, ['model', 'relation', 'now']) -%}
  {{ log("chain_status " ~ rel ~ "\n" ~ adapter.chain_status(rel, now), info=True) }}
{% endmacro %}

{% macro drop_chain_partition(model=none, partition=none, branch='snapshot', relation=none) %}
  {%- set rel = chain_target(model, relation, 'drop_chain_partition', kwargs,
        ['model', 'partition', 'branch', 'relation']) -%}
  {{ log(adapter.chain_drop_partition(rel, partition, branch), info=True) }}
{% endmacro %}

{#-- The full state of one partition as a subquery: `select * from {{ chain_read(ref('t'), {'dt': '20250811'}) }}`. --#}
{% macro chain_read(relation, partition) %}
  {%- if not execute -%}
    {{ return("(select * from " ~ relation ~ ")") }}
  {%- endif -%}
  {%- set rel = chain_target(relation=relation) -%}
  {{ return("(" ~ adapter.chain_read_sql(rel, partition) ~ ")") }}
{% endmacro %}

{#-- The keys whose state changed from one day to another (README: History), as a subquery:
     `select * from {{ chain_changes(ref('t'), {'dt': '20250801'}, {'dt': '20250808'}) }}`. --#}
{% macro chain_changes(relation, from_day, to_day) %}
  {{ return(chain_range_read('changes', relation, from_day, to_day)) }}
{% endmacro %}

{#-- Every version of every key from one day to another by business day (README: History), as a subquery:
     `select * from {{ chain_history(ref('t'), 'dt=20250801', 'dt=20250808') }}`. --#}
{% macro chain_history(relation, from_day, to_day) %}
  {{ return(chain_range_read('history', relation, from_day, to_day)) }}
{% endmacro %}

{% macro chain_range_read(kind, relation, from_day, to_day) %}
  {%- if not execute -%}
    {{ return("(select * from " ~ relation ~ ")") }}
  {%- endif -%}
  {%- set rel = chain_target(relation=relation) -%}
  {%- if kind == 'changes' -%}
    {{ return("(" ~ adapter.chain_changes_sql(rel, from_day, to_day) ~ ")") }}
  {%- endif -%}
  {{ return("(" ~ adapter.chain_history_sql(rel, from_day, to_day) ~ ")") }}
{% endmacro %}
