"""The `peers` bench section's logic that decides what a row says (benchmarks/peer_check.py,
peers.py, peer_tasks.py): whether a loader's batches equal the Parquet values, nulls included;
the one-line reason a loader could not run; the null-filled copy; CPU time from /proc."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from benchmarks import peer_check, peer_tasks, peers

INT64_MIN = -(2**63)
EXPECTED = [  # pyarrow's rows (to_pylist): a null int, a null string, a list
    {"price": 1.5, "I1": 7, "C1": "ab", "history": [1, 2]},
    {"price": 2.5, "I1": None, "C1": None, "history": []},
    {"price": 3.5, "I1": 9, "C1": "cd", "history": [3]},
]


def _got(i1, c1, history=([1, 2], [], [3])):
    return {
        "price": [[np.float32(1.5)], [np.float32(2.5)], [np.float32(3.5)]],
        "I1": i1,
        "C1": c1,
        "history": [list(h) for h in history],
    }


@pytest.mark.parametrize(
    "i1, c1, nulls",
    [
        ([[7], [], [9]], [[b"ab"], [], [b"cd"]], {peer_check.KEPT: ["I1", "C1"]}),
        (
            [[7], [INT64_MIN], [9]],
            [[b"ab"], [b"None"], [b"cd"]],
            {"INT64_MIN": ["I1"], "b'None'": ["C1"]},
        ),
        ([[7], [0], [9]], [[b"ab"], [b""], [b"cd"]], {peer_check.FILLED: ["I1", "C1"]}),
        (
            [[7], [float("nan")], [9]],
            [["ab"], [None], ["cd"]],
            {"NaN": ["I1"], peer_check.KEPT: ["C1"]},
        ),
    ],
)
def test_null_stand_ins_are_named_and_values_compared(i1, c1, nulls):
    checked = peer_check.compare(EXPECTED, _got(i1, c1))
    assert checked["differ"] == [] and checked["missing"] == []
    assert checked["nulls"] == nulls


def test_a_changed_value_a_shorter_list_or_an_absent_column_is_found():
    got = _got([[7], [], [8]], [[b"ab"], [], [b"cd"]], history=([1, 2], [], []))
    del got["C1"]
    checked = peer_check.compare(EXPECTED, got)
    assert checked["differ"] == ["I1", "history"]
    assert checked["missing"] == ["C1"]
    line = peer_check.verdict(checked, "on a copy")
    assert line.startswith("on a copy; values differ: I1, history; columns absent: C1")


def test_floats_compare_at_float32_precision_only():
    assert peer_check._equal(0.1, [np.float32(0.1)])
    assert not peer_check._equal(0.1, [np.float32(0.10001)])


def test_per_row_reads_dense_ragged_and_sparse_tensors():
    import tensorflow as tf

    assert peer_check.per_row(np.array([1, 2])) == [[1], [2]]
    assert peer_check.per_row(tf.ragged.constant([[1, 2], []])) == [[1, 2], []]
    sparse = tf.SparseTensor(indices=[[0, 0], [2, 0]], values=[5, 6], dense_shape=[3, 1])
    assert peer_check.per_row(sparse) == [[5], [], [6]]


def test_rows_are_matched_by_price_and_ambiguous_prices_left_out(tmp_path):
    table = pa.table({"price": [1.0, 2.0, 2.0, 3.0], "I1": pa.array([1, None, 3, 4], pa.int64())})
    folder = tmp_path / "day=1"
    folder.mkdir()
    pq.write_table(table, folder / "part.parquet")
    rows, positions = peer_check.reference(str(tmp_path), [3.0, 2.0, 9.0, 1.0])
    assert positions == [0, 3]  # 2.0 is held by two rows, 9.0 by none
    assert [r["I1"] for r in rows] == [4, 1]
    line = peer_check.check(str(tmp_path), {"price": [[3.0], [1.0]], "I1": [[4], [1]]})
    assert line == "values equal on 2 rows"


def test_the_reason_is_one_line_naming_the_exception():
    tail = (
        "benchmark run x failed (exit code 1); log y:\n"
        "Traceback (most recent call last):\n"
        '  File "a.py", line 1, in <module>\n'
        "ValueError: Failed to convert a NumPy array to a Tensor (Unsupported object type).\n"
        "\n\t [[{{node EagerPyFunc}}]] [Op:IteratorGetNext] name: \n"
    )
    assert peers.one_line(RuntimeError(tail)) == (
        "ValueError: Failed to convert a NumPy array to a Tensor (Unsupported object type)."
    )
    aborted = (
        "failed (exit code -6); log y:\nterminate called\n  what():  Unexpected end of stream\n"
    )
    assert peers.one_line(RuntimeError(aborted)) == "what(): Unexpected end of stream"
    timed_out = "benchmark run x failed (timed out after 600 s); log y:\nValueError: z\n"
    assert peers.one_line(RuntimeError(timed_out)) == "timed out after 600 s"


def test_the_filled_copy_has_no_nulls_and_the_same_values_elsewhere(tmp_path):
    source = tmp_path / "data" / "day=1"
    source.mkdir(parents=True)
    table = pa.table(
        {
            "I1": pa.array([1, None], pa.int64()),
            "C1": pa.array([None, "x"]),
            "price": [1.0, 2.0],
            "history": pa.array([[1], None], pa.list_(pa.int64())),
        }
    )
    pq.write_table(table, source / "part.parquet")
    out = peers.filled_copy(str(tmp_path / "data"), str(tmp_path / "filled"))
    filled = pq.read_table(f"{out}/day=1/part.parquet")
    assert filled.to_pydict() == {
        "I1": [1, 0],
        "C1": ["", "x"],
        "price": [1.0, 2.0],
        "history": [[1], []],
    }
    assert filled.schema == table.schema


def test_cpu_seconds_are_read_past_a_command_name_with_spaces():
    ticks = peer_tasks.os.sysconf("SC_CLK_TCK")
    stat = f"42 (a (b) c) S 1 2 3 4 5 6 7 8 9 10 {3 * ticks} {ticks} {5 * ticks} {ticks} 0 0"
    assert peer_tasks._proc_cpu(stat, reaped=False) == 4
    assert peer_tasks._proc_cpu(stat, reaped=True) == 10
    assert peer_tasks.tree_cpu_seconds() > 0
