"""The conversion's Fingerprint64 equals a FarmHash binding's (the `cityhash` package's
`farmhash.Fingerprint64`, run in the writers' environment: its module name clashes with the
pyfarmhash TFDV pins here) on every length range FarmHash branches on, text and NUL bytes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa

from tfx_tabular.coders.fingerprint import fingerprints

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "writers"))
from environment import writers_python  # noqa: E402

BINDING = """
import json, sys
from farmhash import Fingerprint64
values = [bytes.fromhex(v) for v in json.load(sys.stdin)]
print(json.dumps([str(Fingerprint64(v)) for v in values]))
"""


def test_equal_to_farmhash_binding():
    rng = np.random.default_rng(48)
    values = [bytes(rng.integers(0, 256, n, dtype=np.uint8)) for n in range(300) for _ in range(3)]
    values += ["été".encode(), b"a\x00b", b"\x00" * 100, b""]
    done = subprocess.run(
        [writers_python(), "-c", BINDING],
        input=json.dumps([v.hex() for v in values]),
        capture_output=True,
        text=True,
        check=True,
    )
    theirs = np.array([int(v) for v in json.loads(done.stdout)], np.uint64)
    np.testing.assert_array_equal(fingerprints(pa.array(values, pa.binary())), theirs)
