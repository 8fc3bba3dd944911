SHOW TABLES IN s LIKE 't__snapshot|t__delta'
;
SHOW PARTITIONS s.t__snapshot
;
CREATE VIEW s.t__chain_lock TBLPROPERTIES ('chaintable.lock.heartbeat' = '<now>', 'chaintable.lock.lease' = '300', 'chaintable.lock.operation' = 'run of model \'t\'', 'chaintable.lock.owner' = 'host:42:inv', 'chaintable.lock.since' = '<now>', 'chaintable.lock.writer' = '<now>', 'chaintable.stage.partition' = '{"region": "US", "dt": "20250106"}', 'chaintable.stage.run' = 'RUN0004', 'chaintable.stage.target' = 's.t__delta', 'chaintable.written.1861b0cb325e72b53437e46e36f860c434266b7f' = 'none', 'chaintable.written.3393be49d7829aa8b6d1befb790af27c9e7805ba' = 'none', 'chaintable.written.36718ac33df575aed6629bbb899cf94b276c4798' = 'none', 'chaintable.written.4e0c1a3adf08da41f1e1ed6dcaea03210b387ef4' = 'none', 'chaintable.written.4f876de3d5d0ae8db7d25e23bf6e0ba66cccad01' = 'none', 'chaintable.written.8ac7757c318412ecbaef7aa139f6ca1f8cdb82fd' = 'none', 'chaintable.written.a4e89a942c7b33b4036ae455691f7eeda072c65a' = 'none', 'chaintable.written.d94c98128272427685f1744ed56ec89694ae9465' = 'none', 'chaintable.written.dd7afcc19681ed6ee45ccb1960c91adc611c99ac' = 'none') AS SELECT 1 AS locked
;
SHOW TABLES IN s LIKE 't__*'
;
SHOW TBLPROPERTIES s.t__snapshot
;
DESCRIBE QUERY SELECT * FROM s.src
;
DESCRIBE FORMATTED s.t__delta
;
INSERT OVERWRITE DIRECTORY 'file:/warehouse/s.db/t__delta/_chain_v/RUN0004' USING parquet
SELECT * FROM s.src
;
DESCRIBE TABLE s.t__snapshot
;
SHOW PARTITIONS s.t__snapshot
;
SHOW PARTITIONS s.t__delta
;
SHOW PARTITIONS s.t__cumulative
;
SHOW TBLPROPERTIES s.t__snapshot
;
SELECT `region`, `dt`, max(CAST(`seq` AS BIGINT)) FROM s.t__snapshot WHERE (`region` = 'US' AND `dt` = '20250101') GROUP BY `region`, `dt`
;
ALTER TABLE s.t__snapshot SET TBLPROPERTIES ('chaintable.anchor-sequence' = '{"region=US/dt=20250101":[null,"seq:bigint",5]}', 'chaintable.written.086bbb4b2d695f729d9d7898d73e7146ddca8f7e' = 'none')
;
INSERT OVERWRITE DIRECTORY 'file:/warehouse/s.db/t__cumulative/_chain_v/addcf6d59cff6385' USING parquet
SELECT CAST(`id` AS int) AS `id`, CAST(`v` AS string) AS `v`, CAST(`op` AS string) AS `op`, CAST(`seq` AS bigint) AS `seq`, CASE WHEN `id` = __first THEN __mask END AS `ct__mask` FROM (SELECT *, bit_or(shiftleft(1L, CAST(CAST(`id` AS BIGINT) & 63 AS INT))) OVER (PARTITION BY `region`, shiftright(CAST(`id` AS BIGINT), 6)) AS __mask, min(`id`) OVER (PARTITION BY `region`, shiftright(CAST(`id` AS BIGINT), 6)) AS __first FROM (SELECT `id`, `v`, `op`, `seq`, `region`, `dt` FROM (SELECT *, row_number() OVER (PARTITION BY `region`, shiftright(CAST(`id` AS BIGINT), 6), `id` ORDER BY `seq` DESC NULLS LAST, `dt` DESC NULLS LAST, CASE WHEN __chain_retract THEN 0 ELSE 1 END DESC NULLS LAST) AS __chain_ord, coalesce((`region` = 'US' AND `dt` = '20250106') AND NOT __chain_anchor AND lag(`seq`) OVER (PARTITION BY `region`, shiftright(CAST(`id` AS BIGINT), 6), `id` ORDER BY `seq` DESC NULLS LAST, `dt` DESC NULLS LAST, CASE WHEN __chain_retract THEN 0 ELSE 1 END DESC NULLS LAST) <=> `seq` AND lag(`dt`) OVER (PARTITION BY `region`, shiftright(CAST(`id` AS BIGINT), 6), `id` ORDER BY `seq` DESC NULLS LAST, `dt` DESC NULLS LAST, CASE WHEN __chain_retract THEN 0 ELSE 1 END DESC NULLS LAST) <=> `dt` AND lag(CASE WHEN __chain_retract THEN 0 ELSE 1 END) OVER (PARTITION BY `region`, shiftright(CAST(`id` AS BIGINT), 6), `id` ORDER BY `seq` DESC NULLS LAST, `dt` DESC NULLS LAST, CASE WHEN __chain_retract THEN 0 ELSE 1 END DESC NULLS LAST) <=> CASE WHEN __chain_retract THEN 0 ELSE 1 END, false) AS __chain_tie FROM (SELECT * FROM (SELECT `id`, `v`, `op`, `seq`, `region`, `dt`, __chain_anchor, (NOT __chain_anchor AND coalesce(`op` IN ('-U', '-D'), false)) AS __chain_retract FROM (SELECT `id`, `v`, `op`, `seq`, `region`, `dt`, false AS __chain_anchor FROM (SELECT `id`, `v`, `op`, `seq`, `region`, `dt` FROM (SELECT * FROM parquet.`file:/warehouse/s.db/t__delta/_chain_v/RUN0004`) __g WHERE CASE WHEN `id` IS NULL OR `region` IS NULL OR `dt` IS NULL THEN raise_error('chaintable: a staged row breaks a check') WHEN NOT coalesce(`op` IN ('+I', '-U', '+U', '-D'), false) THEN raise_error('chaintable: a staged row breaks a check') WHEN coalesce(NOT ((`region` = 'US' AND `dt` = '20250106')), false) THEN raise_error('chaintable: a staged row breaks a check') WHEN `seq` IS NULL OR CAST(`seq` AS BIGINT) <= 5 THEN raise_error('chaintable: a staged row breaks a check') ELSE true END) __e UNION ALL SELECT `id`, `v`, `op`, `seq`, `region`, `dt`, false AS __chain_anchor FROM (SELECT `id`, `v`, `op`, `seq`, `region`, `dt` FROM s.t__cumulative WHERE ((`region` = 'US' AND `dt` = '20250105')) AND `ct__stamp` IN ('653aa2e595f4467a')) __s) __s) __q DISTRIBUTE BY `region`, shiftright(CAST(`id` AS BIGINT), 6)) __p) __r WHERE (CASE WHEN __chain_tie THEN raise_error('chaintable: tied rows in the partition written') ELSE __chain_ord END) = 1 AND NOT __chain_anchor) __w) __b
;
SHOW TBLPROPERTIES s.t__chain_lock
;
ALTER TABLE s.t__delta ADD PARTITION (`region` = 'US', `dt` = '20250106') LOCATION 'file:/warehouse/s.db/t__delta/_chain_v/RUN0004'
;
SELECT count(*) FROM s.t__delta WHERE (`region` = 'US' AND `dt` = '20250106')
;
ALTER TABLE s.t__cumulative ADD PARTITION (`region` = 'US', `dt` = '20250106', `ct__stamp` = 'addcf6d59cff6385') LOCATION 'file:/warehouse/s.db/t__cumulative/_chain_v/addcf6d59cff6385'
;
SHOW PARTITIONS s.t__chain_map
;
INSERT INTO s.t__chain_map PARTITION (`ct__version` = 'RUN0005') (`region`, `ct__target_dt`, `ct__source_dt`, `ct__branch`, `ct__stamp`) VALUES ('US', '20250102', '20250101', 'snapshot', NULL), ('US', '20250102', '20250102', 'delta', NULL), ('US', '20250103', '20250101', 'snapshot', NULL), ('US', '20250103', '20250102', 'delta', NULL), ('US', '20250103', '20250103', 'delta', NULL), ('US', '20250104', '20250101', 'snapshot', NULL), ('US', '20250104', '20250102', 'delta', NULL), ('US', '20250104', '20250103', 'delta', NULL), ('US', '20250104', '20250104', 'delta', NULL), ('US', '20250105', '20250101', 'anchor', NULL), ('US', '20250105', '20250105', 'cumulative', '653aa2e595f4467a'), ('US', '20250106', '20250101', 'anchor', NULL), ('US', '20250106', '20250106', 'cumulative', 'addcf6d59cff6385')
;
ALTER VIEW s.t AS
SELECT `id`, `v`, `op`, `seq`, `region`, `dt` FROM s.t__snapshot WHERE NOT coalesce(`dt` >= '20250102' AND `dt` <= '20250106', false) AND NOT ((`region`, `dt`) IN (('CN', '20250109'), ('CN', '20250110')))
UNION ALL
SELECT `id`, `v`, `op`, `seq`, `region`, '20250109' AS `dt` FROM (SELECT 1 AS __chain_guard) __chain_one RIGHT OUTER JOIN (SELECT __a.`id`, __a.`v`, __a.`op`, __a.`seq`, __a.`region`, __a.`dt` FROM (SELECT `id`, `v`, `op`, `seq`, `region`, `dt` FROM s.t__snapshot WHERE (`region` = 'CN' AND `dt` = '20250108')) __a LEFT ANTI JOIN (SELECT DISTINCT `id`, `region` FROM (SELECT `id`, `v`, `op`, `seq`, `region`, `dt` FROM s.t__delta WHERE (`region` = 'CN' AND `dt` = '20250109')) __dk) __d ON __a.`id` = __d.`id` AND __a.`region` = __d.`region`) __m ON 1 = 0
UNION ALL
SELECT `id`, `v`, `op`, `seq`, `region`, '20250109' AS `dt` FROM (SELECT 1 AS __chain_guard) __chain_one RIGHT OUTER JOIN (SELECT `id`, `v`, `op`, `seq`, `region`, `dt` FROM (SELECT *, row_number() OVER (PARTITION BY `id`, `region` ORDER BY `seq` DESC NULLS LAST, `dt` DESC NULLS LAST, CASE WHEN __chain_retract THEN 0 ELSE 1 END DESC NULLS LAST) AS __chain_ord FROM (SELECT `id`, `v`, `op`, `seq`, `region`, `dt`, __chain_anchor, (NOT __chain_anchor AND coalesce(`op` IN ('-U', '-D'), false)) AS __chain_retract FROM (SELECT __a.`id`, __a.`v`, __a.`op`, __a.`seq`, __a.`region`, __a.`dt`, true AS __chain_anchor FROM (SELECT `id`, `v`, `op`, `seq`, `region`, `dt` FROM s.t__snapshot WHERE (`region` = 'CN' AND `dt` = '20250108')) __a LEFT SEMI JOIN (SELECT DISTINCT `id`, `region` FROM (SELECT `id`, `v`, `op`, `seq`, `region`, `dt` FROM s.t__delta WHERE (`region` = 'CN' AND `dt` = '20250109')) __dk) __d ON __a.`id` = __d.`id` AND __a.`region` = __d.`region` UNION ALL SELECT `id`, `v`, `op`, `seq`, `region`, `dt`, false AS __chain_anchor FROM (SELECT `id`, `v`, `op`, `seq`, `region`, `dt` FROM s.t__delta WHERE (`region` = 'CN' AND `dt` = '20250109')) __e) __s) __p) __r WHERE __chain_ord = 1 AND NOT __chain_retract) __m ON 1 = 0
UNION ALL
SELECT `id`, `v`, `op`, `seq`, `region`, '20250110' AS `dt` FROM (SELECT 1 AS __chain_guard) __chain_one RIGHT OUTER JOIN (SELECT __a.`id`, __a.`v`, __a.`op`, __a.`seq`, __a.`region`, __a.`dt` FROM (SELECT `id`, `v`, `op`, `seq`, `region`, `dt` FROM s.t__snapshot WHERE (`region` = 'CN' AND `dt` = '20250108')) __a LEFT ANTI JOIN (SELECT DISTINCT `id`, `region` FROM (SELECT `id`, `v`, `op`, `seq`, `region`, `dt` FROM s.t__delta WHERE (`region` = 'CN' AND `dt` IN ('20250109', '20250110'))) __dk) __d ON __a.`id` = __d.`id` AND __a.`region` = __d.`region`) __m ON 1 = 0
UNION ALL
SELECT `id`, `v`, `op`, `seq`, `region`, '20250110' AS `dt` FROM (SELECT 1 AS __chain_guard) __chain_one RIGHT OUTER JOIN (SELECT `id`, `v`, `op`, `seq`, `region`, `dt` FROM (SELECT *, row_number() OVER (PARTITION BY `id`, `region` ORDER BY `seq` DESC NULLS LAST, `dt` DESC NULLS LAST, CASE WHEN __chain_retract THEN 0 ELSE 1 END DESC NULLS LAST) AS __chain_ord FROM (SELECT `id`, `v`, `op`, `seq`, `region`, `dt`, __chain_anchor, (NOT __chain_anchor AND coalesce(`op` IN ('-U', '-D'), false)) AS __chain_retract FROM (SELECT __a.`id`, __a.`v`, __a.`op`, __a.`seq`, __a.`region`, __a.`dt`, true AS __chain_anchor FROM (SELECT `id`, `v`, `op`, `seq`, `region`, `dt` FROM s.t__snapshot WHERE (`region` = 'CN' AND `dt` = '20250108')) __a LEFT SEMI JOIN (SELECT DISTINCT `id`, `region` FROM (SELECT `id`, `v`, `op`, `seq`, `region`, `dt` FROM s.t__delta WHERE (`region` = 'CN' AND `dt` IN ('20250109', '20250110'))) __dk) __d ON __a.`id` = __d.`id` AND __a.`region` = __d.`region` UNION ALL SELECT `id`, `v`, `op`, `seq`, `region`, `dt`, false AS __chain_anchor FROM (SELECT `id`, `v`, `op`, `seq`, `region`, `dt` FROM s.t__delta WHERE (`region` = 'CN' AND `dt` IN ('20250109', '20250110'))) __e) __s) __p) __r WHERE __chain_ord = 1 AND NOT __chain_retract) __m ON 1 = 0
UNION ALL
SELECT * FROM (SELECT `id`, `v`, `op`, `seq`, `region`, `ct__target_dt` AS `dt` FROM (SELECT /*+ BROADCAST(__d) */ __a.`id`, __a.`v`, __a.`op`, __a.`seq`, __a.`region`, __a.`dt`, __a.`ct__target_dt` FROM (SELECT __b.`id`, __b.`v`, __b.`op`, __b.`seq`, __b.`region`, __b.`dt`, __m.`ct__target_dt` FROM s.t__snapshot __b JOIN (SELECT * FROM s.t__chain_map WHERE `ct__version` = 'RUN0005' AND `ct__branch` = 'snapshot') __m ON __b.`region` = __m.`region` AND __b.`dt` = __m.`ct__source_dt`) __a LEFT ANTI JOIN (SELECT DISTINCT `id`, `region`, `ct__target_dt` FROM (SELECT __b.`id`, __b.`v`, __b.`op`, __b.`seq`, __b.`region`, __b.`dt`, __m.`ct__target_dt` FROM s.t__delta __b JOIN (SELECT * FROM s.t__chain_map WHERE `ct__version` = 'RUN0005' AND `ct__branch` = 'delta') __m ON __b.`region` = __m.`region` AND __b.`dt` = __m.`ct__source_dt`) __dk) __d ON __a.`id` = __d.`id` AND __a.`region` = __d.`region` AND __a.`ct__target_dt` = __d.`ct__target_dt` UNION ALL SELECT `id`, `v`, `op`, `seq`, `region`, `dt`, `ct__target_dt` FROM (SELECT *, row_number() OVER (PARTITION BY `id`, `region`, `ct__target_dt` ORDER BY `seq` DESC NULLS LAST, `dt` DESC NULLS LAST, CASE WHEN __chain_retract THEN 0 ELSE 1 END DESC NULLS LAST) AS __chain_ord FROM (SELECT `id`, `v`, `op`, `seq`, `region`, `dt`, `ct__target_dt`, __chain_anchor, (NOT __chain_anchor AND coalesce(`op` IN ('-U', '-D'), false)) AS __chain_retract FROM (SELECT /*+ BROADCAST(__d) */ __a.`id`, __a.`v`, __a.`op`, __a.`seq`, __a.`region`, __a.`dt`, __a.`ct__target_dt`, true AS __chain_anchor FROM (SELECT __b.`id`, __b.`v`, __b.`op`, __b.`seq`, __b.`region`, __b.`dt`, __m.`ct__target_dt` FROM s.t__snapshot __b JOIN (SELECT * FROM s.t__chain_map WHERE `ct__version` = 'RUN0005' AND `ct__branch` = 'snapshot') __m ON __b.`region` = __m.`region` AND __b.`dt` = __m.`ct__source_dt`) __a LEFT SEMI JOIN (SELECT DISTINCT `id`, `region`, `ct__target_dt` FROM (SELECT __b.`id`, __b.`v`, __b.`op`, __b.`seq`, __b.`region`, __b.`dt`, __m.`ct__target_dt` FROM s.t__delta __b JOIN (SELECT * FROM s.t__chain_map WHERE `ct__version` = 'RUN0005' AND `ct__branch` = 'delta') __m ON __b.`region` = __m.`region` AND __b.`dt` = __m.`ct__source_dt`) __dk) __d ON __a.`id` = __d.`id` AND __a.`region` = __d.`region` AND __a.`ct__target_dt` = __d.`ct__target_dt` UNION ALL SELECT `id`, `v`, `op`, `seq`, `region`, `dt`, `ct__target_dt`, false AS __chain_anchor FROM (SELECT __b.`id`, __b.`v`, __b.`op`, __b.`seq`, __b.`region`, __b.`dt`, __m.`ct__target_dt` FROM s.t__delta __b JOIN (SELECT * FROM s.t__chain_map WHERE `ct__version` = 'RUN0005' AND `ct__branch` = 'delta') __m ON __b.`region` = __m.`region` AND __b.`dt` = __m.`ct__source_dt`) __e) __s) __p) __r WHERE __chain_ord = 1 AND NOT __chain_retract) __g
UNION ALL
SELECT `id`, `v`, `op`, `seq`, `region`, `ct__target_dt` AS `dt` FROM (SELECT /*+ BROADCAST(__k) */ __a.`id`, __a.`v`, __a.`op`, __a.`seq`, __a.`region`, __a.`dt`, __a.`ct__target_dt` FROM (SELECT __b.`id`, __b.`v`, __b.`op`, __b.`seq`, __b.`region`, __b.`dt`, __m.`ct__target_dt` FROM s.t__snapshot __b JOIN (SELECT * FROM s.t__chain_map WHERE `ct__version` = 'RUN0005' AND `ct__branch` = 'anchor') __m ON __b.`region` = __m.`region` AND __b.`dt` = __m.`ct__source_dt`) __a LEFT ANTI JOIN (SELECT `id`, `region`, `ct__target_dt`, `ct__mask` FROM (SELECT `id`, `region`, `ct__target_dt`, `ct__mask` FROM (SELECT __b.`id`, __b.`v`, __b.`op`, __b.`seq`, __b.`region`, __b.`dt`, __m.`ct__target_dt`, __b.`ct__mask` FROM s.t__cumulative __b JOIN (SELECT * FROM s.t__chain_map WHERE `ct__version` = 'RUN0005' AND `ct__branch` = 'cumulative') __m ON __b.`region` = __m.`region` AND __b.`dt` = __m.`ct__source_dt` AND __b.`ct__stamp` = __m.`ct__stamp`) __c WHERE `ct__mask` IS NOT NULL) __kk) __k ON (xxhash64(__a.`region`, __a.`ct__target_dt`) ^ shiftright(CAST(__a.`id` AS BIGINT), 6)) = (xxhash64(__k.`region`, __k.`ct__target_dt`) ^ shiftright(CAST(__k.`id` AS BIGINT), 6)) AND coalesce(__a.`region` = __k.`region`, false) AND coalesce(__a.`ct__target_dt` = __k.`ct__target_dt`, false) AND coalesce(shiftright(CAST(__a.`id` AS BIGINT), 6) = shiftright(CAST(__k.`id` AS BIGINT), 6), false) AND (__k.`ct__mask` & shiftleft(1L, CAST(CAST(__a.`id` AS BIGINT) & 63 AS INT))) <> 0) __g
UNION ALL
SELECT `id`, `v`, `op`, `seq`, `region`, `ct__target_dt` AS `dt` FROM (SELECT `id`, `v`, `op`, `seq`, `region`, `dt`, `ct__target_dt` FROM (SELECT __b.`id`, __b.`v`, __b.`op`, __b.`seq`, __b.`region`, __b.`dt`, __m.`ct__target_dt` FROM s.t__cumulative __b JOIN (SELECT * FROM s.t__chain_map WHERE `ct__version` = 'RUN0005' AND `ct__branch` = 'cumulative') __m ON __b.`region` = __m.`region` AND __b.`dt` = __m.`ct__source_dt` AND __b.`ct__stamp` = __m.`ct__stamp`) __c WHERE NOT coalesce(`op` IN ('-U', '-D'), false)) __g) __v WHERE coalesce(`dt` >= '20250102' AND `dt` <= '20250106', false)
;
ALTER TABLE s.t__snapshot SET TBLPROPERTIES ('chaintable.view-map' = 'RUN0005 875dd0ddb0853ba7', 'chaintable.written.670a4fd92544ba849b379232e46843eea3f68f6c' = 'none')
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
SHOW PARTITIONS s.t__cumulative
;
ALTER TABLE s.t__snapshot SET TBLPROPERTIES ('chaintable.last-expire-check' = '<now>', 'chaintable.written.c6ebfb16e78dfbb54964c5fcd5b9516f60fbbd41' = 'none')
;
SHOW TBLPROPERTIES s.t__chain_lock
;
DROP VIEW IF EXISTS s.t__chain_lock
