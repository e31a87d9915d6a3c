"""Data commands: convert, infer-schema, show-schema, show-statistics, head. infer-schema,
show-schema and head read only footers, protos and a few records: they load pyarrow and
tensorflow_metadata, not TensorFlow, Beam or TFX."""

from __future__ import annotations

import argparse
import contextlib
import time

from tfx_tabular.cli.common import (
    BadInputError,
    UsageError,
    check_names,
    check_writable,
    csv,
    key_values,
    named,
    positive_int,
    say,
)
from tfx_tabular.cli.flags import add_parameter_flags, flag, parameter_values

# ParquetExampleGen's parameters convert's flags set, by group of its --help.
CONVERSION_FLAGS = {
    "input": (
        "columns",
        "exclude_columns",
        "partition_filter",
        "partition_types",
        "decimal_as",
        "table_version",
        "keep_index_columns",
    ),
    "splits": ("split_keys", "split_by_partition", "eval_last_partitions"),
    "output": (
        "compression",
        "compression_level",
        "num_shards",
        "read_batch_rows",
        "read_batch_bytes",
        "columnar_batch_rows",
        "columnar_strings",
    ),
}
# ParquetSchemaGen's parameters infer-schema's flags set.
SCHEMA_FLAGS = (
    "label",
    "sample_statistics",
    "sample_rows",
    "max_vocabulary_size",
    "curated_schema",
    "exclude_columns",
    "keep_index_columns",
)


def _add_conversion_arguments(p: argparse.ArgumentParser) -> None:
    from tfx_tabular.components.parquet_example_gen.spec import DEFAULT_SPLIT_BUCKETS, PARAMETERS

    buckets = ",".join(f"{name}={n}" for name, n in DEFAULT_SPLIT_BUCKETS.items())
    add_parameter_flags(p.add_argument_group("input"), PARAMETERS, CONVERSION_FLAGS["input"])
    g = p.add_argument_group(f"splits (default: hash buckets {buckets} over the whole row)")
    g.add_argument(
        "--split-buckets",
        type=csv,
        metavar="NAME=N,...",
        help="hash buckets per split, e.g. train=9,eval=1",
    )
    add_parameter_flags(g, PARAMETERS, CONVERSION_FLAGS["splits"])
    g.add_argument(
        "--split-pattern",
        action="append",
        default=[],
        metavar="NAME=GLOB",
        help="files matching GLOB (relative to INPUT) → split NAME",
    )
    g = p.add_argument_group("output")
    add_parameter_flags(g, PARAMETERS, CONVERSION_FLAGS["output"])
    g.add_argument(
        "--example-statistics",
        metavar="DIR",
        help="also write the example statistics of each split (TFDV's, computed while "
        "converting) as DIR/Split-<name>/FeatureStats.pb, stock StatisticsGen's "
        "ExampleStatistics layout (see show-statistics)",
    )
    g.add_argument(
        "--beam-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="a Beam pipeline argument (repeatable), e.g. --beam-arg=--direct_num_workers=2",
    )


def _check_conversion_names(args, parameters: dict) -> None:
    """The columns and partition keys convert's flags name, against the input's footers."""
    by_partition = parameters["split_by_partition"]
    check_names(
        args.input,
        {
            flag(name): parameters[name] or []
            for name in ("columns", "exclude_columns", "split_keys")
        },
        {
            flag("split_by_partition"): [by_partition] if by_partition else [],
            flag("partition_filter"): list(parameters["partition_filter"] or {}),
            flag("partition_types"): list(parameters["partition_types"] or {}),
        },
    )


def _conversion_config(args):
    """The conversion's ConversionConfig from `convert`'s flags, each checked (UsageError)."""
    from tfx_tabular.coders import columnar
    from tfx_tabular.components.parquet_example_gen.spec import PARAMETERS
    from tfx_tabular.conversion import plan

    buckets = key_values(args.split_buckets, "--split-buckets")
    for name, count in buckets.items():
        if not count.isdigit():
            raise UsageError(f"--split-buckets {name}={count}: N must be a whole number")
    patterns = key_values(args.split_pattern, "--split-pattern")
    names = [name for group in CONVERSION_FLAGS.values() for name in group]
    parameters = parameter_values(args, PARAMETERS, names)
    _check_conversion_names(args, parameters)
    if parameters.get("columnar_strings") and not parameters.get("columnar_batch_rows"):
        raise UsageError(
            "--columnar-strings puts the strings in the columnar batch records: give "
            f"--columnar-batch-rows too (e.g. {columnar.DEFAULT_BATCH_ROWS})"
        )
    return plan.ConversionConfig.from_parameters(
        {
            **parameters,
            "patterns": patterns or None,
            "buckets": {name: int(count) for name, count in buckets.items()} or None,
        }
    )


def cmd_convert(args) -> dict:
    from tfx_tabular.conversion import convert, plan
    from tfx_tabular.runners.progress import Progress

    config = _conversion_config(args)
    check_writable(args.output_dir)
    if args.example_statistics:
        check_writable(args.example_statistics, "--example-statistics")
    dataset, splits = plan.plan_conversion(args.input, config.source)
    options = config.output
    say(
        args,
        f"converting {dataset.num_rows:,} rows in {len(dataset.files)} files "
        f"({len(dataset.features)} features) → {args.output_dir}",
    )
    with contextlib.ExitStack() as stack:
        progress = (
            None
            if args.quiet
            else stack.enter_context(Progress("converting", dataset.num_rows, "rows"))
        )
        result = convert.convert(
            dataset,
            args.output_dir,
            splits,
            options,
            args.beam_arg,
            on_progress=progress.update if progress is not None else None,
            example_statistics_dir=args.example_statistics,
        )
        if progress is not None:
            progress.update(sum(result.rows.values()))
    for name, rows in result.rows.items():
        say(args, f"  Split-{name}: {rows:,} rows")
    say(
        args,
        f"  {sum(result.rows.values()):,} rows in {result.seconds:.1f} s = "
        f"{result.rows_per_second:,.0f} rows/s ({result.num_shards} shards, compression "
        f"{result.compression})",
    )
    return {
        "output_dir": result.output_dir,
        "rows": result.rows,
        "num_shards": result.num_shards,
        "compression": result.compression,
        "seconds": round(result.seconds, 3),
        "rows_per_second": round(result.rows_per_second),
        "files": len(dataset.files),
        "features": len(dataset.features),
        "example_statistics": result.example_statistics_dir,
        "non_finite_values": {
            counted.feature: {
                "nan": counted.nan,
                "pos_inf": counted.pos_inf,
                "neg_inf": counted.neg_inf,
            }
            for counted in result.non_finite
        },
        "warnings": result.warnings,
    }


def cmd_infer_schema(args) -> dict:
    from tfx_tabular import schemas
    from tfx_tabular.components.parquet_schema_gen.spec import PARAMETERS as SCHEMA_GEN
    from tfx_tabular.schemas.source import schema_of

    check_names(
        args.input,
        {
            flag("label"): [args.label] if args.label else [],
            flag("exclude_columns"): args.exclude_columns,
        },
    )
    if args.curated_schema:
        load_schema_file(args.curated_schema, flag("curated_schema"))
    check_writable(args.output, "--output")
    start = time.perf_counter()
    inferred = schema_of(
        args.input,
        **parameter_values(args, SCHEMA_GEN, SCHEMA_FLAGS),
        beam_pipeline_args=args.beam_arg,
        example_statistics=args.example_statistics,
    )
    seconds = time.perf_counter() - start
    source = (
        "the Examples artifact"
        if inferred.from_examples
        else f"{inferred.num_files} Parquet footers"
    )
    passes = (
        f"read {len(inferred.read_columns)} columns whose footers hold no statistics"
        if inferred.read_columns
        else f"no pass over the {inferred.metadata.num_rows:,} rows"
    )
    say(
        args,
        f"inferred {len(inferred.schema.feature)} features from {source} in "
        f"{seconds:.2f} s ({passes})",
    )
    document = {
        "output": args.output,
        "features": len(inferred.schema.feature),
        "rows": inferred.metadata.num_rows,
        "from_examples": inferred.from_examples,
        "parquet_files": inferred.num_files,
        "read_columns": list(inferred.read_columns),
        "seconds": round(seconds, 3),
    }
    if inferred.sample_statistics is not None:
        report = inferred.sample_statistics
        say(
            args,
            f"sample statistics over {report.rows:,} rows: {report.seconds:.1f} s, "
            f"{report.string_domains} string domains added",
        )
        document["sample_statistics"] = {
            "rows": report.rows,
            "seconds": round(report.seconds, 3),
            "string_domains": report.string_domains,
        }
    schemas.write_schema(inferred.schema, args.output)
    say(args, f"schema written to {args.output}")
    return document


def _print_table(title: str, header, rows) -> None:
    """A table of plain text: Text objects, so rich reads no markup (`[pickup]`, `[bold]`) or
    emoji codes in the data."""
    import sys

    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    view = Table(title=Text(title))
    for name in header:
        view.add_column(Text(name), overflow="fold")
    for row in rows:
        view.add_row(*(Text(cell) for cell in row))
    # In a pipe or a log there is no terminal width to fit: keep rows on one line each.
    Console(width=None if sys.stdout.isatty() else 240).print(view)


SCHEMA_FILE = "give a schema.pbtxt (infer-schema writes one) or a Schema artifact folder"


def load_schema_file(path: str, flag: str = ""):
    """The schema at `path` (a schema.pbtxt, or a Schema artifact folder holding one); a missing
    file or one that is not a schema fails naming it and its `flag`."""
    from google.protobuf import text_format

    from tfx_tabular import schemas

    try:
        return schemas.load_schema(path)
    except FileNotFoundError as e:
        inside = f": {e.filename}" if e.filename and e.filename != path else ""
        raise FileNotFoundError(f"{named(flag, path)}{inside} does not exist") from None
    except NotADirectoryError:
        raise BadInputError(
            f"{named(flag, path)} is neither a .pbtxt file nor a folder holding a schema.pbtxt",
            hint=SCHEMA_FILE,
        ) from None
    except (text_format.ParseError, UnicodeDecodeError) as e:
        raise BadInputError(
            f"{named(flag, path)} is not a schema in protobuf text format ({e})", hint=SCHEMA_FILE
        ) from None


def cmd_show_schema(args) -> dict:
    from google.protobuf import json_format

    from tfx_tabular.schemas.describe import HEADER, schema_rows

    schema = load_schema_file(args.file)
    if not args.quiet:
        _print_table(f"{args.file}: {len(schema.feature)} features", HEADER, schema_rows(schema))
    # Only --json prints the document; a wide schema's dict is a noticeable share of the command.
    return json_format.MessageToDict(schema, preserving_proto_field_name=True) if args.json else {}


NO_EXAMPLE_STATISTICS = (
    "give the example statistics: convert --example-statistics DIR writes them, and a pipeline's "
    "are its ExampleStatistics artifact folder (run --with-example-statistics)"
)


def _load_example_statistics(path: str) -> dict:
    """Split name → DatasetFeatureStatisticsList, from a FeatureStats.pb file, a Split-<name>
    folder, or an ExampleStatistics folder (ParquetExampleGen's or stock StatisticsGen's)."""
    from google.protobuf import message

    from tfx_tabular.conversion.source_metadata import is_examples_folder

    if is_examples_folder(path):
        raise BadInputError(
            f"{path} is an Examples folder, not example statistics", hint=NO_EXAMPLE_STATISTICS
        )
    try:
        return _read_example_statistics(path.rstrip("/"))
    except message.DecodeError as e:
        raise BadInputError(
            f"{path}: not TFDV's example statistics ({e})", hint=NO_EXAMPLE_STATISTICS
        ) from None


def _read_example_statistics(path: str) -> dict:
    import posixpath

    import tensorflow as tf
    from tensorflow_metadata.proto.v0 import statistics_pb2

    from tfx_tabular.schemas.example_statistics import load_example_statistics

    if tf.io.gfile.isdir(path) and not posixpath.basename(path).startswith("Split-"):
        return load_example_statistics(path)
    file = posixpath.join(path, "FeatureStats.pb") if tf.io.gfile.isdir(path) else path
    if not tf.io.gfile.exists(file):
        raise FileNotFoundError(f"{file} does not exist")
    stats = statistics_pb2.DatasetFeatureStatisticsList()
    with tf.io.gfile.GFile(file, "rb") as handle:
        stats.ParseFromString(handle.read())
    name = posixpath.basename(posixpath.dirname(file))
    return {name[len("Split-") :] if name.startswith("Split-") else name: stats}


def _shown_splits(by_split: dict, split, compare) -> list:
    """--split / --compare, else train beside eval when both exist, else the first one or two."""
    for name in (split, compare):
        if name is not None and name not in by_split:
            raise UsageError(f"no split {name!r}: the statistics hold {', '.join(by_split)}")
    if split:
        return [split] + ([compare] if compare else [])
    if {"train", "eval"} <= set(by_split):
        return ["train", "eval"]
    return list(by_split)[:2]


def write_facets_page(path: str, output: str, split=None, compare=None) -> dict:
    """TFDV's Facets Overview of the example statistics at `path` (see
    `_load_example_statistics`) as an HTML page at `output` (local or an object store); returns
    the split name → statistics shown."""
    import tensorflow as tf
    import tensorflow_data_validation as tfdv

    by_split = _load_example_statistics(path)
    shown = _shown_splits(by_split, split, compare)
    html = tfdv.utils.display_util.get_statistics_html(
        by_split[shown[0]],
        by_split[shown[1]] if len(shown) > 1 else None,
        lhs_name=shown[0],
        rhs_name=shown[1] if len(shown) > 1 else "",
    )
    page = f"<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>{html}</body></html>"
    with tf.io.gfile.GFile(output, "w") as out:
        out.write(page)
    return {name: by_split[name] for name in shown}


def cmd_show_statistics(args) -> dict:
    check_writable(args.output, "--output")
    shown = write_facets_page(args.path, args.output, args.split, args.compare)
    summary = {}
    for name, stats in shown.items():
        dataset = stats.datasets[0]
        summary[name] = {"examples": dataset.num_examples, "features": len(dataset.features)}
        say(args, f"  {name}: {dataset.num_examples:,} examples, {len(dataset.features)} features")
    say(args, f"wrote {args.output} (TFDV's Facets Overview; open it in a browser)")
    return {"path": args.path, "output": args.output, "splits": summary}


def _printable(text: str) -> str:
    """Control characters (a newline, a NUL) as their escapes: one line per value, nothing the
    terminal acts on."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


def _cell(value, width: int = 28) -> str:
    """A value as `head`'s table shows it: null as ∅, bytes as UTF-8 (other bytes escaped),
    control characters escaped, cut to `width` characters with a trailing …."""
    if value is None:
        return "∅"
    if isinstance(value, bytes):
        value = value.decode("utf-8", "backslashreplace")
    text = (
        _printable(str(value))
        if not isinstance(value, list)
        else "[" + ", ".join(_cell(v, width) for v in value) + "]"
    )
    return text if len(text) <= width else text[: width - 1] + "…"


def _iso_duration(delta) -> str:
    """A duration as ISO 8601 seconds, exactly: PT90.000001S (nanoseconds for pandas'
    Timedelta, which duration[ns] columns give)."""
    import datetime

    nanoseconds = getattr(delta, "value", None)
    digits = 6 if nanoseconds is None else 9
    units = delta // datetime.timedelta(microseconds=1) if nanoseconds is None else nanoseconds
    seconds, fraction = divmod(abs(units), 10**digits)
    return f"{'-' if units < 0 else ''}PT{seconds}.{fraction:0{digits}d}S"


def json_value(value):
    """A value of `head`'s rows as JSON, losslessly: numbers, strings, booleans, null and lists
    as themselves; NaN and infinities as the strings "NaN", "Infinity", "-Infinity"; bytes as
    text when they are UTF-8, else {"base64": ...}; decimals as their exact text; timestamps,
    dates and times as ISO 8601 text (every digit of the column's unit, its time zone if it has
    one), durations as ISO 8601 seconds; structs as objects."""
    import base64
    import datetime
    import decimal
    import math

    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return {"base64": base64.b64encode(value).decode("ascii")}
    if isinstance(value, (datetime.date, datetime.time)):  # datetimes are dates too
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return _iso_duration(value)
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    if isinstance(value, dict):
        return {key: json_value(v) for key, v in value.items()}
    return value


def cmd_head(args) -> dict:
    from tfx_tabular.conversion import peek
    from tfx_tabular.conversion.source_metadata import is_examples_folder, read_source_metadata
    from tfx_tabular.schemas.infer import infer_schema

    if is_examples_folder(args.path):
        splits = peek.split_names(args.path)
        if args.split and splits and args.split not in splits:
            raise UsageError(f"--split {args.split!r}: {args.path} holds {', '.join(splits)}")
        schema = infer_schema(read_source_metadata(args.path))
        split, table = peek.head_examples(args.path, args.n, schema, args.split)
        title = f"{args.path}: Split-{split}, first {table.num_rows} tf.Examples"
    else:
        if args.split:
            raise UsageError("--split is for Examples folders; this is a Parquet dataset")
        table = peek.head_parquet(args.path, args.n)
        title = f"{args.path}: first {table.num_rows} Parquet rows"
    rows = table.to_pylist()
    if not args.quiet:
        # One column per record, one row per feature: tabular data is wider than it is long.
        _print_table(
            title,
            ["feature"] + [f"#{i}" for i in range(len(rows))],
            [[name] + [_cell(row[name]) for row in rows] for name in table.column_names],
        )
    return {
        "path": args.path,
        "columns": table.column_names,
        "rows": len(rows),
        "records": [{name: json_value(row[name]) for name in table.column_names} for row in rows],
    }


def add_commands(sub, common: argparse.ArgumentParser) -> None:
    from tfx_tabular.components.parquet_schema_gen.spec import PARAMETERS as SCHEMA_GEN

    p = sub.add_parser(
        "convert",
        parents=[common],
        help="Parquet → TFRecord tf.Example splits "
        "(ParquetExampleGen's Beam pipeline, outside TFX)",
    )
    p.add_argument("input", help="input folder or URI (hive partition folders allowed)")
    p.add_argument("output_dir", help="empty output folder or URI: Split-<name>/ folders go here")
    _add_conversion_arguments(p)
    p.set_defaults(func=cmd_convert)

    p = sub.add_parser(
        "infer-schema",
        parents=[common],
        help="a TFMD schema from Parquet "
        "footers (or a ParquetExampleGen output folder), no data pass",
    )
    p.add_argument("input", help="a Parquet folder, or a folder ParquetExampleGen wrote")
    p.add_argument(
        "-o",
        "--output",
        required=True,
        help="the schema.pbtxt to write (a folder: its schema.pbtxt, as a Schema artifact)",
    )
    add_parameter_flags(p, SCHEMA_GEN, SCHEMA_FLAGS)
    p.add_argument(
        "--example-statistics",
        metavar="DIR",
        help="the example statistics of every split (convert --example-statistics, or an "
        "ExampleStatistics artifact folder): presence, value counts and domains that hold on "
        "each split",
    )
    p.add_argument(
        "--beam-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="a Beam pipeline argument for --sample-statistics (repeatable)",
    )
    p.set_defaults(func=cmd_infer_schema)

    p = sub.add_parser("show-schema", parents=[common], help="a schema.pbtxt as a table")
    p.add_argument("file", help="schema.pbtxt, or a Schema artifact folder")
    p.set_defaults(func=cmd_show_schema)

    p = sub.add_parser(
        "show-statistics",
        parents=[common],
        help="TFDV's Facets view of example statistics as an HTML file",
    )
    p.add_argument(
        "path",
        help="an ExampleStatistics folder (ParquetExampleGen's or StatisticsGen's), "
        "a Split-<name> folder or a FeatureStats.pb",
    )
    p.add_argument("-o", "--output", required=True, help="the HTML file to write")
    p.add_argument("--split", help="the split to show (default: train beside eval)")
    p.add_argument("--compare", help="a second split to show beside --split")
    p.set_defaults(func=cmd_show_statistics)

    p = sub.add_parser(
        "head",
        parents=[common],
        help="the first records of a Parquet dataset "
        "or of an Examples split, decoded with the schema, as a table",
    )
    p.add_argument("path", help="a Parquet folder, or a folder ParquetExampleGen wrote")
    p.add_argument("-n", type=positive_int, default=10, help="how many records")
    p.add_argument("--split", help="the Examples split (default: train, else the first)")
    p.set_defaults(func=cmd_head)
