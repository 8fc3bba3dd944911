#!/usr/bin/env bash
# Local Spark services from the venv's pyspark wheel, bound to 127.0.0.1 (no Docker, no network).
#   scripts/spark-local.sh start thrift|cluster|connect|metastore
#   scripts/spark-local.sh stop thrift|cluster|connect|metastore|all
#   scripts/spark-local.sh status
# State (pid files, logs, warehouse, Derby metastore) lives in $CHAINTABLE_SPARK_STATE
# (default: <repo>/.spark-local), one sub-directory per service.
# `metastore` is a Hive metastore service (Thrift, thrift://127.0.0.1:9083) backed by a private
# PostgreSQL instance (127.0.0.1:5433, data in $state/metastore/pg), for several Spark processes
# sharing one catalog; it installs Debian's postgresql + libpostgresql-jdbc-java when missing.
# Hive 2.3's metastore (the wheel's) has no bind-host setting and listens on every interface:
# clients here use 127.0.0.1; on a shared host keep the port behind a firewall.
# Clients: spark.hadoop.hive.metastore.uris=thrift://127.0.0.1:9083 and
# spark.sql.warehouse.dir=$state/metastore/warehouse.
# Env: THRIFT_PORT (10000), MASTER_PORT (7077), CONNECT_PORT (15002), MASTER_WEBUI_PORT (8080),
#      WORKER_WEBUI_PORT (8081), THRIFT_MASTER / CONNECT_MASTER (local[*]),
#      METASTORE_PORT (9083), PG_PORT (5433), METASTORE_HEAP (512m),
#      CHAINTABLE_THRIFT_ANSI=false (Thrift Server with ANSI off; default: Spark's default, on),
#      CHAINTABLE_METASTORE_URIS=thrift://127.0.0.1:9083 (thrift/connect use that metastore service
#      and its warehouse, $CHAINTABLE_METASTORE_WAREHOUSE, instead of their own Derby metastore),
#      PYTHON (default <repo>/.venv/bin/python), START_TIMEOUT (120 s), STOP_GRACE (20 s).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-$repo/.venv/bin/python}
SPARK_HOME=$("$py" -c 'import pyspark,os;print(os.path.dirname(pyspark.__file__))')
state=${CHAINTABLE_SPARK_STATE:-$repo/.spark-local}
mkdir -p "$state"
state=$(cd "$state" && pwd)
THRIFT_PORT=${THRIFT_PORT:-10000} MASTER_PORT=${MASTER_PORT:-7077} CONNECT_PORT=${CONNECT_PORT:-15002}
METASTORE_PORT=${METASTORE_PORT:-9083} PG_PORT=${PG_PORT:-5433}
export SPARK_HOME SPARK_LOCAL_IP=127.0.0.1 SPARK_IDENT_STRING=chaintable
export SPARK_PID_DIR=$state/pids SPARK_LOG_DIR=$state/logs PYSPARK_PYTHON=${PYSPARK_PYTHON:-$py}

THRIFT=org.apache.spark.sql.hive.thriftserver.HiveThriftServer2
CONNECT=org.apache.spark.sql.connect.service.SparkConnectServer
MASTER=org.apache.spark.deploy.master.Master
WORKER=org.apache.spark.deploy.worker.Worker
HMS=org.apache.hadoop.hive.metastore.HiveMetaStore

pidfile() { echo "$SPARK_PID_DIR/spark-$SPARK_IDENT_STRING-$1-1.pid"; }
logfile() { ls -t "$SPARK_LOG_DIR"/spark-"$SPARK_IDENT_STRING-$1"-1-*.out 2>/dev/null | head -1; }
# a pid that exists and is not a zombie (PID 1 of some VMs and containers never reaps orphans,
# and kill -0 succeeds on a zombie)
running() {
  local s
  kill -0 "$1" 2>/dev/null || return 1
  s=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
  s=${s##*) }; [ "${s%% *}" != Z ]
}
alive() { [ -f "$(pidfile "$1")" ] && running "$(cat "$(pidfile "$1")")"; }
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# spark-submit options shared by the SQL servers: catalog, metastore, derby.log and the JVM's
# temp dir (Hive's <uuid>_resources, scratch and block-manager dirs) in $state/<svc>
# (with CHAINTABLE_METASTORE_URIS: the metastore service and its shared warehouse instead of Derby)
sql_confs() {
  local dir=$state/$1
  mkdir -p "$dir/tmp"
  if [ -n "${CHAINTABLE_METASTORE_URIS:-}" ]; then
    confs=(--conf "spark.sql.warehouse.dir=${CHAINTABLE_METASTORE_WAREHOUSE:-$state/metastore/warehouse}"
      --conf "spark.hadoop.hive.metastore.uris=$CHAINTABLE_METASTORE_URIS")
  else
    confs=(--conf "spark.sql.warehouse.dir=$dir/warehouse"
      --conf "spark.hadoop.javax.jdo.option.ConnectionURL=jdbc:derby:;databaseName=$dir/metastore_db;create=true")
  fi
  confs+=(--driver-java-options "-Dderby.system.home=$dir -Djava.io.tmpdir=$dir/tmp"
    --conf spark.sql.shuffle.partitions=4 --conf spark.ui.enabled=false
    --conf spark.sql.metadataCacheTTLSeconds=5 --conf spark.cleaner.periodicGC.interval=1min)  # README: running on a cluster
}

wait_port() { # class port name
  local class=$1 port=$2 name=$3 t0=$launched timeout=${START_TIMEOUT:-120}
  until port_open "$port"; do
    if ! alive "$class"; then
      echo "$name died during start-up; log tail:" >&2; tail -40 "$(logfile "$class")" >&2; return 1
    fi
    if (( SECONDS - t0 >= timeout )); then
      echo "$name not listening on 127.0.0.1:$port after ${timeout}s; log tail:" >&2
      tail -40 "$(logfile "$class")" >&2; stop_class "$class"; return 1
    fi
    echo "  waiting for $name on 127.0.0.1:$port ($((SECONDS - t0))s)"; sleep 2
  done
  echo "$name up on 127.0.0.1:$port (pid $(cat "$(pidfile "$class")"), $((SECONDS - t0))s after launch)"
}

launch() { # mode class args...
  local mode=$1 class=$2; shift 2
  launched=$SECONDS
  "$SPARK_HOME/sbin/spark-daemon.sh" "$mode" "$class" 1 "$@"
}

stop_class() {
  local f pid i
  f=$(pidfile "$1")
  [ -f "$f" ] || return 0
  pid=$(cat "$f")
  if running "$pid"; then
    echo "stopping $1 (pid $pid)"
    kill "$pid" 2>/dev/null || true
    for ((i = 0; i < ${STOP_GRACE:-20} * 4; i++)); do running "$pid" || break; sleep 0.25; done
    if running "$pid"; then echo "  SIGKILL $pid"; kill -9 "$pid" 2>/dev/null || true; fi
    while running "$pid"; do sleep 0.1; done
  fi
  rm -f "$f"
}

busy() { # class port: true (and a message) when running; fails when another process has the port
  if alive "$1"; then echo "${1##*.} already running (pid $(cat "$(pidfile "$1")"))"; return 0; fi
  if port_open "$2"; then echo "127.0.0.1:$2 is already in use" >&2; exit 1; fi
  return 1
}

start() {
  case $1 in
  thrift)
    busy "$THRIFT" "$THRIFT_PORT" && return
    sql_confs thrift
    if [ "${CHAINTABLE_THRIFT_ANSI:-true}" = false ]; then confs+=(--conf spark.sql.ansi.enabled=false); fi
    launch submit "$THRIFT" --name chaintable-thrift --master "${THRIFT_MASTER:-local[*]}" "${confs[@]}" \
      --hiveconf hive.server2.thrift.bind.host=127.0.0.1 \
      --hiveconf "hive.server2.thrift.port=$THRIFT_PORT" spark-internal
    wait_port "$THRIFT" "$THRIFT_PORT" "Thrift Server" ;;
  connect)
    busy "$CONNECT" "$CONNECT_PORT" && return
    sql_confs connect
    launch submit "$CONNECT" --name chaintable-connect --master "${CONNECT_MASTER:-local[*]}" \
      "${confs[@]}" --conf spark.sql.catalogImplementation=hive \
      --conf spark.connect.grpc.binding.address=127.0.0.1 \
      --conf "spark.connect.grpc.binding.port=$CONNECT_PORT"
    wait_port "$CONNECT" "$CONNECT_PORT" "Spark Connect server" ;;
  cluster)
    busy "$MASTER" "$MASTER_PORT" && return
    mkdir -p "$state/cluster/work"
    # no REST submission server: it would take the fixed port 6066
    SPARK_MASTER_OPTS="${SPARK_MASTER_OPTS:-} -Dspark.master.rest.enabled=false" launch start "$MASTER" --host 127.0.0.1 --port "$MASTER_PORT" \
      --webui-port "${MASTER_WEBUI_PORT:-8080}"
    wait_port "$MASTER" "$MASTER_PORT" "Master"
    launch start "$WORKER" --host 127.0.0.1 --cores 1 --memory 2g \
      --webui-port "${WORKER_WEBUI_PORT:-8081}" --work-dir "$state/cluster/work" \
      "spark://127.0.0.1:$MASTER_PORT"
    wait_worker ;;
  metastore) ms_start ;;
  *) usage ;;
  esac
}

wait_worker() { # the Worker has no fixed port: wait for the master to log its registration
  local t0=$launched
  until grep -q "Registering worker" "$(logfile "$MASTER")" 2>/dev/null; do
    alive "$WORKER" || { echo "Worker died; log tail:" >&2; tail -40 "$(logfile "$WORKER")" >&2; return 1; }
    (( SECONDS - t0 < ${START_TIMEOUT:-120} )) || { echo "Worker did not register" >&2; return 1; }
    echo "  waiting for the Worker to register ($((SECONDS - t0))s)"; sleep 1
  done
  echo "Worker registered (pid $(cat "$(pidfile "$WORKER")")): spark://127.0.0.1:$MASTER_PORT"
}

# --- Hive metastore service + private PostgreSQL ---------------------------------------------
# $state/metastore: pg/ (PostgreSQL data, socket, log; owned by the postgres user when run as root),
# conf/hive-site.xml, schematool/ (DataNucleus SchemaTool inputs), tmp/, warehouse/.
ms=$state/metastore pgjar=/usr/share/java/postgresql.jar
pgdata=$ms/pg/data pglog=$ms/pg/postgres.log

pg_bindir() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
as_pg() { # PostgreSQL refuses to run as root: run it as the postgres user then (cwd: somewhere it can read)
  if [ "$(id -u)" = 0 ]; then (cd / && runuser -u postgres -- "$@"); else "$@"; fi
}
pg_pid() { [ -f "$pgdata/postmaster.pid" ] && head -1 "$pgdata/postmaster.pid"; }
pg_alive() { local p; p=$(pg_pid) && running "$p"; }
psql_ms() { # user db args...: psql over TCP (trust), stop at the first error
  local u=$1 d=$2; shift 2
  "$pgbin/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PG_PORT" -U "$u" -d "$d" "$@"
}

pg_install() { # Debian packages, only when missing; the package's own cluster (5432) is not used
  pgbin=$(pg_bindir)
  if [ -n "$pgbin" ] && [ -x "$pgbin/pg_ctl" ] && [ -x "$pgbin/initdb" ] && [ -f "$pgjar" ]; then return; fi
  echo "installing postgresql and libpostgresql-jdbc-java (apt-get)"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql libpostgresql-jdbc-java >/dev/null
  pgbin=$(pg_bindir)
  [ -n "$pgbin" ] && [ -f "$pgjar" ] || { echo "PostgreSQL or its JDBC driver still missing" >&2; exit 1; }
}

pg_start() { # private cluster on 127.0.0.1:$PG_PORT, database metastore owned by user hive
  local sock=$ms/pg/run t0=$SECONDS
  if pg_alive; then echo "PostgreSQL already running (pid $(pg_pid))"; else
    if port_open "$PG_PORT"; then echo "127.0.0.1:$PG_PORT is already in use (PG_PORT)" >&2; exit 1; fi
    mkdir -p "$sock"
    if [ "$(id -u)" = 0 ]; then chown -R postgres: "$ms/pg"; fi
    as_pg test -w "$ms/pg" || {
      echo "the postgres user cannot write $ms/pg: put CHAINTABLE_SPARK_STATE where it can" >&2; exit 1; }
    if [ ! -f "$pgdata/PG_VERSION" ]; then
      echo "initdb $pgdata"
      as_pg "$pgbin/initdb" -D "$pgdata" -A trust -U postgres -E UTF8 --locale=C >"$ms/pg/initdb.log" 2>&1 || {
        echo "initdb failed; log tail:" >&2; tail -20 "$ms/pg/initdb.log" >&2; exit 1; }
    fi
    (( ${#sock} < 90 )) || sock=  # a Unix socket path is limited to 107 bytes: TCP only then
    as_pg "$pgbin/pg_ctl" -D "$pgdata" -l "$pglog" -w -t "${START_TIMEOUT:-120}" \
      -o "-p $PG_PORT -k '$sock' -c listen_addresses=127.0.0.1" start >/dev/null || {
      echo "PostgreSQL did not start; log tail:" >&2; tail -20 "$pglog" >&2; exit 1; }
    echo "PostgreSQL up on 127.0.0.1:$PG_PORT (pid $(pg_pid), $((SECONDS - t0))s)"
  fi
  [ "$(psql_ms postgres postgres -Atc "select count(*) from pg_roles where rolname = 'hive'")" = 1 ] ||
    psql_ms postgres postgres -c "create role hive login password 'hive'"
  [ "$(psql_ms postgres postgres -Atc "select count(*) from pg_database where datname = 'metastore'")" = 1 ] ||
    psql_ms postgres postgres -c "create database metastore owner hive"
}

# The whole metastore schema, created up front (lazy DDL by the service deadlocks its own clients):
# the JDO tables by DataNucleus's SchemaTool from the package.jdo inside the wheel's hive-metastore
# jar (the wheel ships no hive-schema-*.sql), DataNucleus's SEQUENCE_TABLE, then the VERSION row,
# last: its presence means "complete". Re-runnable: SchemaTool only adds missing tables. Hive's
# transaction tables (not JDO classes) are left out: the service then logs a swallowed error on
# DROP DATABASE, nothing else uses them here.
ms_schema() {
  local n t0=$SECONDS dir=$ms/schematool
  n=$(psql_ms hive metastore -Atc "select count(*) from pg_tables where schemaname = 'public'
    and tablename in ('VERSION', 'SEQUENCE_TABLE')")
  if [ "$n" = 2 ] && [ "$(psql_ms hive metastore -Atc 'select count(*) from "VERSION"')" != 0 ]; then
    return; fi
  echo "creating the metastore schema (DataNucleus SchemaTool)"
  mkdir -p "$dir"
  "$py" - "$SPARK_HOME"/jars/hive-metastore-*.jar "$dir/package.jdo" <<'EOF'
import sys, zipfile
open(sys.argv[2], "wb").write(zipfile.ZipFile(sys.argv[1]).read("package.jdo"))
EOF
  # the same DataNucleus settings as the service's ObjectStore (HiveConf defaults): datanucleus1
  # identifiers and legacy "native" = increment ids (SEQUENCE_TABLE), as Hive's own schema scripts
  cat >"$dir/schema.properties" <<EOF
javax.jdo.PersistenceManagerFactoryClass=org.datanucleus.api.jdo.JDOPersistenceManagerFactory
javax.jdo.option.ConnectionURL=jdbc:postgresql://127.0.0.1:$PG_PORT/metastore
javax.jdo.option.ConnectionDriverName=org.postgresql.Driver
javax.jdo.option.ConnectionUserName=hive
javax.jdo.option.ConnectionPassword=hive
datanucleus.storeManagerType=rdbms
datanucleus.identifierFactory=datanucleus1
datanucleus.rdbms.useLegacyNativeValueStrategy=true
datanucleus.schema.autoCreateAll=true
datanucleus.schema.validateTables=false
datanucleus.schema.validateColumns=false
datanucleus.schema.validateConstraints=false
datanucleus.transactionIsolation=read-committed
datanucleus.connectionPoolingType=None
datanucleus.plugin.pluginRegistryBundleCheck=LOG
datanucleus.rdbms.initializeColumnInfo=NONE
EOF
  (cd "$dir" && "$java" -cp "$SPARK_HOME/jars/*:$pgjar" org.datanucleus.store.schema.SchemaTool \
    -create -api JDO -props "$dir/schema.properties" "$dir/package.jdo") >"$dir/schematool.log" 2>&1 &&
    grep -q 'completed successfully' "$dir/schematool.log" || {
    echo "SchemaTool failed; log tail:" >&2; tail -30 "$dir/schematool.log" >&2; exit 1; }
  # DataNucleus's id table (it would create it lazily), the version row
  psql_ms hive metastore -1 -f - <<'EOF'
CREATE TABLE IF NOT EXISTS "SEQUENCE_TABLE" ("SEQUENCE_NAME" varchar(255) NOT NULL,
  "NEXT_VAL" bigint NOT NULL, CONSTRAINT "SEQUENCE_TABLE_PK" PRIMARY KEY ("SEQUENCE_NAME"));
INSERT INTO "VERSION" ("VER_ID", "SCHEMA_VERSION", "VERSION_COMMENT")
  SELECT 1, '2.3.0', 'Hive release version 2.3.0 (DataNucleus SchemaTool, scripts/spark-local.sh)'
  WHERE NOT EXISTS (SELECT 1 FROM "VERSION");
EOF
  n=$(psql_ms hive metastore -Atc "select count(*) from pg_tables where schemaname = 'public'")
  echo "metastore schema: $n tables ($((SECONDS - t0))s)"
}

ms_conf() {
  mkdir -p "$ms/conf" "$ms/warehouse" "$ms/tmp"
  cat >"$ms/conf/hive-site.xml" <<EOF
<?xml version="1.0"?>
<!-- written by scripts/spark-local.sh on every start -->
<configuration>
  <property><name>javax.jdo.option.ConnectionURL</name><value>jdbc:postgresql://127.0.0.1:$PG_PORT/metastore</value></property>
  <property><name>javax.jdo.option.ConnectionDriverName</name><value>org.postgresql.Driver</value></property>
  <property><name>javax.jdo.option.ConnectionUserName</name><value>hive</value></property>
  <property><name>javax.jdo.option.ConnectionPassword</name><value>hive</value></property>
  <property><name>datanucleus.schema.autoCreateAll</name><value>false</value></property>
  <!-- Hive 2.3's default BONECP is not in the wheel (Spark's own clients switch to DBCP) -->
  <property><name>datanucleus.connectionPoolingType</name><value>DBCP</value></property>
  <property><name>hive.metastore.schema.verification</name><value>false</value></property>
  <property><name>hive.metastore.warehouse.dir</name><value>$ms/warehouse</value></property>
</configuration>
EOF
}

ms_start() {
  local log=$SPARK_LOG_DIR/spark-$SPARK_IDENT_STRING-$HMS-1-$(hostname).out
  busy "$HMS" "$METASTORE_PORT" && return
  java=${JAVA_HOME:+$JAVA_HOME/bin/}java
  pg_install
  pg_start
  ms_schema
  ms_conf
  mkdir -p "$SPARK_PID_DIR" "$SPARK_LOG_DIR"
  [ ! -f "$log" ] || mv -f "$log" "$log.1"
  launched=$SECONDS
  # hive.root.logger=console: Hive's log4j2 file goes to stderr (this log) instead of $tmp/<user>/hive.log;
  # the context selector: the wheel has no disruptor jar for Hive's async loggers
  nohup "$java" "-Xmx${METASTORE_HEAP:-512m}" -Djava.io.tmpdir="$ms/tmp" -Dhive.root.logger=console \
    -Dlog4j2.contextSelector=org.apache.logging.log4j.core.selector.ClassLoaderContextSelector \
    -cp "$ms/conf:$SPARK_HOME/jars/*:$pgjar" "$HMS" -p "$METASTORE_PORT" \
    >>"$log" 2>&1 </dev/null &
  echo $! >"$(pidfile "$HMS")"
  wait_port "$HMS" "$METASTORE_PORT" "Hive metastore" || {
    echo "(PostgreSQL is still running: scripts/spark-local.sh stop metastore)" >&2; return 1; }
  echo "  clients: spark.hadoop.hive.metastore.uris=thrift://127.0.0.1:$METASTORE_PORT spark.sql.warehouse.dir=$ms/warehouse"
}

pg_stop() { # pg_ctl stop -m fast signals the postmaster's pid; then -m immediate; SIGKILL last
  local pid i
  pid=$(pg_pid) || return 0
  running "$pid" || return 0
  echo "stopping PostgreSQL (pid $pid)"
  pgbin=$(pg_bindir)
  as_pg "$pgbin/pg_ctl" -D "$pgdata" -m fast -w -t "${STOP_GRACE:-20}" stop >/dev/null 2>&1 ||
    as_pg "$pgbin/pg_ctl" -D "$pgdata" -m immediate -w -t 5 stop >/dev/null 2>&1 || true
  for ((i = 0; i < 20; i++)); do running "$pid" || break; sleep 0.25; done
  if running "$pid"; then echo "  SIGKILL $pid"; kill -9 "$pid" 2>/dev/null || true; fi
  while running "$pid"; do sleep 0.1; done
}

stop() {
  case $1 in
  thrift) stop_class "$THRIFT" ;;
  connect) stop_class "$CONNECT" ;;
  cluster) stop_class "$WORKER"; stop_class "$MASTER" ;;
  metastore) stop_class "$HMS"; pg_stop ;;
  all) stop thrift; stop connect; stop cluster; stop metastore ;;
  *) usage ;;
  esac
}

status() {
  local c
  for c in "$THRIFT" "$CONNECT" "$MASTER" "$WORKER" "$HMS"; do
    if alive "$c"; then echo "${c##*.}: running (pid $(cat "$(pidfile "$c")"))"
    else echo "${c##*.}: stopped"; fi
  done
  if pg_alive; then echo "PostgreSQL (metastore): running (pid $(pg_pid), 127.0.0.1:$PG_PORT)"
  else echo "PostgreSQL (metastore): stopped"; fi
  echo "state: $state"
}

usage() {
  echo "usage: $0 start thrift|cluster|connect|metastore | stop thrift|cluster|connect|metastore|all | status" >&2
  exit 2
}

case ${1:-} in
start) [ $# = 2 ] || usage; start "$2" ;;
stop) [ $# = 2 ] || usage; stop "$2" ;;
status) status ;;
*) usage ;;
esac
