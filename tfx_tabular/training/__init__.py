"""Training: the tf.data `input_fn`, the reference model, categorical ids from strings or their
fingerprints (`categorical`), and the distributed training loop.

No TFX imports: the TabularTrainer component (`tfx_tabular.components`) is a thin shell over
`loop.train`.
"""

__all__ = [
    "categorical",
    "columnar",
    "config",
    "export",
    "input_fn",
    "loop",
    "model",
    "strategy",
    "task",
]
