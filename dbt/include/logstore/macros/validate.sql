{#-- Every node's log options are checked while dbt parses the project (dbt names each node's
     schema then), so a bad key fails `dbt parse/compile/run` before anything is built. --#}
{% macro logstore__generate_schema_name(custom_schema_name, node) -%}
  {%- do adapter.logstore_validate_node(node) -%}
  {{ default__generate_schema_name(custom_schema_name, node) }}
{%- endmacro %}
