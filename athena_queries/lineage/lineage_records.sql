-- Every archived lineage step, one row each, in lineage order: the seed's UNNEST query over the
-- archive's Glue table (partition projection on dt). Lakeline adds the record's status
-- (complete, missing_parent, cycle, unterminated, expired) and orders the rows.
-- "lineage"."lineage_archive" is a placeholder: `lakeline lineage query --database --table` rebinds it.
SELECT
  record_id,
  root_id,
  status,
  unnested_lineage.action_taken,
  from_unixtime(unnested_lineage.recordedAt) AS recordedAt,
  unnested_lineage.storage_location
FROM "lineage"."lineage_archive"
CROSS JOIN UNNEST(lineage) WITH ORDINALITY AS t (unnested_lineage, step)
ORDER BY root_id, record_id, step
