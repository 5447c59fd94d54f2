"""The Hive SerDe classes Lakeline's tables name: one spelling for the DDL it writes, the Glue definitions it
reads and the local Athena's catalog."""

from __future__ import annotations

OPEN_CSV = "org.apache.hadoop.hive.serde2.OpenCSVSerde"
JSON_SERDE = "org.openx.data.jsonserde.JsonSerDe"
LAZY_SIMPLE = "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe"
