"""tfx-tabular: train TensorFlow models on partitioned Parquet larger than memory, in TFX."""
__version__ = "0.1.0"
