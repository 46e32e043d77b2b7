"""The type hints (sluice/_native.pyi) name every method the native classes have, and no
other, and every method has a docstring."""

import ast
import pathlib

import pytest

import sluice

STUB = pathlib.Path(sluice.__file__).with_name("_native.pyi")


def stub_classes():
    """Each class of the stub and the names of its methods."""
    tree = ast.parse(STUB.read_text())
    return {
        node.name: {f.name for f in node.body if isinstance(f, ast.FunctionDef)}
        for node in tree.body
        if isinstance(node, ast.ClassDef)
    }


@pytest.mark.parametrize("name", sorted(set(sluice.__all__) & set(stub_classes())))
def test_the_stub_names_the_methods_of_each_class(name):
    native = getattr(sluice, name)
    methods = {m for m in vars(native) if not m.startswith("_") and callable(getattr(native, m))}
    hinted = {m for m in stub_classes()[name] if not m.startswith("_")}
    assert hinted == methods
    for method in methods:
        assert getattr(native, method).__doc__, f"{name}.{method} has no docstring"
