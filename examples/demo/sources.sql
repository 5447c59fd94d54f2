-- The demo's raw tables (the files as they arrive) and stage tables (what stage A writes), as a team
-- creates them in Athena before its first arrival. $raw_root and $stage_root are the raw and stage buckets.
CREATE DATABASE IF NOT EXISTS engineering_mysql_raw_dev;
CREATE DATABASE IF NOT EXISTS engineering_mysql_dev;
CREATE DATABASE IF NOT EXISTS engineering_sales_raw_dev;
CREATE DATABASE IF NOT EXISTS engineering_sales_dev;
CREATE EXTERNAL TABLE IF NOT EXISTS engineering_mysql_raw_dev.customers (
  customer_id BIGINT, name STRING, country STRING, lifetime_value DOUBLE
) PARTITIONED BY (`date` STRING)
ROW FORMAT SERDE 'org.apache.hadoop.hive.serde2.OpenCSVSerde' WITH SERDEPROPERTIES ('separatorChar' = ',')
STORED AS TEXTFILE LOCATION '$raw_root/engineering/mysql/customers/'
TBLPROPERTIES ('skip.header.line.count' = '1');
CREATE EXTERNAL TABLE IF NOT EXISTS engineering_mysql_dev.customers (
  customer_id BIGINT, name STRING, country STRING, lifetime_value DOUBLE
) PARTITIONED BY (`date` STRING) STORED AS PARQUET LOCATION '$stage_root/engineering/mysql/customers/';
CREATE EXTERNAL TABLE IF NOT EXISTS engineering_sales_raw_dev.orders (
  order_id BIGINT, customer_id BIGINT, amount DECIMAL(24,2), status STRING
) PARTITIONED BY (`date` STRING) STORED AS PARQUET LOCATION '$raw_root/engineering/sales/orders/';
CREATE EXTERNAL TABLE IF NOT EXISTS engineering_sales_dev.orders (
  order_id BIGINT, customer_id BIGINT, amount DECIMAL(24,2), status STRING
) PARTITIONED BY (`date` STRING) STORED AS PARQUET LOCATION '$stage_root/engineering/sales/orders/';
