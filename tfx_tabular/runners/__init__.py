"""Beam runner support: the pre-flight check of a portable runner's external SDK workers
(`workers`) and a local SDK worker pool that runs this Python (`worker_pool`).
"""
