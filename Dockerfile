# Runtime image for tfx-tabular pipelines (TFX 1.16 on Kubeflow Pipelines / Vertex AI).
#
#   docker build -t tfx-tabular .                  # CPU
#   docker build --build-arg GPU=1 -t tfx-tabular-gpu .   # + TensorFlow's CUDA wheels
#
# Dependencies come from uv.lock through scripts/setup.sh, the same script `make setup` runs,
# so the image holds exactly the locked set (minus the dev group).
#
# One image, two uses:
# - a KFP / Vertex task image: pipelines compiled by TFX's Kubeflow V2 runner set the container
#   command to `python -m tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor ...`,
#   which replaces the ENTRYPOINT below; `python` on PATH is the venv's python;
# - a Dataflow (or Flink / Spark portable runner) custom SDK container
#   (`--sdk_container_image=<this image>`): Beam's boot program, copied from the Beam SDK image of
#   the locked apache-beam version, is the ENTRYPOINT; it starts the SDK worker with `python` from
#   PATH, i.e. the venv's, which holds apache-beam and tfx_tabular.

# Beam's SDK container boot program; its version must stay the apache-beam version in uv.lock
# (tests/integration/test_dockerfile.py checks it).
FROM apache/beam_python3.10_sdk:2.61.0 AS beam_sdk

# Bookworm has glibc 2.36, the same platform uv.lock was resolved for (linux x86_64, CPython 3.10).
# TODO: pin by digest as well (python:3.10-slim-bookworm@sha256:...) when it can be fetched.
FROM python:3.10-slim-bookworm

ARG SOURCE_URL=unknown
LABEL org.opencontainers.image.title="tfx-tabular" \
      org.opencontainers.image.description="TFX / Kubeflow components for training TensorFlow models on partitioned Parquet data larger than memory." \
      org.opencontainers.image.source="${SOURCE_URL}" \
      org.opencontainers.image.licenses="Apache-2.0"

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

WORKDIR /opt/tfx-tabular

# Build-time settings for setup.sh (ARG, not ENV: they stay out of the final image's environment).
ARG PYTHON=/usr/local/bin/python3.10
ARG UV_PROJECT_ENVIRONMENT=/opt/tfx-tabular/.venv
# The uv cache is deleted in the same RUN that fills it, so no layer carries it.
ARG UV_CACHE_DIR=/tmp/uv-cache
ARG UV_PYTHON_DOWNLOADS=never
ARG PIP_NO_CACHE_DIR=1
ARG PIP_ROOT_USER_ACTION=ignore
# 1 adds the `gpu` extra (tensorflow[and-cuda]); 0 is CPU only.
ARG GPU=0

# Layer 1: the locked third-party dependencies; rebuilt only when the lock or setup.sh changes.
COPY pyproject.toml uv.lock README.md ./
COPY scripts/ scripts/
RUN set -- --no-dev --no-install-project; \
    case "$GPU" in 0) ;; 1) set -- "$@" --extra gpu ;; *) echo "GPU must be 0 or 1" >&2; exit 1 ;; esac; \
    scripts/setup.sh "$@" \
    && rm -rf "$UV_CACHE_DIR"

# Layer 2: the package itself, installed non-editable (a wheel in site-packages).
COPY tfx_tabular/ tfx_tabular/
RUN set -- --no-dev --no-editable; \
    case "$GPU" in 0) ;; 1) set -- "$@" --extra gpu ;; *) echo "GPU must be 0 or 1" >&2; exit 1 ;; esac; \
    scripts/setup.sh "$@" \
    && rm -rf "$UV_CACHE_DIR" build tfx_tabular.egg-info

COPY --from=beam_sdk /opt/apache/beam /opt/apache/beam

# The numba cache folder: numba uses a cache folder only if it can write there, so it belongs
# to the tasks' user, and group 0 may write too (platforms that run images under another uid put
# it in group 0).
RUN useradd --no-log-init --uid 1000 --user-group --create-home --home-dir /home/tfx \
        --shell /bin/bash tfx \
    && install -d -o 1000 -g 0 -m 2775 /opt/tfx-tabular/numba-cache

# TF_USE_LEGACY_KERAS: TFX 1.16, TFT and TFMA are Keras 2 code, so `tf.keras` must be Keras 2
# in every process of every task, user modules included.
# RUN_PYTHON_SDK_IN_DEFAULT_ENVIRONMENT: without it Beam's boot creates a new virtualenv from the
# base interpreter for each worker, which would not see this venv's packages (and /opt is not
# writable by the non-root user).
# NUMBA_*: the conversion's kernels, compiled below into this cache for a portable CPU target
# (x86-64-v2: tfx_tabular.statistics.precompile.PORTABLE_TARGET, which a test keeps equal). numba
# keys cached code by CPU name and features, so every task must run with these same values to
# load the kernels instead of compiling them again.
ENV PATH=/opt/tfx-tabular/.venv/bin:$PATH \
    VIRTUAL_ENV=/opt/tfx-tabular/.venv \
    TF_USE_LEGACY_KERAS=1 \
    RUN_PYTHON_SDK_IN_DEFAULT_ENVIRONMENT=1 \
    HOME=/home/tfx \
    NUMBA_CACHE_DIR=/opt/tfx-tabular/numba-cache \
    NUMBA_CPU_NAME=generic \
    NUMBA_CPU_FEATURES=+64bit,+cmov,+cx8,+fxsr,+mmx,+sse,+sse2,+sse3,+ssse3,+sse4.1,+sse4.2,+crc32,+popcnt,+cx16,+sahf

USER 1000:1000
# Compiled once here, as the tasks' user, so no task compiles them (umask: group 0 may add to it).
RUN umask 0002 && python -m tfx_tabular.statistics.precompile
# A writable working directory for the non-root user (the venv under /opt stays root-owned).
WORKDIR /home/tfx

ENTRYPOINT ["/opt/apache/beam/boot"]
