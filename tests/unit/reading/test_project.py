"""project.py's guards for the commands that read a dbt project from outside a run: the Derby
metastore held by another process, and the engine's output kept off the terminal."""
import subprocess
import sys

from dbt.adapters.logstore.spark.engine_output import stderr_to
from dbt.adapters.logstore.reading.project import metastore_in_use

HOLD = """
import fcntl, sys, time
handle = open(sys.argv[1], "rb+")
fcntl.lockf(handle, fcntl.LOCK_EX)  # as Derby's FileChannel lock on dbex.lck, while booted
print("locked", flush=True)
time.sleep(30)
"""


def test_a_metastore_booted_by_another_process_is_found(tmp_path, monkeypatch):
    # (in a test process whose own Spark may hold a metastore, as the CLI's never does)
    monkeypatch.setattr("dbt.adapters.logstore.reading.project.spark_running", lambda: False)
    database = tmp_path / "metastore_db"
    database.mkdir()
    lock = database / "dbex.lck"
    lock.write_bytes(b"")
    assert metastore_in_use(str(tmp_path)) is None  # nobody holds it (a lock file left behind)
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(lock)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        assert metastore_in_use(str(tmp_path)) == str(database)
    finally:
        holder.kill()
        holder.wait()
    assert metastore_in_use(str(tmp_path)) is None
    assert metastore_in_use(str(tmp_path / "none")) is None and metastore_in_use(None) is None


def test_what_a_child_process_prints_on_stderr_goes_to_the_engine_log(tmp_path, capfd):
    log = tmp_path / "logs" / "engine.log"
    with stderr_to(log):
        subprocess.run([sys.executable, "-c", "import sys; sys.stderr.write('jvm noise\\n')"], check=True)
    subprocess.run([sys.executable, "-c", "import sys; sys.stderr.write('after\\n')"], check=True)
    assert log.read_text() == "jvm noise\n"
    assert capfd.readouterr().err == "after\n"
