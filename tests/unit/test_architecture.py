"""The package's layers import downward only, and the core below the components has no TFX.

demo → source → coders → statistics → runners → conversion → schemas → training → components →
pipelines → cli: a module may import its own layer and the layers before it, never a later one
(imports inside functions count too).
"""

import ast
import pathlib
import subprocess
import sys

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "tfx_tabular"
LAYERS = [
    "demo",
    "source",
    "coders",
    "statistics",
    "runners",
    "conversion",
    "schemas",
    "training",
    "components",
    "pipelines",
    "cli",
]
CORE = set(LAYERS[: LAYERS.index("components")])


def _layer(module: str):
    parts = module.split(".")
    if parts[0] != "tfx_tabular" or len(parts) == 1:
        return None
    return LAYERS.index(parts[1]) if parts[1] in LAYERS else None


def _imports(path: pathlib.Path, module: str) -> list[str]:
    names = []
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1]
                    + ([base] if base else [])
                )
            # `from tfx_tabular.coders import wire` names the module tfx_tabular.coders.wire.
            package_import = (
                base == "tfx_tabular" or base.startswith("tfx_tabular.") and (base.count(".") == 1)
            )
            names += [f"{base}.{a.name}" for a in node.names] if package_import else [base]
    return names


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = list(relative.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        yield path, ".".join(parts)


def test_every_module_belongs_to_a_layer():
    loose = [m for _, m in _modules() if m != "tfx_tabular" and _layer(m) is None]
    assert not loose, f"modules outside the layers {LAYERS}: {loose}"


def _upward_imports(place) -> list[str]:
    """The imports of a module placed below what it imports: `place` gives a module's (group,
    position), None where it has none; positions compare within a group."""
    upward = []
    for path, module in _modules():
        own = place(module)
        if own is None:
            continue
        for name in _imports(path, module):
            target = place(name)
            if target is not None and target[0] == own[0] and target[1] > own[1]:
                upward.append(f"{module} imports {name}")
    return upward


def _layer_place(module: str):
    layer = _layer(module)
    return None if layer is None else ("layers", layer)


def test_layers_import_downward_only():
    upward = _upward_imports(_layer_place)
    assert not upward, f"imports from a layer to a later one ({LAYERS}):\n" + "\n".join(upward)


def test_core_has_no_tfx_imports():
    found = [
        f"{module} imports {name}"
        for path, module in _modules()
        if module.split(".")[1:2] and module.split(".")[1] in CORE
        for name in _imports(path, module)
        if name == "tfx" or name.startswith("tfx.")
    ]
    assert not found, "\n".join(found)


def test_the_checker_sees_an_upward_import(tmp_path):
    """The test above can fail: a source module importing a component is reported."""
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from tfx_tabular.components import spec\n")
    assert _layer(_imports(bad, "tfx_tabular.source.bad")[0]) > _layer("tfx_tabular.source.bad")


# The public entry points keep their keyword options, mirroring their component's spec; the
# layers below take one config object per stage. Compiled kernels take flat arrays by design.
PUBLIC_ENTRY_POINTS = {
    "tfx_tabular.components.parquet_example_gen.component:__init__",
    "tfx_tabular.components.tabular_trainer.component:__init__",
    "tfx_tabular.training.input_fn:input_fn",
    "tfx_tabular.pipelines.pipeline:create_pipeline",
    # ParquetSchemaGen's keywords, as infer-schema and the executor hand them on
    "tfx_tabular.schemas.source:schema_of",
}
MAX_PARAMETERS = 10


def _is_compiled(node) -> bool:
    return any("njit" in ast.unparse(d) or "numba" in ast.unparse(d) for d in node.decorator_list)


def _parameter_count(node) -> int:
    args = node.args
    names = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
    return len([n for n in names if n not in ("self", "cls")])


def test_internal_functions_take_a_config_not_long_parameter_lists():
    long = []
    for path, module in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            name = f"{module}:{node.name}"
            if name in PUBLIC_ENTRY_POINTS or _is_compiled(node):
                continue
            if _parameter_count(node) > MAX_PARAMETERS:
                long.append(f"{name} takes {_parameter_count(node)} parameters")
    assert not long, "\n".join(long)


def test_the_parameter_check_sees_a_long_list():
    tree = ast.parse("def f(a, b, c, d, e, f, g, h, i, j, *, k):\n    pass\n")
    assert _parameter_count(tree.body[0]) == MAX_PARAMETERS + 1


@pytest.mark.parametrize(
    "code",
    [
        "import tfx_tabular",
        "import tfx_tabular.schemas, tfx_tabular.components, tfx_tabular.pipelines",
        "from tfx_tabular.training.input_fn import input_fn",
    ],
)
def test_light_imports_load_no_tfx(code):
    probe = (
        f"{code}\nimport sys\n"
        "print(sorted(m for m in sys.modules if m == 'tfx' or m.startswith('tfx.')))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_no_tests_ship_in_the_package():
    """Tests live in tests/ only: nothing test-like is installed into the wheel or the image."""
    shipped = [
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*.py")
        if p.name.startswith("test_") or p.name.endswith("_test.py") or p.name == "conftest.py"
    ]
    assert not shipped


def test_the_suite_keeps_temporary_files_under_pytests_folder(tmp_path_factory):
    """TFX's Beam executors leave a 49 MB package in the temporary folder at every run (see the
    `session_tempdir` fixture): the suite's processes, and their children, write it there."""
    base = tmp_path_factory.getbasetemp()
    probe = "import tempfile; print(tempfile.mkdtemp())"
    child = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    )
    assert pathlib.Path(child.stdout.strip()).is_relative_to(base)


# Packages split by concern: a module may import the modules listed before it in its package,
# never one after it, so the general pieces (errors, wire format, options) stay at the bottom.
MODULE_ORDER = {
    "source": [
        "errors",
        "mapping",
        "footer",
        "tables",
        "filesystems",
        "listing",
        "files",
        "dataset",
        "column_reads",
        "reading",
    ],
    "coders": [
        "intrinsics",
        "fingerprint",
        "wire",
        "tfrecord",
        "flatten",
        "pools",
        "encoding",
        "columnar",
    ],
    "statistics": [
        "options",
        "sketches",
        "quantiles",
        "histograms",
        "numeric",
        "strings",
        "batch_values",
        "accumulators",
        "parts",
        "render",
        "precompile",
    ],
    "conversion": [
        "source_metadata",
        "columns",
        "plan",
        "staging",
        "transform",
        "publish",
        "convert",
        "peek",
    ],
}


def _order_of(module: str):
    """(package, position) of a module of MODULE_ORDER's packages; None for any other."""
    parts = module.split(".")
    if len(parts) < 3 or parts[0] != "tfx_tabular" or parts[1] not in MODULE_ORDER:
        return None
    order = MODULE_ORDER[parts[1]]
    return (parts[1], order.index(parts[2])) if parts[2] in order else None


def test_every_module_of_a_split_package_has_its_place():
    for package, order in MODULE_ORDER.items():
        present = {p.stem for p in (PACKAGE / package).glob("*.py") if p.stem != "__init__"}
        assert present == set(order), package


def test_modules_of_a_split_package_import_in_its_order():
    upward = _upward_imports(_order_of)
    assert not upward, "\n".join(upward)


def test_the_order_check_sees_an_upward_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from tfx_tabular.coders import columnar\n")
    (name,) = _imports(bad, "tfx_tabular.coders.wire")
    assert _order_of(name)[1] > _order_of("tfx_tabular.coders.wire")[1]


PACKAGES = sorted(
    ".".join(path.parent.relative_to(PACKAGE.parent).parts) for path in PACKAGE.rglob("__init__.py")
)


@pytest.mark.parametrize("package", PACKAGES)
def test_packages_say_what_they_own_and_export(package):
    import importlib

    module = importlib.import_module(package)
    assert module.__doc__ and module.__doc__.strip()
    for name in module.__all__:
        if not hasattr(module, name):
            importlib.import_module(f"{package}.{name}")
        assert hasattr(module, name), f"{package} exports {name!r}, which it lacks"
