from __future__ import annotations

import pytest

from lakeline.engines.translate import TranslationError, athena_to_spark

CTAS = (
    "CREATE TABLE \"s\".\"tmp\" WITH (format = 'PARQUET', write_compression = 'SNAPPY', "
    "external_location = 'file:///w/stage/t/', bucketed_by = ARRAY['c1'], bucket_count = 3) "
    'AS SELECT "c1", "date" FROM "raw"."t" WHERE "date" = \'20220120\''
)


def test_bucketed_ctas_becomes_a_spark_datasource_ctas_with_a_repartition_hint() -> None:
    assert athena_to_spark(CTAS) == (
        "CREATE TABLE `s`.`tmp` USING parquet OPTIONS (compression 'snappy') "
        "CLUSTERED BY (`c1`) INTO 3 BUCKETS LOCATION 'file:///w/stage/t/' "
        "AS SELECT /*+ REPARTITION(3, `c1`) */ * FROM "
        "(SELECT `c1`, `date` FROM `raw`.`t` WHERE `date` = '20220120') AS lakeline_ctas_source"
    )


def test_partitioned_textfile_ctas() -> None:
    sql = (
        "CREATE TABLE a.b WITH (format='TEXTFILE', field_delimiter=',', partitioned_by=ARRAY['k']) "
        "AS SELECT x, k FROM c.d"
    )
    assert athena_to_spark(sql) == (
        "CREATE TABLE a.b USING csv OPTIONS (sep ',') PARTITIONED BY (`k`) AS SELECT x, k FROM c.d"
    )


@pytest.mark.parametrize(
    "sql",
    [
        "ALTER TABLE `a`.`b` ADD IF NOT EXISTS PARTITION (`date`='1') LOCATION 'file:///x/'",
        "ALTER TABLE `a`.`b` PARTITION (`date`='1') SET LOCATION 'file:///x/'",
        "ALTER TABLE `a`.`b` SET LOCATION 'file:///x/'",
        "DROP TABLE IF EXISTS `a`.`b`",
    ],
)
def test_ddl_keeps_its_meaning(sql: str) -> None:
    translated = athena_to_spark(sql)
    assert translated.replace(" ", "").lower() == sql.replace(" ", "").lower()


def test_msck_repair_passes_through() -> None:
    assert athena_to_spark("MSCK REPAIR TABLE `a`.`b`;") == "MSCK REPAIR TABLE `a`.`b`"


def test_queries_are_translated_by_sqlglot() -> None:
    spark = athena_to_spark('SELECT approx_distinct(x), "date" FROM t CROSS JOIN UNNEST(a) AS u(v)')
    assert spark == "SELECT APPROX_COUNT_DISTINCT(x), `date` FROM t LATERAL VIEW EXPLODE(a) u AS v"


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("CREATE TABLE a.b WITH (format='AVRO') AS SELECT 1", "format 'AVRO'"),
        ("CREATE TABLE a.b WITH (table_type='ICEBERG') AS SELECT 1", "table_type"),
        ("CREATE TABLE a.b WITH (bucket_count=2) AS SELECT 1", "together"),
        ("CREATE TABLE a.b WITH (bucketed_by=ARRAY['x'], bucket_count=0) AS SELECT 1 AS x", "positive"),
        ("SELECT 1; SELECT 2", "exactly one statement"),
        ("SELECT FROM WHERE (", "cannot parse"),
    ],
)
def test_unsupported_or_broken_statements_are_refused(sql: str, message: str) -> None:
    with pytest.raises(TranslationError, match=message):
        athena_to_spark(sql)


def test_athena_path_pseudo_column_becomes_input_file_name() -> None:
    sql = "INSERT INTO s.t SELECT a FROM r.t WHERE \"$path\" = 'file:///raw/x.parquet'"
    assert athena_to_spark(sql) == "INSERT INTO s.t SELECT a FROM r.t WHERE INPUT_FILE_NAME() = 'file:///raw/x.parquet'"


def test_a_single_bucket_ctas_coalesces_instead_of_hashing() -> None:
    """Every row is in bucket 0: a shuffle to put them there would only cost time."""
    sql = CTAS.replace("bucket_count = 3", "bucket_count = 1")
    assert "SELECT /*+ COALESCE(1) */ * FROM" in athena_to_spark(sql)


def test_a_json_serde_table_is_read_by_sparks_json_reader_as_the_serde_reads_it() -> None:
    """Spark has no class for OpenX's (or Hive's) JSON SerDe: its Hive table would fail its first read."""
    openx = "ROW FORMAT SERDE 'org.openx.data.jsonserde.JsonSerDe'"
    assert athena_to_spark(f"CREATE EXTERNAL TABLE `d`.`t` (`qty` STRING) {openx} LOCATION 's3://b/k/'") == (
        "CREATE TABLE `d`.`t` (`qty` STRING) USING json OPTIONS (mode 'FAILFAST') LOCATION 's3://b/k/'"
    )
    lenient = (
        "CREATE EXTERNAL TABLE IF NOT EXISTS d.t (qty STRING) "
        "ROW FORMAT SERDE 'org.apache.hive.hcatalog.data.JsonSerDe' "
        "WITH SERDEPROPERTIES ('ignore.malformed.json' = 'true') "
        "STORED AS TEXTFILE LOCATION 's3://b/k/'"
    )
    assert athena_to_spark(lenient) == (
        "CREATE TABLE IF NOT EXISTS d.t (qty STRING) USING json OPTIONS (mode 'PERMISSIVE') LOCATION 's3://b/k/'"
    )
    with pytest.raises(TranslationError, match=r"PARTITIONED BY \(day STRING\) is not supported on Spark"):
        athena_to_spark(f"CREATE EXTERNAL TABLE d.t (qty STRING) PARTITIONED BY (day STRING) {openx} LOCATION '/x/'")
    # Spark has OpenCSVSerde: its table stays a Hive table.
    csv = "CREATE EXTERNAL TABLE d.t (qty STRING) ROW FORMAT SERDE 'org.apache.hadoop.hive.serde2.OpenCSVSerde'"
    assert "ROW FORMAT SERDE" in athena_to_spark(csv)
