-- Which run wrote a version of a partition, from which versions of which inputs and which raw files, and
-- the versions before and after it: `lakeline lineage show --table --partition [--version]` as one query
-- over the archive's table (every day of it; add "AND dt >= '2026-01-01'" to the written CTE to read fewer).
-- Three ? (Athena execution parameters, in this order): the table, database.table; the partition as in its
-- location, col=value/col2=value2; the version: '' for the newest archived (the published one), its number
-- as `lakeline status` shows it (3 or v3), or its token (v3.<run token>).
-- One row per input and raw file of the version (the raw files of the trees the run is recorded in: the
-- first element of each archive line that holds it); a version with neither gives one row of NULLs there.
-- The archive is read once: the versions before and after come from windows over the partition's nodes
-- (RANGE frames on the version number), not from a second scan.
-- "lineage"."lineage_archive" is a placeholder: `lakeline lineage query --sql THIS --parameter DB.TABLE
-- --parameter COL=VALUE --parameter '' [--database --table]` binds the ? and the table (Spark and the local
-- Athena take no execution parameters); lakeline.lineage.records.query.bind_version_query also checks them.
WITH wanted AS (
  SELECT ? AS dataset, ? AS partition_path, ? AS version_asked
),
written AS (
  SELECT
    n.version,
    CAST(regexp_extract(n.version, '^v([0-9]+)[.]', 1) AS bigint) AS number,
    n.storage_location AS location,
    n.run_id,
    n.job_name,
    n.recordedAt AS recorded_at,
    element_at(filter(lineage, x -> x.node_id = n.parent_id), 1) AS parent,
    element_at(lineage, 1) AS top,
    wanted.version_asked
  FROM "lineage"."lineage_archive"
  CROSS JOIN UNNEST(lineage) AS t (n)
  CROSS JOIN wanted
  WHERE n.dataset = wanted.dataset
    AND regexp_like(n.version, '^v[0-9]+[.]')
    AND strpos(n.storage_location, '/' || wanted.partition_path || '/lakeline_run=') > 0
),
placed AS (
  SELECT
    written.*,
    max_by(version, number) OVER (ORDER BY number RANGE BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS version_before,
    min_by(version, number) OVER (ORDER BY number RANGE BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING) AS version_after,
    max(number) OVER () AS newest,
    min(location) OVER (PARTITION BY version) AS first_location,
    min(run_id) OVER (PARTITION BY version) AS first_run_id,
    min(job_name) OVER (PARTITION BY version) AS first_job_name,
    min(recorded_at) OVER (PARTITION BY version) AS first_recorded_at
  FROM written
)
SELECT DISTINCT
  version,
  first_location AS location,
  first_job_name AS job_name,
  first_run_id AS run_id,
  from_unixtime(first_recorded_at) AS recorded_at,
  version_before,
  version_after,
  CASE WHEN parent.action_taken <> 'RAW_DATA_INPUT' THEN parent.dataset END AS input_dataset,
  CASE WHEN parent.action_taken <> 'RAW_DATA_INPUT' THEN parent.version END AS input_version,
  CASE WHEN parent.action_taken <> 'RAW_DATA_INPUT' THEN parent.storage_location END AS input_location,
  CASE WHEN top.action_taken = 'RAW_DATA_INPUT' THEN top.storage_location END AS raw_file
FROM placed
WHERE (version_asked = '' AND number = newest)
  OR version = version_asked
  OR CAST(number AS varchar) = regexp_replace(version_asked, '^v', '')
ORDER BY input_dataset, raw_file
