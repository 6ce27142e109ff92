"""Quicker Spark JVMs for the test suite: the suite starts hundreds of short-lived Spark drivers
(every `dbt` command of the session method, the tests' own readers), and on a 2-core machine
loading Spark's classes is a large share of each one's start. So the suite's drivers start
from a class-data archive of those classes (JDK CDS, `-XX:SharedArchiveFile`), made once per
Java, pyspark install and class path by a small session that loads them
(`-XX:ArchiveClassesAtExit`), and kept in .jars/spark-cds. The same drivers read
tests/spark-conf/spark-defaults.conf (there, why) as their properties file: a JVM with a
non-empty directory on its class path (SPARK_CONF_DIR is put there) cannot use an archive.

The option reaches the JVM through SPARK_SUBMIT_OPTS, which Spark's launcher adds to a driver's
command line (pyspark's gateway, spark-submit) without printing anything; `-Xlog:cds*=off`
keeps the JVM quiet when the archive does not fit (another class path: a Thrift Server, the
install test's fresh venv), and the JVM then starts without it. Only the tests use this: users'
Spark and `make bench` start as Spark ships them. LOGSTORE_TEST_QUICK_JVM=0 turns it off.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]
ARCHIVES = ROOT / ".jars" / "spark-cds"
SPARK_DEFAULTS = ROOT / "tests" / "spark-conf" / "spark-defaults.conf"
SWITCH = "LOGSTORE_TEST_QUICK_JVM"
QUIET = "-Xlog:cds*=off"

# Loads what a logged model's run loads: Hive support and its Derby metastore, a parquet table
# written, altered, read back, joined and aggregated (with the tests' defaults, as they run).
WARM_UP = """
import tempfile
from pyspark.sql import SparkSession
work = tempfile.mkdtemp(prefix="logstore-cds-")
spark = (SparkSession.builder.master("local[2]").enableHiveSupport()
         .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
         .config("spark.sql.warehouse.dir", work + "/warehouse")
         .config("spark.driver.extraJavaOptions", "-Dderby.system.home=" + work)
         .getOrCreate())
spark.sql("create table t using parquet as select id, cast(id % 7 as string) as v from range(100)")
spark.sql("alter table t set tblproperties ('a' = 'b')")
spark.sql("create table u using parquet as select * from t where id > 10")
spark.sql("select t.v, count(*), max(u.id) from t left join u on t.id = u.id group by t.v").collect()
spark.sql("insert into u select id, 'x' from range(5)")
spark.sql("show tblproperties t").collect()
spark.table("u").toJSON().collect()
spark.sql("drop table t")
"""


def _key() -> str:
    """The archive fits one Java, one set of Spark jars and one class path: all are in its name."""
    import pyspark

    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
    jars = Path(pyspark.__file__).parent / "jars"
    listing = sorted(f"{p.name}:{p.stat().st_size}:{int(p.stat().st_mtime)}" for p in jars.glob("*.jar"))
    # the driver's class path: tests/conftest.py's format jars and conf directory come first
    class_path = [os.environ.get(v, "") for v in ("PYSPARK_SUBMIT_ARGS", "SPARK_CONF_DIR")]
    return hashlib.sha256("\n".join([java, str(jars), *class_path, *listing]).encode()).hexdigest()[:16]


def _archive() -> Optional[Path]:
    """The archive for this install, made once (under a lock: pytest-xdist's workers start
    together); None when it cannot be made, and the suite goes on without it."""
    ARCHIVES.mkdir(parents=True, exist_ok=True)
    archive = ARCHIVES / f"spark-{_key()}.jsa"
    with open(ARCHIVES / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if archive.exists():
            return archive
        partial = archive.with_suffix(".partial")
        env = {**os.environ, "SPARK_SUBMIT_OPTS": f"-XX:ArchiveClassesAtExit={partial} {QUIET}"}
        result = subprocess.run([sys.executable, "-c", WARM_UP], env=env, capture_output=True,
                                text=True, timeout=600)
        if result.returncode != 0 or not partial.exists():
            print(f"tests/spark_jvm.py: no class-data archive (exit {result.returncode}: "
                  f"{result.stderr[-300:]})", file=sys.stderr)
            return None
        partial.replace(archive)
        return archive


def quick_jvm_options() -> str:
    """SPARK_SUBMIT_OPTS for the suite (empty when turned off)."""
    if os.environ.get(SWITCH, "1") == "0":
        return ""
    try:
        archive = _archive()
    except (OSError, subprocess.SubprocessError) as error:  # no Java here (unit tests): no archive
        print(f"tests/spark_jvm.py: no class-data archive ({error})", file=sys.stderr)
        archive = None
    return f"-XX:SharedArchiveFile={archive} {QUIET}" if archive else ""


def configure_test_spark() -> None:
    """Every Spark driver pyspark starts in this process and in the processes it starts (dbt's
    session method, tests/functional/contract.py spark()) reads the tests' Spark defaults, has
    both table formats' jars on its class path (tests/table_formats.py: a session's catalog is
    read when it starts, and a JVM's class path cannot grow after), and starts from the archive.
    Once per run: pytest-xdist's workers inherit it all from the controller."""
    from tests.table_formats import put_jars_on_class_path

    args = os.environ.get("PYSPARK_SUBMIT_ARGS", "pyspark-shell")
    if "--properties-file" not in args:
        os.environ["PYSPARK_SUBMIT_ARGS"] = f"--properties-file {SPARK_DEFAULTS} {args}"
    put_jars_on_class_path()
    existing = os.environ.get("SPARK_SUBMIT_OPTS", "")
    if "-Dlogstore-quick-jvm" in existing:  # decided once, archive or not: the workers skip it
        return
    os.environ["SPARK_SUBMIT_OPTS"] = " ".join(
        part for part in (existing, quick_jvm_options(), "-Dlogstore-quick-jvm=1") if part)
