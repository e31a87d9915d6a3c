"""Running long work: the pre-flight check of a portable Beam runner's external SDK workers
(`workers`), a local SDK worker pool that runs this Python (`worker_pool`), what Ctrl-C/SIGTERM
may and may not stop (`interrupts`) and progress shown to people (`progress`).
"""

__all__ = [
    "interrupts",
    "progress",
    "worker_pool",
    "workers",
]
