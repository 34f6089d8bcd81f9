{% macro cents_to_dollars(column) -%}
    cast({{ column }} / 100.0 as decimal(18, 2))
{%- endmacro %}
