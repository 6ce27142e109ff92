{#-- Operations on logged models, for `dbt run-operation`.

     dbt run-operation logstore_recover --args '{model: orders}'
       brings the model's table and log into agreement now (what its next run does first:
       finish a failed run's commit and its log write), without building the model.
     dbt run-operation logstore_resnapshot --args '{model: orders}'
       starts a new generation of the model's log now: the table's rows, from which a consumer
       reaches the table (also when the log was lost: a deleted topic, retention; see
       dbt/adapters/logstore/lifecycle/).
     dbt run-operation logstore_unlock --args '{model: orders}'
       removes the model's run lock, for a run known to be dead on another host. --#}

{% macro logstore_recover(model) -%}
  {%- set node = logstore_model_node(model) -%}
  {%- set log_config = adapter.logstore_config(node) -%}
  {%- if not log_config.enabled -%}
    {{ exceptions.raise_compiler_error("Model '" ~ model ~ "' has no log to recover (config 'log.system' is not set)") }}
  {%- endif -%}
  {%- set target = api.Relation.create(database=node.database, schema=node.schema,
                                       identifier=node.alias, type='table') -%}
  {#-- a log that goes on keeps the shape its topic holds --#}
  {%- set log_config = adapter.logstore_continue_log(log_config, target) -%}
  {#-- recovery may rename a staged table in: the same catalog check as a run --#}
  {%- do logstore_begin(log_config, target, node.config.get('partition_by')) -%}
  {%- do adapter.logstore_release_lock() -%}
  {{ log("logstore: " ~ target ~ " and its log " ~ log_config.topic ~ " agree", info=true) }}
{%- endmacro %}


{% macro logstore_resnapshot(model) -%}
  {%- set node = logstore_model_node(model) -%}
  {%- set log_config = adapter.logstore_config(node) -%}
  {%- if not log_config.enabled -%}
    {{ exceptions.raise_compiler_error("Model '" ~ model ~ "' has no log to resnapshot (config 'log.system' is not set)") }}
  {%- endif -%}
  {%- set target = api.Relation.create(database=node.database, schema=node.schema,
                                       identifier=node.alias, type='table') -%}
  {%- set log_config = adapter.logstore_continue_log(log_config, target) -%}
  {%- do logstore_begin(log_config, target, node.config.get('partition_by'), resnapshot=true) -%}
  {%- do adapter.logstore_release_lock() -%}
  {{ log("logstore: " ~ target ~ " started a new generation of its log in " ~ log_config.topic, info=true) }}
{%- endmacro %}


{% macro logstore_unlock(model) -%}
  {%- set node = logstore_model_node(model) -%}
  {%- set target = api.Relation.create(database=node.database, schema=node.schema,
                                       identifier=node.alias, type='table') -%}
  {{ log("logstore: " ~ target ~ ": " ~ adapter.logstore_unlock(target), info=true) }}
{%- endmacro %}


{% macro logstore_model_node(name) -%}
  {%- for node in graph.nodes.values() if node.resource_type == 'model' and node.name == name -%}
    {{ return(node) }}
  {%- endfor -%}
  {{ exceptions.raise_compiler_error("logstore: no model named '" ~ name ~ "' in this project") }}
{%- endmacro %}


{#-- A downstream incremental model reads an upstream logged model's changes instead of its
     files:  select ... from {{ logstore_changes(ref('orders'), normalize=true) }}
     The relation it returns has the upstream's columns plus an op column ('r' a row of the
     upstream table on the first run, 'c', 'u', 'd') and a snapshot column (named in
     dbt/adapters/logstore/names.py: VIEW_OP_COLUMN, VIEW_SNAPSHOT_COLUMN). With
     normalize=true there is one row per key: its last change in the range. A `merge` model
     with a unique_key deletes the keys whose op is 'd' and upserts the rest; the op and
     snapshot columns are not stored. at_run='latest' or a dbt invocation id: the range ends at
     the snapshot that run record names (a cut), not the upstream's latest. See
     dbt/adapters/logstore/reading/source_changes.py. --#}
{% macro logstore_changes(upstream, normalize=false, at_run=none) -%}
  {%- if not execute -%}
    {{ return(upstream) }}
  {%- endif -%}
  {%- set ns = namespace(node=none) -%}
  {%- for node in graph.nodes.values() if node.resource_type == 'model'
        and node.schema == upstream.schema and node.alias == upstream.identifier -%}
    {%- set ns.node = node -%}
  {%- endfor -%}
  {{ return(adapter.logstore_source_changes(model, this, upstream, ns.node, normalize, should_full_refresh(), at_run)) }}
{%- endmacro %}
