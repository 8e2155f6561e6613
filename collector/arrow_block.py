"""Rows -> an Arrow IPC stream the store parses itself (``INSERT ... FORMAT ArrowStream``).

The conversion workers hand the store one block per spool segment. Building it with pyarrow
(compiled: it reads the rows' strings and dicts in place, one column at a time) costs the
workers less than clickhouse-connect's Native encoder (which builds the low-cardinality
dictionaries in Python), and the engine parses Arrow for about what it spends on
Native. The Arrow types follow the table's ClickHouse types, so a value the table cannot hold
(a time past 2262, say) fails here, named by column.
"""

from __future__ import annotations

import io
import re
from functools import cache
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.ipc as ipc

from rewind.exporter.errors import RewindError

FORMAT = "ArrowStream"
_WRAPPED = re.compile(r"^(\w+)\((.*)\)$")
_SCALARS = {"UInt8": pa.uint8(), "UInt64": pa.uint64(), "DateTime64(9)": pa.timestamp("ns")}


class ArrowBlockError(RewindError):
    """A column's values do not fit its type; the message names the column."""


def arrow_type(clickhouse: str, key: bool = False) -> pa.DataType:
    """The Arrow type the store reads into ``clickhouse`` (the types our tables use).
    Strings are large (64-bit offsets): a block's attribute values can exceed 2 GiB."""
    if clickhouse in _SCALARS:
        return _SCALARS[clickhouse]
    if clickhouse == "String":
        return pa.string() if key else pa.large_string()
    match = _WRAPPED.match(clickhouse)
    if match is None:
        raise ValueError(f"no Arrow type for ClickHouse type {clickhouse}")
    wrapper, inner = match.groups()
    if wrapper == "LowCardinality":
        return arrow_type(inner, key=True)  # few distinct values: the engine builds the dictionary
    if wrapper == "Array":
        return pa.list_(arrow_type(inner))
    if wrapper == "Map":
        key_type, value_type = (part.strip() for part in inner.split(",", 1))
        return pa.map_(arrow_type(key_type, key=True), arrow_type(value_type))
    raise ValueError(f"no Arrow type for ClickHouse type {clickhouse}")


def _sample(kind: pa.DataType) -> Any:
    """A value of every part of ``kind`` (none empty), to run each conversion once."""
    if pa.types.is_map(kind):
        return {_sample(kind.key_type): _sample(kind.item_type)}
    if pa.types.is_list(kind):
        return [_sample(kind.value_type)]
    return "x" if pa.types.is_string(kind) or pa.types.is_large_string(kind) else 1


def warm(columns: tuple[str, ...], types: tuple[str, ...]) -> None:
    """Encodes one row: a fresh process's first block otherwise costs twice the next ones
    (pyarrow sets up its conversions and memory pool on first use)."""
    row = [_sample(field.type) for field in arrow_schema(columns, types)]
    write_arrow([row], io.BytesIO(), columns, types)


@cache
def arrow_schema(columns: tuple[str, ...], types: tuple[str, ...]) -> pa.Schema:
    return pa.schema([pa.field(name, arrow_type(kind)) for name, kind in zip(columns, types,
                                                                             strict=True)])


def write_arrow(rows: list[list[Any]], target: BinaryIO, columns: tuple[str, ...],
                types: tuple[str, ...]) -> None:
    """``rows`` (values in ``columns`` order, maps as dicts) -> one Arrow stream on ``target``.
    Raises ``ArrowBlockError`` naming the first column whose values do not fit."""
    schema = arrow_schema(columns, types)
    arrays = []
    for field, values in zip(schema, list(zip(*rows, strict=True)) or [()] * len(schema),
                             strict=True):
        try:
            arrays.append(pa.array(values, type=field.type))
        except (pa.ArrowException, OverflowError, TypeError, ValueError) as error:
            raise ArrowBlockError(f"column {field.name}: {error}") from error
    batch = pa.RecordBatch.from_arrays(arrays, schema=schema)
    with ipc.new_stream(target, schema) as stream:
        stream.write_batch(batch)
