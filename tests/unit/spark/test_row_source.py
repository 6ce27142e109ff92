"""The row source's pure helpers (no JVM; the session read itself is tested in
tests/functional/test_codec_sql.py)."""
from dbt.adapters.logstore.spark import row_source


def test_tables_the_mirror_reads_are_written_in_bounded_files():
    assert row_source.table_options() == f"options ('maxRecordsPerFile' = '{row_source.ROWS_PER_FILE}')"
    assert 0 < row_source.ROWS_PER_FILE <= 100_000


def test_one_file_of_a_table_is_selected_by_its_quoted_name():
    sql = row_source.one_file_of("db.t", "part-0'1\\x.parquet")
    assert sql == "(select * from db.t where _metadata.file_name = 'part-0\\'1\\\\x.parquet')"
