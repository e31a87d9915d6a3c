"""The pinned environments the writers' tests and the bench's peer loaders share
(benchmarks/venvs.py): keyed by the requirements' hash, reused once ready, refused without uv."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from benchmarks import venvs


def test_the_key_follows_the_requirements_content(tmp_path):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("x==1 --hash=sha256:00\n")
    b.write_text("x==1 --hash=sha256:00\n")
    assert venvs.key(a) == venvs.key(b)
    b.write_text("x==2 --hash=sha256:00\n")
    assert venvs.key(a) != venvs.key(b)


def test_a_ready_environment_is_reused_without_uv(tmp_path, monkeypatch):
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("# nothing\n")
    ready = tmp_path / "venvs" / venvs.key(requirements)
    ready.mkdir(parents=True)
    (ready / ".ready").write_text("")
    monkeypatch.setattr(venvs, "UV", tmp_path / "no-uv")
    python = venvs.pinned_python(requirements, tmp_path / "venvs", "python3.10")
    assert Path(python) == ready / "bin" / "python"


def test_a_missing_environment_without_uv_is_an_error_not_a_crash(tmp_path, monkeypatch):
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("# nothing\n")
    monkeypatch.setattr(venvs, "UV", tmp_path / "no-uv")
    with pytest.raises(venvs.VenvError, match="make setup"):
        venvs.pinned_python(requirements, tmp_path / "venvs", "python3.10")


def test_a_failed_install_says_why_and_is_not_marked_ready(tmp_path):
    """Uv refuses a requirement without a hash under --require-hashes: the error carries the
    log's tail, and the next call tries again rather than reusing a half-made environment."""
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("six==1.16.0\n")
    with pytest.raises(venvs.VenvError, match="hash"):
        venvs.pinned_python(requirements, tmp_path / "venvs", sys.executable)
    assert not (tmp_path / "venvs" / venvs.key(requirements) / ".ready").exists()
