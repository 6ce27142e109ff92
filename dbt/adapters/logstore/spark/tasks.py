"""Python work spread over Spark tasks, one input piece each (the Kafka ranges a re-base or a
downstream model reads), through the DataFrame API only: `mapInPandas` over a DataFrame of the
pieces, one partition a piece. No RDD API (`parallelize`), which a Spark Connect
session does not have."""
from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, List, Sequence, Tuple

# output rows a task hands Spark at a time (one pandas frame)
ROWS_PER_BATCH = 10_000


def rows_by_task(spark: Any, pieces: Sequence[Tuple[Any, ...]], piece_schema: str,
                 work: Callable[[Iterator[Tuple[Any, ...]]], Iterable[Tuple[Any, ...]]],
                 schema: Any) -> Any:
    """A DataFrame of `schema` (a StructType) whose rows `work` yields in Spark tasks, one task
    per piece (a tuple of `piece_schema`, a DDL string: the pieces must be picklable)."""
    names = [field.name for field in schema.fields]

    def task(frames: Iterator[Any]) -> Iterator[Any]:
        import pandas as pd

        # plain Python values (pandas gives numpy scalars), as the pieces were made
        mine = (tuple(row) for frame in frames for row in frame.astype(object).itertuples(
            index=False, name=None))
        batch: List[Tuple[Any, ...]] = []
        for row in work(mine):
            batch.append(row)
            if len(batch) >= ROWS_PER_BATCH:
                yield pd.DataFrame(batch, columns=names)
                batch = []
        if batch:
            yield pd.DataFrame(batch, columns=names)

    frame = spark.createDataFrame(list(pieces), piece_schema).repartition(max(1, len(pieces)))
    return frame.mapInPandas(task, schema)
