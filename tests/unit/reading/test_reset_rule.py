"""The reset rule of docs/log-format.md (section 6) holds in any partition order (issue 41): at a
generation that starts at snapshot S a consumer drops only the rows whose last change came from
a snapshot before S, and drops records of snapshots before S that it reads later. Multi-partition
logs, built by hand as the reader delivers them (replay.ChangeRecord), are applied to a
replay.Replica in every order a consumer may read their partitions: each partition whole, in
every permutation of the partitions, and every interleaving that keeps each partition's own
offset order; directly, and through a replay.Normalizer (the reader's `normalize`)."""
import itertools
from collections import Counter
from typing import Dict, Iterator, List, Optional, Sequence

import pytest

from dbt.adapters.logstore.reading.replay import ChangeRecord, Normalizer, Replica, generation_starts

Log = Dict[int, List[ChangeRecord]]  # partition -> its records, in offset order


def row(partition: int, offset: int, key: Optional[str], version: str, snapshot: int,
        generation: Optional[int] = None, op: str = "c") -> ChangeRecord:
    image = {"id": key, "version": version}
    return ChangeRecord(partition, offset, None if key is None else {"id": key}, op,
                        image if op == "d" else None, None if op == "d" else image, 0, snapshot,
                        generation)


def interleavings(lists: Sequence[List[ChangeRecord]]) -> Iterator[List[ChangeRecord]]:
    """Every merge of the lists that keeps each list's own order."""
    lists = [lst for lst in lists if lst]
    if not lists:
        yield []
        return
    for i, first in enumerate(lists):
        rest = [lst[1:] if j == i else lst for j, lst in enumerate(lists)]
        for tail in interleavings(rest):
            yield [first[0], *tail]


def every_order(log: Log) -> Iterator[List[ChangeRecord]]:
    partitions = list(log.values())
    for order in itertools.permutations(partitions):  # each partition whole, one after another
        yield [r for records in order for r in records]
    yield from interleavings(partitions)


def replayed(records: List[ChangeRecord], normalized: bool = False) -> Counter:
    """The rows a Replica ends with, fed directly or through a Normalizer (`--normalize`)."""
    replica = Replica()
    for record in Normalizer().apply(records) if normalized else records:
        replica.apply(record)
    return Counter(f"{r.get('id')}={r.get('version')}" for r in replica.rows())


def assert_every_order_gives(log: Log, expected: Sequence[str]) -> int:
    orders = 0
    for order in every_order(log):
        for normalized in (False, True):
            got = replayed(order, normalized)
            how = "normalized, delivered" if normalized else "delivered"
            assert got == Counter(expected), (
                f"{how} as {[(r.partition, r.offset) for r in order]}: {sorted(got.elements())}, "
                f"expected {sorted(expected)}")
        orders += 1
    return orders


def test_a_later_snapshot_read_before_the_generation_starts_elsewhere_is_kept():
    # snapshot 3 starts generation 2 with the table's rows a and d (partitions 0 and 1); c left
    # the table while the log was lost and nothing retracted it; snapshot 4 writes e to
    # partition 2, which holds none of the generation's records
    log = {
        0: [row(0, 0, "a", "1", 1, generation=1), row(0, 1, "a", "2", 2),
            row(0, 2, "a", "3", 3, generation=2), row(0, 3, "a", "4", 4)],
        1: [row(1, 0, "b", "1", 1, generation=1), row(1, 1, "d", "2", 2),
            row(1, 2, "d", "3", 3, generation=2)],
        2: [row(2, 0, "c", "1", 1, generation=1), row(2, 1, "e", "4", 4)],
    }
    orders = assert_every_order_gives(log, ["a=4", "d=3", "e=4"])
    assert orders == 6 + 1260  # 3! partition orders, 9! / (4! 3! 2!) interleavings


def test_generations_one_after_another():
    # generation 2 at snapshot 2, generation 3 at snapshot 4 (only a is left in the table);
    # a generation that starts before the latest reset must not reset again when read late
    log = {
        0: [row(0, 0, "a", "1", 1, generation=1), row(0, 1, "a", "2", 2, generation=2),
            row(0, 2, "a", "4", 4, generation=3), row(0, 3, "a", "5", 5)],
        1: [row(1, 0, "b", "1", 1, generation=1), row(1, 1, "b", "2", 2, generation=2),
            row(1, 2, "c", "3", 3)],
        2: [row(2, 0, "d", "3", 3), row(2, 1, "f", "5", 5)],
    }
    assert_every_order_gives(log, ["a=5", "f=5"])


def test_a_delete_of_an_older_snapshot_read_after_the_reset_is_dropped():
    log = {
        0: [row(0, 0, "a", "1", 1, generation=1), row(0, 1, "a", "3", 3, generation=2)],
        1: [row(1, 0, "b", "1", 1, generation=1), row(1, 1, "b", "1", 2, op="d"),
            row(1, 2, "b", "4", 4)],
    }
    assert_every_order_gives(log, ["a=3", "b=4"])


def test_keyless_rows_reset_by_their_snapshot():
    # generation 2 at snapshot 2 writes only to partition 0; snapshot 3's row in partition 1
    # may be read before it
    log = {
        0: [row(0, 0, None, "x", 1, generation=1), row(0, 1, None, "z", 2, generation=2)],
        1: [row(1, 0, None, "y", 1, generation=1), row(1, 1, None, "w", 3)],
    }
    assert_every_order_gives(log, ["None=z", "None=w"])


@pytest.mark.parametrize("keyed", [True, False])
def test_an_empty_generation_resets_wherever_its_marker_is_read(keyed):
    # the table was rebuilt empty (generation 2 at snapshot 2: no rows, its marker only), then
    # snapshot 3 inserted a row in partition 1
    key = (lambda k: k) if keyed else (lambda k: None)
    log = {
        0: [row(0, 0, key("a"), "1", 1, generation=1)],
        1: [row(1, 0, key("b"), "1", 1, generation=1), row(1, 1, key("c"), "3", 3)],
        -1: [generation_starts(2, 2)],
    }
    assert_every_order_gives(log, [f"{key('c')}=3"])


def test_an_empty_generation_alone_empties_the_replica():
    log = {0: [row(0, 0, "a", "1", 1, generation=1)], 1: [row(1, 0, "b", "1", 1, generation=1)],
           -1: [generation_starts(2, 2)]}
    assert_every_order_gives(log, [])
