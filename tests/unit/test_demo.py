"""The demo data's learnable label (tfx_tabular.demo.criteo): drawn from a known probability, the
same whether read from Parquet or from the tf.Examples ParquetExampleGen wrote, and the AUC that
scores it."""

import glob

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pytest
import tensorflow as tf

from tfx_tabular.demo import criteo


def test_roc_auc_ranks_and_counts_ties_half():
    assert criteo.roc_auc([0, 0, 1, 1], [0.1, 0.2, 0.3, 0.4]) == 1.0
    assert criteo.roc_auc([1, 1, 0, 0], [0.1, 0.2, 0.3, 0.4]) == 0.0
    assert criteo.roc_auc([0, 1, 0, 1], [0.5, 0.5, 0.5, 0.5]) == 0.5
    assert criteo.roc_auc([0, 1, 1], [0.2, 0.2, 0.9]) == 0.75
    with pytest.raises(ValueError, match="both positive and negative"):
        criteo.roc_auc([1, 1], [0.1, 0.2])


def test_the_label_follows_its_known_probability_and_the_columns_stay_as_they_were():
    table = criteo.criteo_batch(50_000, np.random.default_rng(7))
    assert table.schema == criteo.SCHEMA and criteo.is_demo_schema(table.schema)
    labels = table.column("label").to_numpy()
    probability = criteo.click_probability(table)
    assert 0.23 < labels.mean() < 0.27  # ~25% clicks, as before the label had a signal
    assert abs(probability.mean() - labels.mean()) < 0.01
    assert 0.78 < criteo.roc_auc(labels, probability) < 0.85
    for name in ("I1", "C1", "C26", "I13"):
        assert 0.04 < table.column(name).null_count / table.num_rows < 0.06
    # A feature outside the known function carries nothing.
    i13 = np.nan_to_num(criteo.scalar_values(table.column("I13")))
    assert abs(criteo.roc_auc(labels, i13) - 0.5) < 0.02
    assert not criteo.is_demo_schema(table.drop(["price"]).schema)


def test_the_probability_is_the_same_from_parquet_rows_and_from_their_tf_examples(tmp_path):
    from conftest import convert_to_examples

    criteo.write_dataset(str(tmp_path / "data"), 2000, days=1, files_per_day=1)
    convert_to_examples(str(tmp_path / "data"), str(tmp_path / "examples"), num_shards=1)
    records = [
        r.numpy() for r in tf.data.TFRecordDataset(glob.glob(f"{tmp_path}/examples/Split-*/*"))
    ]
    parsed = tf.io.parse_example(
        records,
        {
            name: tf.io.RaggedFeature(dtype, row_splits_dtype=tf.int64)
            for name, dtype in [("I1", tf.int64), ("I2", tf.int64), ("I3", tf.int64)]
            + [("C1", tf.string), ("price", tf.float32), ("label", tf.int64)]
        },
    )
    as_lists = pa.table(
        {
            name: pa.ListArray.from_arrays(
                pa.array(r.row_splits.numpy().astype(np.int32)), pa.array(r.flat_values.numpy())
            )
            for name, r in parsed.items()
        }
    )
    from_examples = criteo.click_probability(as_lists)
    parquet = ds.dataset(str(tmp_path / "data"), partitioning="hive").to_table()
    # Rows are in another order in the Examples (hash splits): compare the sorted values.
    np.testing.assert_allclose(
        np.sort(from_examples), np.sort(criteo.click_probability(parquet)), rtol=1e-6
    )
    # A null count is an empty list in a tf.Example, and absent in the values.
    missing = np.isnan(criteo.scalar_values(as_lists.column("I1"))).sum()
    assert missing == parquet.column("I1").null_count > 0
