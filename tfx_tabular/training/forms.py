"""The input form: how `input_fn` hands a batch's features to a model.

* ``exact``: what `tf.io.parse_example` gives for the schema's parsing spec (`feature_spec`):
  strings as `tf.string`, a nullable scalar as a RaggedTensor of 0 or 1 value per row.
* ``integers``: the same features with no string in them, as a GPU trainer wants them: a
  string feature as the int64 bits of each string's FarmHash `Fingerprint64` (what
  `tf.fingerprint(s, "farmhash64")` gives; `categorical.bucket_ids` of it equals
  `tf.strings.to_hash_bucket_fast` of the strings), and a nullable scalar dense, [batch, 1], a
  null taking the spec's default (0, 0.0, or the empty string's fingerprint), beside a bool
  [batch, 1] `<name>.present`, True where the row holds a value. Lists stay ragged.

Both forms come from either records: the columnar batches hold the integer form (their
strings are fingerprints), and per-row records are parsed, then turned into it (`from_parsed`).
A serving signature parses strings and turns them the same way, so a model trained on integers
scores serialized tf.Examples.
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf
from tensorflow_metadata.proto.v0 import schema_pb2

from tfx_tabular.coders import columnar
from tfx_tabular.training.categorical import fingerprint_strings
from tfx_tabular.training.config import INPUT_FORMS, INTEGERS

PRESENT_SUFFIX = ".present"


def present_key(name: str) -> str:
    """The key of a nullable scalar's validity in the integer form."""
    return name + PRESENT_SUFFIX


def nullable_scalars(schema: schema_pb2.Schema, spec: dict) -> frozenset:
    """The spec's features that hold at most one value a row but may be null: a RaggedFeature
    with no partitions whose schema feature has `value_count.max` 1."""
    at_most_one = {f.name for f in schema.feature if f.value_count.max == 1}
    return frozenset(
        name
        for name, entry in spec.items()
        if isinstance(entry, tf.io.RaggedFeature) and not entry.partitions and name in at_most_one
    )


@dataclasses.dataclass(frozen=True)
class InputForm:
    """An input form (`name`, one of INPUT_FORMS) for one parsing spec: which of its entries
    are strings (fingerprinted in the integer form) and which are nullable scalars (dense in
    the integer form)."""

    name: str
    strings: frozenset
    dense_scalars: frozenset

    @property
    def integers(self) -> bool:
        return self.name == INTEGERS

    def from_parsed(self, parsed: dict) -> dict:
        """`tf.io.parse_example`'s tensors for the spec, in this form."""
        if not self.integers:
            return parsed
        out = {}
        for name, tensor in parsed.items():
            string = name in self.strings
            if string:
                tensor = _fingerprints(tensor)
            if name in self.dense_scalars:
                lengths = tensor.row_lengths()
                check = tf.debugging.assert_less_equal(
                    lengths,
                    tf.constant(1, lengths.dtype),
                    message=f"feature {name!r}: a row holds more than the one value its "
                    "schema's value_count allows",
                )
                with tf.control_dependencies([check]):
                    out[present_key(name)] = lengths[:, None] > 0
                fill = columnar.EMPTY_STRING_FINGERPRINT if string else 0
                tensor = tensor.to_tensor(tf.constant(fill, tensor.dtype), shape=[None, 1])
            out[name] = tensor
        return out


def ragged_scalars(features: dict) -> dict:
    """The integer form's dense nullable scalars (those with a `<name>.present`) as the exact
    form's ragged rows of 0 or 1 value; every other feature as it is. For a model that takes
    either form."""
    out = {}
    for name, tensor in features.items():
        present = features.get(present_key(name))
        if name.endswith(PRESENT_SUFFIX) and name[: -len(PRESENT_SUFFIX)] in features:
            continue
        if present is not None and not isinstance(tensor, tf.RaggedTensor):
            present = tf.reshape(present, [-1])
            tensor = tf.RaggedTensor.from_row_lengths(
                tf.boolean_mask(tf.reshape(tensor, [-1]), present),
                tf.cast(present, tf.int64),
                validate=False,
            )
        out[name] = tensor
    return out


def _fingerprints(tensor):
    if isinstance(tensor, tf.SparseTensor):
        return tf.SparseTensor(
            tensor.indices, fingerprint_strings(tensor.values), tensor.dense_shape
        )
    return fingerprint_strings(tensor)


def input_form(name: str, schema: schema_pb2.Schema, spec: dict) -> InputForm:
    if name not in INPUT_FORMS:
        raise ValueError(f"input_form must be one of {', '.join(INPUT_FORMS)}, not {name!r}")
    strings = frozenset(n for n, entry in spec.items() if entry.dtype == tf.string)
    dense = nullable_scalars(schema, spec)
    clashes = sorted(n for n in dense if present_key(n) in spec)
    if name == INTEGERS and clashes:
        raise ValueError(
            f"feature {clashes[0]!r}: the integer form's {present_key(clashes[0])!r} is also a "
            "feature of the schema; read it with input_form='exact'"
        )
    return InputForm(name, strings, dense)
