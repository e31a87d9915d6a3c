"""The training stage's settings in one frozen object: what `loop.train` needs besides the data it
reads and the folders it writes.

The TabularTrainer executor builds it from its resolved parameters with `from_parameters`, keyed by
the spec's names. The spec stays the one place for parameter names and defaults: a field named
like a spec parameter that has a default has none here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Callable, Optional

if TYPE_CHECKING:  # no TensorFlow import: the components read this module's names cheaply
    import tensorflow as tf
    import tf_keras as keras

# The input forms (`forms`): parse_example's tensors, or integers only.
EXACT, INTEGERS = "exact", "integers"
INPUT_FORMS = (EXACT, INTEGERS)
# model_fn(schema, label, [task, hyperparameters, custom_config]) → a Keras 2 model
ModelFn = Callable[..., "keras.Model"]


@dataclasses.dataclass(frozen=True)
class TrainingConfig:
    """`epochs` of `steps_per_epoch` global batches of `batch_size` (or `train_steps` steps in
    all), then `eval_steps` eval batches (None: the whole eval split once).

    `task` (binary, multiclass, regression; None: inferred from the label, see `task.py`) picks
    the head, loss and metrics unless `model_fn` compiles its model; `model_fn` (None: the
    reference model) also gets those of `model_arguments` (`hyperparameters`, `custom_config`)
    and `task` it declares. `strategy` None: `strategy.choose_strategy()`.
    """

    batch_size: int  # global: it must divide evenly over the replicas
    steps_per_epoch: int
    epochs: int
    learning_rate: float  # Adam's, unless model_fn compiles its model
    mixed_precision: bool
    train_steps: Optional[int] = None  # overrides epochs
    eval_steps: Optional[int] = None
    label: Optional[str] = None  # None: the schema's label annotation
    task: Optional[str] = None
    model_fn: Optional[ModelFn] = None
    model_arguments: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    cache: Optional[str] = None  # input_fn's: "memory" or a file path prefix
    # input_fn's: a tf.data service dispatcher's HOST:PORT whose workers read the train split.
    data_service: Optional[str] = None
    # input_fn's: read the Examples' columnar batches when they have them (False: per row).
    columnar_batches: bool = True
    # input_fn's; None: integers for the reference model where the columnar reader takes the
    # spec, else exact (model_fn, a Transform graph, a spec read per row for its width).
    input_form: Optional[str] = None
    seed: int = 0
    strategy: Optional[tf.distribute.Strategy] = None
    checkpoint_every: int = 200  # steps; every epoch ends with one too

    def __post_init__(self):
        # The spec's `model_fn` is an import path: the caller loads it (from_parameters would
        # otherwise pass the text through).
        if self.model_fn is not None and not callable(self.model_fn):
            raise TypeError(f"model_fn must be a function, not {self.model_fn!r}")

    def input_form_for(self, transform_output, columnar_width: bool = True) -> str:
        """The input form the model gets: `input_form`, or its default. `columnar_width`: the
        spec has no more features than the columnar reader takes (a wider one is read per row,
        where turning the parse into integers only adds work, much of it at thousands of
        features)."""
        if self.input_form is not None:
            return self.input_form
        reference = self.model_fn is None and transform_output is None
        return INTEGERS if reference and columnar_width else EXACT

    @property
    def total_steps(self) -> int:
        return self.train_steps or self.steps_per_epoch * self.epochs

    @classmethod
    def from_parameters(cls, parameters: Mapping[str, Any], **derived: Any) -> TrainingConfig:
        """From a component's resolved parameters, each one named like a field (an empty string
        is unset; ints become bools where the field is one), and `derived`, what the caller makes
        of parameters and artifacts (steps, the loaded model_fn, the strategy), which wins."""
        fields = {f.name: f for f in dataclasses.fields(cls)}
        values = {}
        for name, value in parameters.items():
            if name not in fields or name in derived:
                continue
            if value == "":
                value = None
            elif fields[name].type == "bool":  # TFX declares flags as int parameters
                value = bool(value)
            values[name] = value
        return cls(**values, **derived)
