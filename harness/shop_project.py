"""A project of the shop's shape that the e2e tests and ``benchmarks/kills.py`` both build: daily point-of-sale
CSVs (``shop/pos/sales/day=YYYY-MM-DD/``) and a target of the totals per store and day (``ITEM``, its table
``TABLES``)."""

from __future__ import annotations

ITEM = {
    "dataset": "shop_reports_dev.sales_by_store",
    "dependencies": [
        {
            "TableName": "shop_pos_dev.sales",
            "FieldColumn": "day",
            "Usage": "overwrite",
            "DateExpression": "%Y-%m-%d",
            "relativedelta_attributes": {"days": 0},
        }
    ],
    "partitionColumn": "day",
    "partitionPythonMask": "%Y-%m-%d",
    "steps": [
        {
            "db": "shop_reports_dev",
            "info": "totals per store",
            "sql": "INSERT INTO shop_reports_dev.sales_by_store SELECT store, sum(amount), '$day' "
            "FROM shop_pos_dev.sales WHERE day = '$day' GROUP BY store",
        }
    ],
    "date_substitutions": [{"token": "$day", "format": "%Y-%m-%d", "relativedelta_attributes": {"days": 0}}],
}
TABLES = """
CREATE DATABASE IF NOT EXISTS shop_reports_dev;
CREATE EXTERNAL TABLE IF NOT EXISTS shop_reports_dev.sales_by_store (store STRING, amount DOUBLE)
PARTITIONED BY (day STRING) STORED AS PARQUET LOCATION '$analytics_root/sales_by_store/';
"""
