"""Running long work: the pre-flight check of a portable Beam runner's external SDK workers
(`workers`), a local SDK worker pool that runs this Python (`worker_pool`), what Ctrl-C/SIGTERM
may and may not stop (`interrupts`), progress shown to people (`progress`) and glibc told to
keep the freed batch buffers of a conversion or a trainer's input (`allocator`).
"""

__all__ = [
    "allocator",
    "interrupts",
    "progress",
    "worker_pool",
    "workers",
]
