"""The package's shape: its public API (documented in docs/api.md, whose examples run here) and its layers."""

from __future__ import annotations

import re
from pathlib import Path

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
    assert out[1] == "dr_scale.ope.estimators dr_scale.learning.learn"
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
    import typing

    def classes(hint):
        yield hint
        for arg in typing.get_args(hint):
            yield from classes(arg)

    hidden = {f"{name} → {cls.__module__}.{cls.__qualname__}"
              for name in dr_scale.__all__ if inspect.isfunction(obj := getattr(dr_scale, name))
              for cls in classes(typing.get_type_hints(obj).get("return"))
              if inspect.isclass(cls) and cls.__module__.startswith("dr_scale.")
              and cls.__name__ not in dr_scale.__all__}
    assert not hidden, sorted(hidden)

