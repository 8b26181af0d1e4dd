"""The package's shape: its public API (documented in docs/api.md, whose examples run here) and its layers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import dr_scale

ROOT = Path(__file__).resolve().parents[1]
API_DOC = ROOT / "docs" / "api.md"


def test_every_public_name_is_importable_and_documented():
    text = API_DOC.read_text()
    assert len(set(dr_scale.__all__)) == len(dr_scale.__all__)
    for name in dr_scale.__all__:
        assert getattr(dr_scale, name) is not None
        assert re.search(rf"`{name}\b", text), f"{name} is in dr_scale.__all__ but not in docs/api.md"


def test_every_relative_link_in_the_docs_points_at_a_file():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = [f"{page.relative_to(ROOT)} → {target}"
              for page in pages
              for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text())
              if "://" not in target and not (page.parent / target).exists()]
    assert not broken, f"links to missing files: {broken}"


@pytest.mark.slow
def test_the_package_imports_its_api_on_first_use():
    """``import dr_scale.<module>`` loads that module's imports only (a command's start, a Dask worker unpickling a
    task); the public names still import, each from its module."""
    import subprocess
    import sys

    heavy = ("pandas", "scipy.special", "matplotlib", "dr_scale.ope.estimators")
    code = ("import sys, dr_scale.cli, dr_scale.outofcore.passes; "
            f"print(sorted(m for m in {heavy!r} if m in sys.modules)); "
            "from dr_scale import DoublyRobust, learn_policy; print(DoublyRobust.__module__, learn_policy.__module__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == "[]"
    assert out[1] == "dr_scale.ope.estimators.dr dr_scale.learning.learn"
    assert set(dr_scale.__all__) <= set(dir(dr_scale))  # dir() lists the names not imported yet


def _numpydoc(obj):
    """numpydoc's parse of ``obj``'s docstring, its warnings (a bad section, a wrong underline) made errors."""
    import inspect
    import warnings

    from numpydoc.docscrape import ClassDoc, FunctionDoc

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        if inspect.isclass(obj):
            return ClassDoc(obj, config={"show_class_members": False})
        return FunctionDoc(obj)


def _signature_parameters(obj) -> list[str]:
    """The parameters a caller passes: a function's, a class's constructor's (without ``self``; ``**kwargs`` is
    ``kwargs``, documented as numpydoc writes it, ``**kwargs``)."""
    import inspect

    return list(inspect.signature(obj).parameters)


def test_every_public_name_has_numpydoc_sections():
    """A summary, Examples, Parameters naming every parameter with its type (a class: its constructor's; a Protocol
    has none), and Returns for a function. The examples themselves run as doctests (pytest --doctest-modules)."""
    import inspect

    faults = []
    for name in dr_scale.__all__:
        obj = getattr(dr_scale, name)
        doc = _numpydoc(obj)
        if not "".join(doc["Summary"]).strip():
            faults.append(f"{name}: no summary line")
        if not "".join(doc["Examples"]).strip() or ">>>" not in "\n".join(doc["Examples"]):
            faults.append(f"{name}: no Examples section with an example")
        if not (inspect.isclass(obj) and getattr(obj, "_is_protocol", False)):
            documented = {part.strip().lstrip("*"): p.type for p in doc["Parameters"] for part in p.name.split(",")}
            expected = _signature_parameters(obj)
            if set(documented) != set(expected):
                faults.append(f"{name}: Parameters documents {sorted(documented)}, the signature has {expected}")
            faults += [f"{name}: parameter {p!r} has no type" for p, kind in documented.items() if not kind.strip()]
        if inspect.isfunction(obj) and not doc["Returns"]:
            faults.append(f"{name}: no Returns section")
    assert not faults, "\n".join(faults)


def test_the_classes_the_public_functions_return_are_public():
    """A user meets the classes in the return annotations of the public functions (``import_log`` → ``ImportSummary``):
    each class of dr_scale among them is in ``dr_scale.__all__``."""
    import inspect

    def returned(function):
        """The classes the return annotation names that the function's module holds at run time (a type imported
        for type checking only, such as a Dask DataFrame, is not dr_scale's)."""
        hint = str(inspect.get_annotations(function).get("return"))
        names = {word.split(".")[0] for word in re.findall(r"[A-Za-z_][\w.]*", hint)}
        return [function.__globals__[n] for n in names if inspect.isclass(function.__globals__.get(n))]

    hidden = {f"{name} → {cls.__module__}.{cls.__qualname__}"
              for name in dr_scale.__all__ if inspect.isfunction(obj := getattr(dr_scale, name))
              for cls in returned(obj)
              if cls.__module__.startswith("dr_scale.") and cls.__name__ not in dr_scale.__all__}
    assert not hidden, sorted(hidden)


def _undocumented_functions(path: Path) -> list[str]:
    """Every ``def`` in the module whose name has no leading underscore — functions, methods, the functions nested
    in them — without a docstring, as ``LINE QUALIFIED.NAME``."""
    import ast

    found: list[str] = []

    def visit(body, where: str) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if not isinstance(node, ast.ClassDef) and not node.name.startswith("_") \
                        and ast.get_docstring(node) is None:
                    found.append(f"{node.lineno} {where}{node.name}")
                visit(node.body, f"{where}{node.name}.")
            else:
                for block in ("body", "orelse", "finalbody"):
                    visit(getattr(node, block, []), where)
                for handler in getattr(node, "handlers", []):
                    visit(handler.body, where)

    visit(ast.parse(path.read_text()).body, "")
    return found


@pytest.mark.slow
def test_every_public_function_has_a_docstring():
    """Every public function of the package (the issue's count: ``def``s without a leading underscore, at any depth)
    has a docstring; and the names of ``dr_scale.__all__`` and their public methods have one wherever they live."""
    import inspect

    faults = [f"{path.relative_to(ROOT)}:{where}" for path in sorted((ROOT / "dr_scale").rglob("*.py"))
              for where in _undocumented_functions(path)]
    for name in dr_scale.__all__:
        obj = getattr(dr_scale, name)
        members = [(name, obj)] + [(f"{name}.{attr}", getattr(obj, attr)) for attr in dir(obj)
                                   if inspect.isclass(obj) and not attr.startswith("_")]
        for label, member in members:
            member = getattr(member, "fget", member)
            module = getattr(inspect.unwrap(member) if callable(member) else member, "__module__", None) or ""
            if (inspect.isclass(member) or inspect.isroutine(member)) and module.startswith("dr_scale") \
                    and not inspect.getdoc(member):
                faults.append(f"dr_scale.{label}")
    assert not faults, "no docstring:\n" + "\n".join(faults)
