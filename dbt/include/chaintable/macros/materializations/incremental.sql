{#-- incremental: dbt-spark's, except for a chain model with batches (chain_table=true, dbt's
     microbatch vocabulary: event_time, batch_size, begin, lookback). dbt's microbatch runner
     calls this once per batch; each batch is a chain run writing the batch's chain partition
     (docs/design.md#batches). var('chain_rewrite') lets a range write days the chain holds. --#}
{% materialization incremental, adapter='chaintable', supported_languages=['sql', 'python'] %}
  {%- if not adapter.chain_batched(model.config) -%}
    {{ return(materialization_incremental_spark()) }}
  {%- endif -%}
  {%- set run = adapter.chain_prepare_batch(this, model.name, model.config, model.get('batch'),
        invocation_id, invocation_args_dict, var('chain_rewrite', false),
        should_full_refresh(), flags.FULL_REFRESH, chain_partial_input(), model, chain_grants_probe()) -%}
  {{ return(chain_write(run, adapter.chain_execute_batch)) }}
{% endmaterialization %}
