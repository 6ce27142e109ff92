"""Every existing topic keeps its bytes: the records and row images written before the formats
became plug-ins (tests/unit/vectors/*-0.json, rendered by the encoder of commit c4162c3 on a
fixed set of changes) are what the formats write now."""
import json
from pathlib import Path

import pytest

from dbt.adapters.logstore.__version__ import version
from dbt.adapters.logstore.commit.snapshots import Attempt, TableRef
from dbt.adapters.logstore.spark.json_images import JsonImages, TIMESTAMP_ISO
from dbt.adapters.logstore.config.log_config import LogConfig

VECTORS = Path(__file__).resolve().parents[1] / "vectors"
RECORDS = json.loads((VECTORS / "records-0.json").read_text())
IMAGES = json.loads((VECTORS / "images-0.json").read_text())


def _bytes(text):
    return None if text is None else text.replace('"version":"<version>"', f'"version":"{version}"').encode()


@pytest.mark.parametrize("case", sorted(RECORDS["cases"]))
def test_the_records_are_byte_for_byte_those_of_before(case):
    vector = RECORDS["cases"][case]
    options = {k: tuple(v) if isinstance(v, list) else v for k, v in vector["options"].items()}
    log = LogConfig(model="m", system="kafka", topic="t", bootstrap_servers="x:1", **options)
    attempt = Attempt(log, TableRef(*RECORDS["table"]), 1, "cs-1", "a1", RECORDS["ts_ms"])
    keys, values, routes, ops = attempt.encode_rows([tuple(change) for change in vector["changes"]])
    assert list(zip(keys, values, routes, ops)) == [
        (_bytes(k), _bytes(v), _bytes(r), o) for k, v, r, o in vector["records"]]


@pytest.mark.parametrize("name, images", [
    ("default", JsonImages()), ("iso", JsonImages(TIMESTAMP_ISO)),
    ("plain-decimals", JsonImages(plain_decimals=True)),
])
def test_the_row_images_are_rendered_by_the_same_sql(name, images):
    expected = IMAGES["images"][name]
    assert images.object_sql(IMAGES["columns"], types=IMAGES["types"]) == expected["object_sql"]
    assert images.from_json_sql("v", "id int, day date") == expected["from_json_sql"]
