"""The package's import graph has no cycle (docs/architecture.md, "How this is checked"): not among its modules, and
not among the sub-packages and modules of any one package. The layers themselves are `lint-imports`' contract
(pyproject.toml), which CI runs."""

from __future__ import annotations

import grimp
import pytest


@pytest.fixture(scope="module")
def graph():
    """dr_scale's imports as grimp reads them: every import statement run at import or call time, at module level or
    inside a function; an import under ``if TYPE_CHECKING:`` (an annotation's name, never run) is not an edge."""
    return grimp.build_graph("dr_scale", cache_dir=None, exclude_type_checking_imports=True)


def cycles(nodes, edges: dict) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's algorithm, iterative): each a cycle of
    imports, or several cycles sharing nodes. ``edges`` maps a node to the nodes it imports.

    >>> cycles(["a", "b", "c"], {"a": {"b"}, "b": {"a"}, "c": {"a"}})
    [['a', 'b']]
    """
    index: dict = {}
    low: dict = {}
    stack: list = []
    on_stack: set = set()
    found = []
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(edges.get(successor, ())))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_no_import_cycle_among_modules(graph):
    modules = sorted(graph.modules)
    edges = {m: graph.find_modules_directly_imported_by(m) for m in modules}
    assert not [m for m in modules if m in edges[m]], "a module imports itself"
    assert cycles(modules, edges) == []


def test_no_import_cycle_inside_any_package(graph):
    """Within each package, its sub-packages and modules taken as wholes (e.g. ``ope.estimators`` against
    ``ope.evaluation``): a cycle through a sub-package's modules that no two modules form alone."""
    found = {}
    for package in sorted(m for m in graph.modules if graph.find_children(m)):
        children = sorted(graph.find_children(package))

        def child_of(module: str, children=children):
            return next((c for c in children if module == c or module.startswith(c + ".")), None)

        edges: dict = {}
        for module in graph.find_descendants(package):
            source = child_of(module)
            for imported in graph.find_modules_directly_imported_by(module):
                target = child_of(imported)
                if target is not None and target != source:
                    edges.setdefault(source, set()).add(target)
        if cycles(children, edges):
            found[package] = cycles(children, edges)
    assert found == {}
