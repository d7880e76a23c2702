"""The import graph stays a stack of layers: no circles, and nothing imports upward."""

from __future__ import annotations

from .importgraph import cycles, graph

# Lowest first. A module may import from its own package and from lower floors only;
# the ground floor's small modules from each other too.
FLOORS: list[tuple[int, tuple[str, ...]]] = [
    (
        0,
        (
            "hubsvc",
            "hubsvc.errors",
            "hubsvc.config",
            "hubsvc.timeutil",
            "hubsvc.keys",
            "hubsvc.sshkeys",
            "hubsvc.sshsig",
            "hubsvc.identity",
            "hubsvc.links",
            "hubsvc.datadir",
            "hubsvc.tasks",
            "hubsvc.clients",
            "hubsvc.cluster",
            "hubsvc.metrics",
            "hubsvc.requestid",
        ),
    ),
    (1, ("hubsvc.events", "hubsvc.git")),
    (2, ("hubsvc.store",)),
    # The one decision of what a principal may do: pure, above the grants it caps.
    (3, ("hubsvc.policy",)),
    (4, ("hubsvc.web",)),
    (5, ("hubsvc.notify",)),
    (6, ("hubsvc.services",)),
    (7, ("hubsvc.api", "hubsvc.bot", "hubsvc.site", "hubsvc.ssh")),
    (8, ("hubsvc.app", "hubsvc.startup", "hubsvc.cli")),
]


def room(module: str) -> tuple[int, str]:
    """(floor, package) of a module: the longest listed prefix that holds it."""
    best = (-1, "")
    for floor, names in FLOORS:
        for name in names:
            if (module == name or module.startswith(name + ".")) and len(name) > len(best[1]):
                best = (floor, name)
    assert best[0] >= 0, f"{module} is on no floor: add it to FLOORS"
    return best


def test_no_import_circles():
    edges, _ = graph()
    assert cycles(edges) == []


def test_no_circles_counting_annotations_either():
    edges, _ = graph(typing=True)
    assert cycles(edges) == []


def test_nothing_imports_upward():
    edges, _ = graph()
    upward = []
    for module, targets in sorted(edges.items()):
        floor, package = room(module)
        for target in sorted(targets):
            t_floor, t_package = room(target)
            # The ground floor's modules may use each other (config reads datadir).
            same_room = t_package == package or floor == t_floor == 0
            if not same_room and t_floor >= floor:
                upward.append(f"{module} (floor {floor}) -> {target} (floor {t_floor})")
    assert upward == []


def test_the_checks_find_what_they_look_for(tmp_path):
    """The graph and the cycle search see a circle when there is one."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert room("hubsvc.store.engines.sqlite") == (2, "hubsvc.store")
    edges, _ = graph()
    assert "hubsvc.store.base" in edges["hubsvc.store.events"]
