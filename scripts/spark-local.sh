#!/usr/bin/env bash
# Local Spark services from the venv's pyspark wheel, bound to 127.0.0.1 (no Docker, no network).
#   scripts/spark-local.sh start thrift|cluster|connect
#   scripts/spark-local.sh stop thrift|cluster|connect|all
#   scripts/spark-local.sh status
# State (pid files, logs, warehouse, Derby metastore) lives in $CHAINTABLE_SPARK_STATE
# (default: <repo>/.spark-local), one sub-directory per service.
# Env: THRIFT_PORT (10000), MASTER_PORT (7077), CONNECT_PORT (15002), MASTER_WEBUI_PORT (8080),
#      WORKER_WEBUI_PORT (8081), THRIFT_MASTER / CONNECT_MASTER (local[*]),
#      CHAINTABLE_THRIFT_ANSI=false (Thrift Server with ANSI off; default: Spark's default, on),
#      PYTHON (default <repo>/.venv/bin/python), START_TIMEOUT (120 s), STOP_GRACE (20 s).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-$repo/.venv/bin/python}
SPARK_HOME=$("$py" -c 'import pyspark,os;print(os.path.dirname(pyspark.__file__))')
state=${CHAINTABLE_SPARK_STATE:-$repo/.spark-local}
mkdir -p "$state"
state=$(cd "$state" && pwd)
THRIFT_PORT=${THRIFT_PORT:-10000} MASTER_PORT=${MASTER_PORT:-7077} CONNECT_PORT=${CONNECT_PORT:-15002}
export SPARK_HOME SPARK_LOCAL_IP=127.0.0.1 SPARK_IDENT_STRING=chaintable
export SPARK_PID_DIR=$state/pids SPARK_LOG_DIR=$state/logs PYSPARK_PYTHON=${PYSPARK_PYTHON:-$py}

THRIFT=org.apache.spark.sql.hive.thriftserver.HiveThriftServer2
CONNECT=org.apache.spark.sql.connect.service.SparkConnectServer
MASTER=org.apache.spark.deploy.master.Master
WORKER=org.apache.spark.deploy.worker.Worker

pidfile() { echo "$SPARK_PID_DIR/spark-$SPARK_IDENT_STRING-$1-1.pid"; }
logfile() { ls -t "$SPARK_LOG_DIR"/spark-"$SPARK_IDENT_STRING-$1"-1-*.out 2>/dev/null | head -1; }
alive() { [ -f "$(pidfile "$1")" ] && kill -0 "$(cat "$(pidfile "$1")")" 2>/dev/null; }
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# spark-submit options shared by the SQL servers: catalog, metastore, derby.log and the JVM's
# temp dir (Hive's <uuid>_resources, scratch and block-manager dirs) in $state/<svc>
sql_confs() {
  local dir=$state/$1
  mkdir -p "$dir/tmp"
  confs=(--conf "spark.sql.warehouse.dir=$dir/warehouse"
    --conf "spark.hadoop.javax.jdo.option.ConnectionURL=jdbc:derby:;databaseName=$dir/metastore_db;create=true"
    --driver-java-options "-Dderby.system.home=$dir -Djava.io.tmpdir=$dir/tmp"
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
  if kill -0 "$pid" 2>/dev/null; then
    echo "stopping $1 (pid $pid)"
    kill "$pid" 2>/dev/null || true
    for ((i = 0; i < ${STOP_GRACE:-20} * 4; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    if kill -0 "$pid" 2>/dev/null; then echo "  SIGKILL $pid"; kill -9 "$pid" 2>/dev/null || true; fi
    while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
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

stop() {
  case $1 in
  thrift) stop_class "$THRIFT" ;;
  connect) stop_class "$CONNECT" ;;
  cluster) stop_class "$WORKER"; stop_class "$MASTER" ;;
  all) stop thrift; stop connect; stop cluster ;;
  *) usage ;;
  esac
}

status() {
  local c
  for c in "$THRIFT" "$CONNECT" "$MASTER" "$WORKER"; do
    if alive "$c"; then echo "${c##*.}: running (pid $(cat "$(pidfile "$c")"))"
    else echo "${c##*.}: stopped"; fi
  done
  echo "state: $state"
}

usage() { echo "usage: $0 start thrift|cluster|connect | stop thrift|cluster|connect|all | status" >&2; exit 2; }

case ${1:-} in
start) [ $# = 2 ] || usage; start "$2" ;;
stop) [ $# = 2 ] || usage; stop "$2" ;;
status) status ;;
*) usage ;;
esac
