"""Child-process entry point: `python -m benchmarks.worker MODULE:FUNCTION PARAMS_JSON RESULT_PATH`.

Runs `benchmarks.MODULE.FUNCTION(**params)` in this fresh interpreter and writes its (JSON) result
to RESULT_PATH. The function times its own measured region, so interpreter start-up and imports
are outside it; `harness.run_task` also records the child's whole wall time.
"""

from __future__ import annotations

import importlib
import json
import logging
import sys
import warnings


def main(argv: list[str]) -> int:
    target, params, result_path = argv
    module_name, function_name = target.split(":")
    warnings.filterwarnings("ignore")
    logging.basicConfig(level=logging.WARNING)
    for name in ("apache_beam", "absl", "tensorflow", "google", "tfx", "numba"):
        logging.getLogger(name).setLevel(logging.ERROR)
    function = getattr(importlib.import_module(f"benchmarks.{module_name}"), function_name)
    result = function(**json.loads(params))
    with open(result_path, "w") as handle:
        json.dump(result, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
