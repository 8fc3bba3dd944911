SHOW TABLES IN s LIKE 't__snapshot|t__delta'
;
CREATE VIEW s.t__chain_lock TBLPROPERTIES ('chaintable.lock.heartbeat' = '<now>', 'chaintable.lock.lease' = '300', 'chaintable.lock.operation' = 'run of model \'t\'', 'chaintable.lock.owner' = 'host:42:inv', 'chaintable.lock.since' = '<now>', 'chaintable.lock.writer' = '<now>', 'chaintable.written.1861b0cb325e72b53437e46e36f860c434266b7f' = 'none', 'chaintable.written.4e0c1a3adf08da41f1e1ed6dcaea03210b387ef4' = 'none', 'chaintable.written.8ac7757c318412ecbaef7aa139f6ca1f8cdb82fd' = 'none', 'chaintable.written.a4e89a942c7b33b4036ae455691f7eeda072c65a' = 'none', 'chaintable.written.d94c98128272427685f1744ed56ec89694ae9465' = 'none', 'chaintable.written.dd7afcc19681ed6ee45ccb1960c91adc611c99ac' = 'none') AS SELECT 1 AS locked
;
SHOW TABLES IN s LIKE 't__*'
;
DESCRIBE QUERY SELECT * FROM s.src
;
CREATE TABLE s.t__chain_stage_w1 USING parquet AS
SELECT * FROM s.src
;
DESCRIBE TABLE s.t__chain_stage_w1
;
SELECT CAST(`region` AS STRING), CAST(`dt` AS STRING), count(*), count(DISTINCT `id`, `region`), count_if(`id` IS NULL OR `region` IS NULL OR `dt` IS NULL), count_if(NOT coalesce(`op` IN ('+I', '-U', '+U', '-D'), false)), count_if(false), false, min(CAST(`seq` AS BIGINT)), count_if(`seq` IS NULL) FROM (SELECT * FROM s.t__chain_stage_w1) __s GROUP BY `region`, `dt`
;
DROP VIEW IF EXISTS s.t
;
DROP TABLE IF EXISTS s.t__snapshot
;
DROP TABLE IF EXISTS s.t__delta
;
DROP TABLE IF EXISTS s.t__chain_map
;
DROP TABLE IF EXISTS s.t__cumulative
;
CREATE TABLE s.t__snapshot (`id` int, `v` string, `op` string, `seq` bigint, `region` string, `dt` string)
USING parquet
OPTIONS ('partitionOverwriteMode' = 'dynamic')
PARTITIONED BY (`region`, `dt`)
CLUSTERED BY (`id`) INTO 4 BUCKETS
LOCATION '/data/my \'lake\'/t__snapshot'
TBLPROPERTIES ('chain-table.branch' = 'snapshot', 'chain-table.chain-partition-keys' = 'dt', 'chain-table.enabled' = 'true', 'chaintable.cumulative-delta' = 'true', 'chaintable.written.05d7b0937fd82b419c321a5bca0397765da3febf' = 'none', 'chaintable.written.0c423086d45ea0560e1260d0cb7f62c5eabdb1e2' = 'none', 'chaintable.written.16e32421b279c7b3c599a9ac939c8b08c97ac310' = 'none', 'chaintable.written.450c76da55f01231662a8bb52d894f004c601b47' = 'none', 'chaintable.written.4c170c275888a97a63db9b77689359b65868a59e' = 'none', 'chaintable.written.5b75364c27d7c78df685a8207bab5178b4df7f14' = 'none', 'chaintable.written.62a6f31f3dbbed14fad0a172169590dd58c822e5' = 'none', 'chaintable.written.66f70eed74c5c74db4aaf398a6e8c4b70f393dc0' = 'none', 'chaintable.written.88faac11dac221116e7705b81a183fd08668de4b' = 'none', 'chaintable.written.c1934e4616e8a4448ba7311c66ca0c7e104face9' = 'none', 'chaintable.written.de9c78d9099553b93f87c068d3fe963a682bc64d' = 'none', 'chaintable.written.e8dc4fa64d55df0e6bebc61eaa3a2a34fb42155a' = 'none', 'merge-engine' = 'deduplicate', 'owner' = 'o\'neil', 'partition' = 'region,dt', 'partition.expiration-time' = '30 d', 'partition.timestamp-formatter' = 'yyyyMMdd', 'partition.timestamp-pattern' = '$dt', 'primary-key' = 'id,region,dt', 'rowkind.field' = 'op', 'sequence.field' = 'seq')
;
CREATE TABLE s.t__delta (`id` int, `v` string, `op` string, `seq` bigint, `region` string, `dt` string)
USING parquet
OPTIONS ('partitionOverwriteMode' = 'dynamic')
PARTITIONED BY (`region`, `dt`)
CLUSTERED BY (`id`) INTO 4 BUCKETS
LOCATION '/data/my \'lake\'/t__delta'
TBLPROPERTIES ('chain-table.branch' = 'delta', 'chain-table.chain-partition-keys' = 'dt', 'chain-table.enabled' = 'true', 'chaintable.cumulative-delta' = 'true', 'chaintable.written.05d7b0937fd82b419c321a5bca0397765da3febf' = 'none', 'chaintable.written.0c423086d45ea0560e1260d0cb7f62c5eabdb1e2' = 'none', 'chaintable.written.16e32421b279c7b3c599a9ac939c8b08c97ac310' = 'none', 'chaintable.written.450c76da55f01231662a8bb52d894f004c601b47' = 'none', 'chaintable.written.4c170c275888a97a63db9b77689359b65868a59e' = 'none', 'chaintable.written.5b75364c27d7c78df685a8207bab5178b4df7f14' = 'none', 'chaintable.written.62a6f31f3dbbed14fad0a172169590dd58c822e5' = 'none', 'chaintable.written.66f70eed74c5c74db4aaf398a6e8c4b70f393dc0' = 'none', 'chaintable.written.88faac11dac221116e7705b81a183fd08668de4b' = 'none', 'chaintable.written.c1934e4616e8a4448ba7311c66ca0c7e104face9' = 'none', 'chaintable.written.de9c78d9099553b93f87c068d3fe963a682bc64d' = 'none', 'chaintable.written.e8dc4fa64d55df0e6bebc61eaa3a2a34fb42155a' = 'none', 'merge-engine' = 'deduplicate', 'owner' = 'o\'neil', 'partition' = 'region,dt', 'partition.expiration-time' = '30 d', 'partition.timestamp-formatter' = 'yyyyMMdd', 'partition.timestamp-pattern' = '$dt', 'primary-key' = 'id,region,dt', 'rowkind.field' = 'op', 'sequence.field' = 'seq')
;
SHOW TABLES IN s LIKE 't__snapshot|t__cumulative|t__chain_map'
;
SHOW TBLPROPERTIES s.t__snapshot
;
DESCRIBE TABLE s.t__snapshot
;
SHOW PARTITIONS s.t__snapshot
;
SHOW PARTITIONS s.t__delta
;
INSERT OVERWRITE TABLE s.t__snapshot PARTITION (`region`, `dt`)
SELECT `id`, `v`, `op`, `seq`, `region`, `dt` FROM (SELECT `id`, `v`, `op`, `seq`, `region`, `dt` FROM (SELECT *, row_number() OVER (PARTITION BY `id`, `region`, `dt` ORDER BY `seq` DESC NULLS LAST, `dt` DESC NULLS LAST, CASE WHEN __chain_retract THEN 0 ELSE 1 END DESC NULLS LAST) AS __chain_ord FROM (SELECT `id`, `v`, `op`, `seq`, `region`, `dt`, __chain_anchor, (NOT __chain_anchor AND coalesce(`op` IN ('-U', '-D'), false)) AS __chain_retract FROM (SELECT `id`, `v`, `op`, `seq`, `region`, `dt`, false AS __chain_anchor FROM (SELECT `id`, `v`, `op`, `seq`, `region`, `dt` FROM s.t__chain_stage_w1) __raw) __s) __p) __r WHERE __chain_ord = 1 AND NOT __chain_retract) __src
;
SELECT count(*) FROM s.t__snapshot WHERE (`region` = 'CN' AND `dt` = '20250101')
;
SHOW TABLES IN s LIKE 't__snapshot|t__cumulative|t__chain_map'
;
SHOW TBLPROPERTIES s.t__snapshot
;
DESCRIBE TABLE s.t__snapshot
;
SHOW PARTITIONS s.t__snapshot
;
SHOW PARTITIONS s.t__delta
;
CREATE OR REPLACE VIEW s.t WITH SCHEMA EVOLUTION AS
SELECT `id`, `v`, `op`, `seq`, `region`, `dt` FROM s.t__snapshot
;
SHOW TABLES IN s LIKE 't__chain_stage_w1'
;
SHOW TBLPROPERTIES s.t__chain_stage_w1
;
DROP TABLE IF EXISTS s.t__chain_stage_w1
;
SHOW TABLES IN s LIKE 't__snapshot|t__cumulative|t__chain_map'
;
SHOW TBLPROPERTIES s.t__snapshot
;
DESCRIBE TABLE s.t__snapshot
;
SHOW PARTITIONS s.t__snapshot
;
SHOW PARTITIONS s.t__delta
;
ALTER TABLE s.t__snapshot SET TBLPROPERTIES ('chaintable.last-expire-check' = '<now>', 'chaintable.written.c6ebfb16e78dfbb54964c5fcd5b9516f60fbbd41' = 'none')
;
SHOW TBLPROPERTIES s.t__chain_lock
;
DROP VIEW IF EXISTS s.t__chain_lock
