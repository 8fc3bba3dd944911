"""Spark servers for the functional tests, launched from the venv's pyspark wheel on 127.0.0.1.

Plain functions (the fixtures live in conftest.py):

    server = start_thrift(tmp / "thrift")            # HiveThriftServer2, ANSI on (Spark's default)
    server = start_standalone(tmp / "cluster")       # Master + one Worker (1 core, 2g)
    server = start_connect(tmp / "connect")          # SparkConnectServer (sc://...)
    print(server.url, server.pids, server.startup_seconds)
    server.stop()                                    # SIGTERM, then SIGKILL; waits until gone

Each JVM is started by `$SPARK_HOME/bin/spark-submit` / `spark-class` (which exec java, so the
Popen PID is the JVM's) in its own process group; logs, warehouse and the Derby metastore stay in
`state_dir`. `scripts/spark-local.sh` starts the same servers by hand.
"""

from __future__ import annotations

import atexit
import json
import os
import random
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"
THRIFT_CLASS = "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2"
CONNECT_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
START_TIMEOUT = 120.0


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def thrift_output(port: int, schema: str, **extra: Any) -> dict[str, Any]:
    """A dbt target (`method: thrift`) on the Thrift Server at `port`, `extra` added (e.g. the
    poll_interval): the tests' and the benchmarks' one spelling of it."""
    return {
        "type": "chaintable",
        "method": "thrift",
        "host": HOST,
        "port": port,
        "user": "dbt",
        "schema": schema,
        "connect_retries": 3,
        "connect_timeout": 10,
        **extra,
    }


def free_port() -> int:
    """A free port below the kernel's ephemeral range. A port the kernel picked (bind to 0) is
    one it may hand out again to any socket before the server binds it: a Spark Connect server's
    own driver took its port first once, so it failed to bind ("Failed to bind") while the port
    answered, and dbt waited on it for 600 s."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    ports = list(range(10000, max(10001, low)))
    random.shuffle(ports)  # two test workers choose at once
    for port in ports:
        with socket.socket() as s:
            try:
                s.bind((HOST, port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port on {HOST} in 10000-{low}")


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((HOST, port)) == 0


@dataclass
class Server:
    name: str
    url: str
    port: int
    procs: list[subprocess.Popen] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)
    started_at: float = 0.0  # time.monotonic() at launch
    startup_seconds: float = 0.0  # launch -> listening (and, for a cluster, worker registered)
    stopped: bool = False

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    @property
    def pid(self) -> int:
        return self.procs[0].pid

    def alive(self) -> bool:
        return all(p.poll() is None for p in self.procs)

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(
            f"--- {log}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
            for log in self.logs
            if log.exists()
        )

    def stop(self, grace: float = 20.0) -> None:
        """SIGTERM each process group (last started first), SIGKILL after `grace` seconds."""
        atexit.unregister(self.stop)
        if self.stopped:
            return  # never signal a process group id that may have been reused since
        for proc in reversed(self.procs):
            _signal_group(proc.pid, signal.SIGTERM)
            try:
                proc.wait(grace)
            except subprocess.TimeoutExpired:
                _signal_group(proc.pid, signal.SIGKILL)
                proc.wait()
            # the group may outlive its leader (a Worker's executor JVMs): wait until it is empty
            deadline = time.monotonic() + grace
            while _signal_group(proc.pid, 0):
                if time.monotonic() > deadline:
                    _signal_group(proc.pid, signal.SIGKILL)
                time.sleep(0.1)
        self.stopped = True

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def _signal_group(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
        return True
    except ProcessLookupError:
        return False


def _launch(
    server: Server, state_dir: Path, log_name: str, argv: list[str], **env_extra: str
) -> subprocess.Popen:
    # a test may have set SPARK_REMOTE for dbt: spark-submit must not see it
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED")
    }
    env.update(SPARK_HOME=str(spark_home()), SPARK_LOCAL_IP=HOST, **env_extra)
    log = state_dir / "logs" / log_name
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            argv,
            cwd=state_dir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server.procs.append(proc)
    server.logs.append(log)
    return proc


def _wait(server: Server, ready, what: str, timeout: float = START_TIMEOUT) -> None:
    while not ready():
        if not server.alive() or time.monotonic() - server.started_at > timeout:
            reason = "died" if not server.alive() else f"not ready after {timeout:.0f}s"
            tail = server.log_tail()
            server.stop()
            raise RuntimeError(f"{server.name}: {what} {reason}\n{tail}")
        time.sleep(0.25)
    server.startup_seconds = time.monotonic() - server.started_at


def _sql_confs(state_dir: Path) -> list[str]:
    confs = {
        "spark.sql.warehouse.dir": str(state_dir / "warehouse"),
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={state_dir / 'metastore_db'};create=true",
        "spark.sql.shuffle.partitions": "4",
        "spark.ui.enabled": "false",
        # sessions read a table's schema again after 3 s: a chain run that adds columns waits
        # that long before its view reads them (README: running on a cluster)
        "spark.sql.metadataCacheTTLSeconds": "3",
        # a full GC every 20 s lets Spark's cleaner free the broadcasts of finished reads: each
        # read of a merged day broadcasts a small hash table, and with the heap far from full
        # (no full GC) a few minutes of reader loops filled it with them (OutOfMemoryError)
        "spark.cleaner.periodicGC.interval": "20s",
        # and each of those hash tables in a 1 MB page, not 8 MB (helpers.session_params)
        "spark.buffer.pageSize": "1m",
    }
    # the JVM's temp dir too: Hive's <uuid>_resources and scratch dirs would land in /tmp
    (state_dir / "tmp").mkdir(exist_ok=True)
    # 3 GB for the server's one JVM: with 1 GB, three reader sessions of small broadcast joins
    # beside dbt's runs exhausted its heap (test_cluster.py's reader test), and with 2 GB a
    # broadcast of the reader test failed for memory in CI (two test workers beside it)
    args = [
        "--driver-memory",
        "3g",
        "--driver-java-options",
        f"-Dderby.system.home={state_dir} -Djava.io.tmpdir={state_dir / 'tmp'}",
    ]
    for k, v in confs.items():
        args += ["--conf", f"{k}={v}"]
    return args


def _start_sql_server(
    name: str,
    cls: str,
    scheme: str,
    state_dir: Path,
    port: int | None,
    master: str,
    conf: dict[str, str],
    extra: Callable[[int], list[str]],
) -> Server:
    state_dir = Path(state_dir).resolve()
    state_dir.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    if port_open(port):
        raise RuntimeError(f"{name}: {HOST}:{port} is already in use")
    argv = [
        str(spark_home() / "bin" / "spark-submit"),
        "--class",
        cls,
        "--name",
        f"chaintable-{name}",
        "--master",
        master,
        *_sql_confs(state_dir),
    ]
    for k, v in conf.items():
        argv += ["--conf", f"{k}={v}"]
    server = Server(name, f"{scheme}{HOST}:{port}", port, started_at=time.monotonic())
    _launch(server, state_dir, f"{name}.log", argv + extra(port))
    atexit.register(server.stop)
    _wait(server, lambda: port_open(port), f"port {port}")
    return server


def start_thrift(
    state_dir: Path,
    port: int | None = None,
    ansi: bool = True,
    master: str = "local[*]",
    conf: dict[str, str] | None = None,
) -> Server:
    """Spark Thrift Server (HiveServer2 protocol, PyHive / dbt-spark `method: thrift`).

    ANSI stays at Spark's default (on) unless ansi=False; `url` is host:port."""
    conf = dict(conf or {})
    if not ansi:
        conf["spark.sql.ansi.enabled"] = "false"
    return _start_sql_server(
        "thrift",
        THRIFT_CLASS,
        "",
        state_dir,
        port,
        master,
        conf,
        lambda p: [
            "--hiveconf",
            f"hive.server2.thrift.bind.host={HOST}",
            "--hiveconf",
            f"hive.server2.thrift.port={p}",
            "spark-internal",
        ],
    )


def start_connect(
    state_dir: Path,
    port: int | None = None,
    master: str = "local[*]",
    conf: dict[str, str] | None = None,
) -> Server:
    """Spark Connect server with a Hive catalog; `url` is sc://host:port (for SPARK_REMOTE)."""
    conf = {"spark.sql.catalogImplementation": "hive", **(conf or {})}
    return _start_sql_server(
        "connect",
        CONNECT_CLASS,
        "sc://",
        state_dir,
        port,
        master,
        conf,
        lambda p: [
            "--conf",
            f"spark.connect.grpc.binding.address={HOST}",
            "--conf",
            f"spark.connect.grpc.binding.port={p}",
        ],
    )


def start_standalone(
    state_dir: Path, port: int | None = None, cores: int = 1, memory: str = "2g"
) -> Server:
    """Standalone Master + one Worker; `url` is spark://host:port, `pids` are [master, worker]."""
    state_dir = Path(state_dir).resolve()
    (state_dir / "work").mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    if port_open(port):
        raise RuntimeError(f"standalone: {HOST}:{port} is already in use")
    spark_class = str(spark_home() / "bin" / "spark-class")
    server = Server("standalone", f"spark://{HOST}:{port}", port, started_at=time.monotonic())
    atexit.register(server.stop)
    # web UIs on random ports; no REST submission server (it would take the fixed port 6066)
    opts = f"{os.environ.get('SPARK_MASTER_OPTS', '')} -Dspark.master.rest.enabled=false"
    master = [spark_class, MASTER_CLASS, "--host", HOST, "--port", str(port), "--webui-port", "0"]
    _launch(server, state_dir, "master.log", master, SPARK_MASTER_OPTS=opts)
    _wait(server, lambda: port_open(port), f"master port {port}")
    worker = [
        spark_class,
        WORKER_CLASS,
        "--host",
        HOST,
        "--port",
        "0",
        "--webui-port",
        "0",
        "--cores",
        str(cores),
        "--memory",
        memory,
        "--work-dir",
        str(state_dir / "work"),
        server.url,
    ]
    _launch(server, state_dir, "worker.log", worker)
    master_log = server.logs[0]
    _wait(
        server,
        lambda: "Registering worker" in master_log.read_text(errors="replace"),
        "worker registration",
    )
    return server


@dataclass
class Metastore:
    """A Hive metastore service on a private PostgreSQL, started by scripts/spark-local.sh."""

    state_dir: Path
    port: int
    pg_port: int
    startup_seconds: float = 0.0
    stopped: bool = False

    @property
    def uris(self) -> str:
        return f"thrift://{HOST}:{self.port}"

    @property
    def warehouse(self) -> Path:
        return self.state_dir / "metastore" / "warehouse"

    def session_params(self) -> dict[str, str]:
        """What a session-mode dbt profile (server_side_parameters) sets to use it."""
        return {
            "spark.hadoop.hive.metastore.uris": self.uris,
            "spark.sql.warehouse.dir": str(self.warehouse),
            "spark.master": "local[1]",
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
            # a session reads a table's metadata again after 3 s (README: running on a cluster)
            "spark.sql.metadataCacheTTLSeconds": "3",
        }

    def write_profile(self, root: Path, profile: str, schema: str) -> None:
        """profiles.yml in `root`: a session-mode target `t` on this metastore."""
        output = {
            "type": "chaintable",
            "method": "session",
            "host": "localhost",
            "schema": schema,
            "server_side_parameters": self.session_params(),
        }
        (root / "profiles.yml").write_text(
            json.dumps({profile: {"target": "t", "outputs": {"t": output}}})
        )

    def _script(self, *args: str) -> subprocess.CompletedProcess:
        env = {
            **os.environ,
            "CHAINTABLE_SPARK_STATE": str(self.state_dir),
            "METASTORE_PORT": str(self.port),
            "PG_PORT": str(self.pg_port),
        }
        script = Path(__file__).resolve().parents[2] / "scripts" / "spark-local.sh"
        return subprocess.run(
            ["bash", str(script), *args], env=env, capture_output=True, text=True, timeout=600
        )

    def stop(self) -> None:
        atexit.unregister(self.stop)
        if not self.stopped:
            out = self._script("stop", "metastore")
            assert out.returncode == 0, out.stdout + out.stderr
            self.stopped = True

    def alive(self) -> bool:
        return port_open(self.port) and port_open(self.pg_port)


def start_metastore(state_dir: Path) -> Metastore:
    state_dir = Path(state_dir).resolve()
    state_dir.mkdir(parents=True, exist_ok=True)
    server = Metastore(state_dir, free_port(), free_port())
    started = time.monotonic()
    atexit.register(server.stop)
    out = server._script("start", "metastore")
    if out.returncode != 0:
        server.stop()
        raise RuntimeError(f"metastore did not start:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    server.startup_seconds = time.monotonic() - started
    return server
