-- Customers and their lifetime value per country, for one day ($day).
INSERT INTO engineering_analytics_dev.customers_by_country
SELECT country, count(*) AS customers, round(sum(lifetime_value), 2) AS lifetime_value, '$day'
FROM engineering_mysql_dev.customers
WHERE "date" = '$day'
GROUP BY country
