"""load_native: how a public stub stands for its real module in _native/, in process."""

from __future__ import annotations

import logging
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest
from jax_rocm7_build.extension_modules import public_stub_source

from jax_rocm7_plugin._loader import extensions
from jax_rocm7_plugin._names import EXTENSION_CAPABILITIES, EXTENSION_MODULES
from tests.support.native import compile_shared

# A real CPython extension module named _solver (a test fixture in the shape jaxlib's has: PyInit__solver).
MODULE_SOURCE = """
#include <Python.h>
static struct PyModuleDef definition = { PyModuleDef_HEAD_INIT, "_solver", "test fixture", -1, NULL };
PyMODINIT_FUNC PyInit__solver(void) {
  PyObject* module = PyModule_Create(&definition);
  if (module) PyModule_AddIntConstant(module, "ANSWER", 42);
  return module;
}
"""


@pytest.fixture
def native(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    directory = tmp_path / "_native"
    directory.mkdir()
    monkeypatch.setattr("jax_rocm7_plugin._machine.native_modules.native_path", lambda m: directory / f"{m}.so")
    monkeypatch.setattr(extensions, "machine_can_use_gpu", lambda: True)
    monkeypatch.setattr("jax_rocm7_plugin._machine.jaxlib_version.jaxlib_version", lambda: None)
    monkeypatch.setattr(extensions, "_reported", set())
    sys.modules.pop("jax_rocm7_plugin._solver", None)
    yield directory
    # The test fixture module must not outlive the test: jaxlib imports this name when jax is imported.
    sys.modules.pop("jax_rocm7_plugin._solver", None)


def test_the_real_module_is_loaded_under_the_public_name(native: Path) -> None:
    include = sysconfig.get_paths()["include"]
    compile_shared(native, "solver", MODULE_SOURCE, flags=[f"-I{include}"], output_name="_solver.so")
    module = extensions.load_native("jax_rocm7_plugin._solver")
    assert module.ANSWER == 42 and module.__name__ == "jax_rocm7_plugin._solver"
    assert sys.modules["jax_rocm7_plugin._solver"] is module


def test_without_a_gpu_nothing_is_opened(native: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(extensions, "machine_can_use_gpu", lambda: False)
    (native / "_solver.so").write_bytes(b"not even ELF: it must not be opened")
    with pytest.raises(ImportError, match="no usable AMD GPU on this machine"):
        extensions.load_native("jax_rocm7_plugin._solver")


def test_modules_of_another_jaxlib_are_refused_before_use(native: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from jax_rocm7_plugin.version import JAX_RELEASE

    monkeypatch.setattr("jax_rocm7_plugin._machine.jaxlib_version.jaxlib_version", lambda: "0.11.2")
    (native / "_solver.so").write_bytes(b"not even ELF: it must not be opened")
    with pytest.raises(ImportError, match=f"built for jaxlib {JAX_RELEASE}, but jaxlib 0.11.2 is installed"):
        extensions.load_native("jax_rocm7_plugin._solver")


def test_a_missing_rocm_library_is_named_with_what_it_costs(
    native: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    gone = compile_shared(tmp_path / "gone", "gone", "int gone(void) { return 1; }\n", output_name="libgone.so.1")
    compile_shared(
        native,
        "solver",
        "int gone(void);\nint PyInit__solver(void) { return gone(); }\n",
        libs=[":libgone.so.1"],
        link_dirs=[gone.parent],
        output_name="_solver.so",
    )
    gone.unlink()
    with caplog.at_level(logging.DEBUG, logger="jax_rocm7_plugin"), pytest.raises(ImportError) as raised:
        extensions.load_native("jax_rocm7_plugin._solver")
    assert str(raised.value) == "GPU linear algebra unavailable: libgone.so.1 not found"
    assert [r.getMessage() for r in caplog.records] == ["GPU linear algebra unavailable: libgone.so.1 not found"]


def test_every_public_stub_loads_its_module() -> None:
    for module in EXTENSION_MODULES:
        source = public_stub_source(module)
        compile(source, f"{module}.py", "exec")
        assert "from jax_rocm7_plugin._loader.extensions import load_native" in source
        assert source.rstrip().endswith("load_native(__name__)") and EXTENSION_CAPABILITIES[module] in source
