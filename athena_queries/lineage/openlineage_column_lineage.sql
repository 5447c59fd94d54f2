-- Column lineage of one output table, from the OpenLineage events the stage functions stored: one row
-- per output column, input dataset.field and transformation (DIRECT/INDIRECT and its subtype), over
-- every completed run that wrote the table, with the time of the latest such run. An event too large to send
-- whole (lakeline.lineage.openlineage.bound) is stored as parts: RUNNING events of the same run carry the rest
-- of its column lineage, and count when their run completed.
-- The ? is the output table, database.table (an Athena execution parameter: the console asks for it).
-- Events name catalog tables AwsDataCatalog.database.table (the OpenLineage naming of Athena tables);
-- the catalog prefix is left out here, in the filter and in the rows.
-- "openlineage_events" is the table in the lineage database (lakeline.lineage.openlineage.table);
-- lakeline.lineage.openlineage.table.bind_column_lineage_query names the table and the output for Spark.
-- Add "AND dt >= '2026-01-01'" to read fewer days.
SELECT
  replace(written.name, 'AwsDataCatalog.', '') AS output_dataset,
  column_name AS output_column,
  replace(input_field.name, 'AwsDataCatalog.', '') AS input_dataset,
  input_field.field AS input_field,
  transformation.type AS transformation_type,
  transformation.subtype AS transformation_subtype,
  max(eventtime) AS last_seen
FROM "openlineage_events"
CROSS JOIN UNNEST(outputs) AS o (written)
CROSS JOIN UNNEST(written.facets.columnlineage.fields) AS c (column_name, column_lineage)
CROSS JOIN UNNEST(column_lineage.inputfields) AS i (input_field)
CROSS JOIN UNNEST(input_field.transformations) AS t (transformation)
WHERE (
    eventtype = 'COMPLETE'
    OR (eventtype = 'RUNNING' AND run.runid IN (SELECT run.runid FROM "openlineage_events" WHERE eventtype = 'COMPLETE'))
  )
  AND replace(written.name, 'AwsDataCatalog.', '') = ?
GROUP BY written.name, column_name, input_field.name, input_field.field, transformation.type, transformation.subtype
ORDER BY output_column, input_dataset, input_field, transformation_type, transformation_subtype
