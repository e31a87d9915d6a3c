"""Training: the tf.data `input_fn`, the reference model, and the distributed training loop.

No TFX imports: the TabularTrainer component (`tfx_tabular.components`) is a thin shell over
`loop.train`.
"""

__all__ = [
    "columnar",
    "config",
    "export",
    "input_fn",
    "loop",
    "model",
    "strategy",
    "task",
]
