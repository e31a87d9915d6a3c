"""Devices and `tf.distribute` strategies: GPU memory, the strategy for this cluster, the chief."""

from __future__ import annotations

import json
import os
from typing import Optional

import tensorflow as tf


def configure_gpus(memory_growth: bool = True, memory_limit_mb: Optional[int] = None) -> int:
    """GPU memory growth, or a per-GPU cap (like NVTabular's TF_MEMORY_ALLOCATION). Returns the
    GPU count. Must run before TensorFlow touches a GPU."""
    gpus = tf.config.list_physical_devices("GPU")
    for gpu in gpus:
        if memory_limit_mb:
            tf.config.set_logical_device_configuration(
                gpu, [tf.config.LogicalDeviceConfiguration(memory_limit=memory_limit_mb)]
            )
        elif memory_growth:
            tf.config.experimental.set_memory_growth(gpu, True)
    return len(gpus)


def choose_strategy(kind: str = "auto") -> tf.distribute.Strategy:
    """`auto`: MultiWorkerMirroredStrategy when TF_CONFIG names several workers, MirroredStrategy
    over several local GPUs, one GPU, else the CPU. `mirrored` / `multi_worker` / `default` force."""
    cluster = json.loads(os.environ.get("TF_CONFIG", "{}")).get("cluster", {})
    workers = len(cluster.get("worker", [])) + len(cluster.get("chief", []))
    if kind == "multi_worker" or (kind == "auto" and workers > 1):
        # Before anything lists logical devices: collectives must be configured at start-up.
        return tf.distribute.MultiWorkerMirroredStrategy()
    gpus = tf.config.list_logical_devices("GPU")
    if kind == "mirrored" or (kind == "auto" and len(gpus) > 1):
        devices = [d.name for d in gpus] or [d.name for d in tf.config.list_logical_devices("CPU")]
        return tf.distribute.MirroredStrategy(devices)
    if kind == "auto" and len(gpus) == 1:
        return tf.distribute.OneDeviceStrategy(gpus[0].name)
    if kind not in ("auto", "default"):
        raise ValueError(f"unknown distribution {kind!r}")
    return tf.distribute.get_strategy()


def strategy_name(strategy: tf.distribute.Strategy) -> str:
    """The public name (TF's MultiWorkerMirroredStrategy class is CollectiveAllReduceStrategy)."""
    for cls, name in (
        (tf.distribute.MultiWorkerMirroredStrategy, "MultiWorkerMirroredStrategy"),
        (tf.distribute.MirroredStrategy, "MirroredStrategy"),
        (tf.distribute.OneDeviceStrategy, "OneDeviceStrategy"),
    ):
        if isinstance(strategy, cls):
            return name
    return "the default strategy"


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True
    return resolver.task_type == "chief" or (
        resolver.task_type == "worker"
        and resolver.task_id == 0
        and "chief" not in resolver.cluster_spec().as_dict()
    )
