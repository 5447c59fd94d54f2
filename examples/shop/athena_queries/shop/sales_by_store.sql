INSERT INTO shop_reports_dev.sales_by_store
SELECT store, count(*) AS orders, round(sum(amount), 2) AS amount, '$day' AS day
FROM shop_pos_dev.sales
WHERE day = '$day'
GROUP BY store
