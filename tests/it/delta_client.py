"""The Delta tests' independent reader and writer: the `deltalake` Python package (delta-rs's
Python binding) and pyarrow, so that what the tests check does not go through neardup's reader.

    python delta_client.py compare TABLE [VERSION|latest] PARQUET_DIR...
        the table's rows (at VERSION) equal the rows of the Parquet folders together, after the
        type mapping neardup documents (unsigned integers as the next signed type, UInt64 as
        its signed bits, fixed-size binary as binary); prints "ROWS rows"; exit 1 if not
    python delta_client.py count TABLE [VERSION|latest]     rows at VERSION
    python delta_client.py version TABLE                    the latest version
    python delta_client.py history TABLE                    one line per commit: VERSION OPERATION
    python delta_client.py groups TABLE|PARQUET_DIR         a line per group: GROUP_ID and its
        members' ids, sorted, of a groups table (Delta, latest version) or Parquet folder
    python delta_client.py write PARQUET TABLE MODE [WHERE]
        writes the Parquet file's rows (those for which the pyarrow expression WHERE on column
        `id`, e.g. "id < 100", holds) to TABLE (mode append or overwrite)

TABLE is a local path or an s3:// URL; for S3 the endpoint comes from AWS_ENDPOINT_URL.
"""

import json
import os
import sys

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake


def storage_options(uri):
    if not uri.startswith("s3://"):
        return None
    return {
        "AWS_ENDPOINT_URL": os.environ["AWS_ENDPOINT_URL"],
        "AWS_ACCESS_KEY_ID": os.environ.get("AWS_ACCESS_KEY_ID", "neardup-test"),
        "AWS_SECRET_ACCESS_KEY": os.environ.get("AWS_SECRET_ACCESS_KEY", "neardup-test-secret"),
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
        "AWS_S3_ALLOW_UNSAFE_RENAME": "true",
    }


def table(uri, version=None):
    if version in (None, "latest"):
        return DeltaTable(uri, storage_options=storage_options(uri))
    return DeltaTable(uri, version=int(version), storage_options=storage_options(uri))


def as_delta(array):
    """A Parquet output's column as neardup writes it to Delta."""
    t = array.type
    if t == pa.uint64():
        return pc.cast(array, pa.int64(), safe=False)  # the same bits
    if t == pa.uint32():
        return pc.cast(array, pa.int64())
    if t == pa.uint16():
        return pc.cast(array, pa.int32())
    if t == pa.uint8():
        return pc.cast(array, pa.int16())
    if pa.types.is_fixed_size_binary(t):
        return pa.array([None if v is None else v for v in array.to_pylist()], pa.binary())
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pc.cast(array, pa.string())
    return array


def canonical(tbl):
    columns = sorted(tbl.column_names)
    rows = []
    for row in tbl.select(columns).to_pylist():
        rows.append(json.dumps(row, sort_keys=True, default=lambda v: v.hex()))
    rows.sort()
    return columns, rows


def parquet_rows(folders):
    tables = []
    for folder in folders:
        dataset = ds.dataset(folder, format="parquet", partitioning="hive")
        tables.append(dataset.to_table())
    combined = pa.concat_tables(tables, promote_options="permissive")
    return pa.table({name: as_delta(combined[name].combine_chunks()) for name in combined.column_names})


def delta_rows(uri, version):
    arrow = table(uri, version).to_pyarrow_table()
    return pa.table({name: as_delta(arrow[name].combine_chunks()) for name in arrow.column_names})


def main(command, *args):
    if command == "compare":
        uri, version, folders = args[0], args[1], args[2:]
        want_columns, want = canonical(parquet_rows(folders))
        have_columns, have = canonical(delta_rows(uri, version))
        if want_columns != have_columns:
            sys.exit(f"columns differ: Delta {have_columns}, Parquet {want_columns}")
        if want != have:
            missing = [r for r in want if r not in set(have)][:3]
            extra = [r for r in have if r not in set(want)][:3]
            sys.exit(
                f"rows differ: Delta {len(have)}, Parquet {len(want)}; "
                f"missing {missing}; extra {extra}"
            )
        print(f"{len(have)} rows")
    elif command == "count":
        version = args[1] if len(args) > 1 else None
        print(table(args[0], version).to_pyarrow_table().num_rows)
    elif command == "version":
        print(table(args[0]).version())
    elif command == "history":
        for commit in reversed(table(args[0]).history()):
            print(commit.get("version"), commit.get("operation"))
    elif command == "groups":
        uri = args[0]
        if uri.startswith("s3://") or os.path.isdir(os.path.join(uri, "_delta_log")):
            rows = table(uri).to_pyarrow_table()
        else:
            rows = ds.dataset(uri, format="parquet").to_table()
        members = {}
        for group, member in zip(rows["group_id"].to_pylist(), rows["id"].to_pylist()):
            members.setdefault(group, []).append(member)
        for group in sorted(members):
            print(group, *sorted(members[group]))
    elif command == "write":
        source, uri, mode = args[0], args[1], args[2]
        data = pq.read_table(source)
        if len(args) > 3:
            field, op, value = args[3].split()
            compare = {"<": pc.less, ">=": pc.greater_equal}[op]
            data = data.filter(compare(data[field], int(value)))
        write_deltalake(uri, data, mode=mode, storage_options=storage_options(uri))
    else:
        sys.exit(f"unknown command {command}")


if __name__ == "__main__":
    main(*sys.argv[1:])
    # delta-rs's runtime threads can abort the interpreter's teardown ("terminate called
    # without an active exception"); the work is done, so leave without it.
    sys.stdout.flush()
    os._exit(0)
