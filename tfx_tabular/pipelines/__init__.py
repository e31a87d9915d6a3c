"""Pipelines: `create_pipeline` (imported lazily: `import tfx_tabular.pipelines` loads no TFX)."""

__all__ = ["create_pipeline"]


def create_pipeline(*args, **kwargs):
    """See `tfx_tabular.pipelines.pipeline.create_pipeline`."""
    from tfx_tabular.pipelines.pipeline import create_pipeline as _create_pipeline

    return _create_pipeline(*args, **kwargs)
