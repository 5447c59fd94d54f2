-- The analytics tables stage B writes; $analytics_root is the workspace's analytics folder.
CREATE DATABASE IF NOT EXISTS engineering_analytics_dev;
CREATE EXTERNAL TABLE IF NOT EXISTS engineering_analytics_dev.customers_by_country (
  country STRING, customers BIGINT, lifetime_value DOUBLE
) PARTITIONED BY (`date` STRING) STORED AS PARQUET LOCATION '$analytics_root/customers_by_country/';
CREATE EXTERNAL TABLE IF NOT EXISTS engineering_analytics_dev.daily_sales (
  country STRING, orders BIGINT, revenue DOUBLE
) PARTITIONED BY (`date` STRING) STORED AS PARQUET LOCATION '$analytics_root/daily_sales/';
CREATE EXTERNAL TABLE IF NOT EXISTS engineering_analytics_dev.weekly_sales (
  country STRING, orders BIGINT, revenue DOUBLE, days BIGINT
) PARTITIONED BY (week_ending STRING) STORED AS PARQUET LOCATION '$analytics_root/weekly_sales/';
CREATE EXTERNAL TABLE IF NOT EXISTS engineering_analytics_dev.destination_table (
  customer_id BIGINT, name STRING, country STRING, start_date STRING, end_date STRING
) PARTITIONED BY (`date` STRING) STORED AS PARQUET LOCATION '$analytics_root/destination_table/';
