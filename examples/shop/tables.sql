-- The stage B targets: Athena DDL; $analytics_root is the workspace's analytics folder.
CREATE DATABASE IF NOT EXISTS shop_reports_dev;

CREATE EXTERNAL TABLE IF NOT EXISTS shop_reports_dev.sales_by_store (
    store STRING,
    orders BIGINT,
    amount DOUBLE
)
PARTITIONED BY (day STRING)
STORED AS PARQUET
LOCATION '$analytics_root/sales_by_store/';
