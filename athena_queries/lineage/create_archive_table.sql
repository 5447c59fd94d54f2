-- The archive's table for Athena, partition projection on dt (no crawler, no MSCK REPAIR).
-- Generated from lakeline.lineage.records.archive_table.athena_ddl('lineage', 'lineage_archive', LOCATION);
-- replace the placeholder bucket with the archive bucket (the CDK stack builds the same table from
-- lakeline.lineage.records.archive_table.glue_table_input).
-- A table made before partition versions (#43) lacks the lineage struct's last field, version: replace the
-- table (DROP TABLE, then this; the archived files stay) or ALTER TABLE ... REPLACE COLUMNS with this column
-- list. Lines archived before it read version as NULL (the JSON SerDe matches fields by name).
CREATE EXTERNAL TABLE IF NOT EXISTS `lineage`.`lineage_archive` (
  `record_id` string,
  `root_id` string,
  `status` string,
  `lineage` array<struct<root_id:string,node_id:string,parent_id:string,action_taken:string,storage_location:string,recordedat:bigint,ttl_expiry:bigint,run_id:string,job_name:string,dataset:string,version:string>>
)
PARTITIONED BY (`dt` string)
ROW FORMAT SERDE 'org.openx.data.jsonserde.JsonSerDe'
LOCATION 's3://lineage-archive-bucket/'
TBLPROPERTIES (
  'classification'='json',
  'projection.enabled'='true',
  'projection.dt.type'='date',
  'projection.dt.format'='yyyy-MM-dd',
  'projection.dt.range'='2020-01-01,NOW',
  'projection.dt.interval'='1',
  'projection.dt.interval.unit'='DAYS',
  'storage.location.template'='s3://lineage-archive-bucket/dt=${dt}/'
)
