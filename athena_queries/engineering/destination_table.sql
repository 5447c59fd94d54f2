-- Sample stage B step for engineering_analytics_dev.destination_table (see tests/fixtures/dependencies).
-- $start_date and $end_date come from the item's date_substitutions, computed from the destination partition.
INSERT INTO engineering_analytics_dev.destination_table
SELECT *, '$start_date' AS start_date
FROM engineering_mysql_dev.customers
WHERE "date" = '$end_date'
