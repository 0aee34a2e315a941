"""``grant_scheduler.api`` is the one door into the package.

The Nova adapters, the command line and the benchmark import nothing else
of the package but the option definitions and ``urls``, and touch no
private name of what they get through the door.
"""

import ast
import os

from tests import base

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))

# Modules anyone outside the core may import.
DOOR = {
    "grant_scheduler.api",
    "grant_scheduler.conf",
    "grant_scheduler.urls",
}

# Packages outside the core, each allowed its own modules.
OUTSIDE = {
    "grant_scheduler/nova": "grant_scheduler.nova",
    "grant_scheduler/cmd": "grant_scheduler.cmd",
    "grant_scheduler_bench": "grant_scheduler_bench",
}

# The command line sits above the Nova adapters: grant-scheduler-audit
# compares the books with Nova's records through them.
ABOVE = {"grant_scheduler.cmd": ("grant_scheduler.nova",)}


def _modules(directory):
    for path, _dirs, files in os.walk(os.path.join(ROOT, directory)):
        for name in sorted(files):
            if name.endswith(".py"):
                full = os.path.join(path, name)
                with open(full) as f:
                    yield os.path.relpath(full, ROOT), ast.parse(f.read())


def _imported(tree):
    """``(line, module)`` of every grant_scheduler import in ``tree``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                yield node.lineno, "%s.%s" % (node.module, alias.name)


def _allowed(module, own):
    if not module.startswith("grant_scheduler"):
        return True
    for allowed in (own,) + ABOVE.get(own, ()):
        if module == allowed or module.startswith(allowed + "."):
            return True
    if module == "grant_scheduler_bench" or module.startswith(
        "grant_scheduler_bench."
    ):
        return False  # only the benchmark itself may (checked above)
    return any(
        module == door or module.startswith(door + ".") for door in DOOR
    )


def _defined(tree):
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(
            node.ctx, ast.Store
        ):
            names.add(node.attr)
    return names


def _nova_names(tree):
    """Names bound to Nova's own modules (``from nova import objects``):
    extending Nova may take its private names, as Nova's own code does."""
    names = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.ImportFrom)
            and (node.module or "").split(".")[0] == "nova"
        ):
            names.update(a.asname or a.name for a in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "nova":
                    names.add(alias.asname or alias.name.split(".")[0])
    return names


def _root(node):
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _private_uses(tree):
    """Private attributes read off anything but ``self``, ``cls``,
    ``super()``, Nova's own modules or a name this module defines."""
    defined = _defined(tree)
    nova = _nova_names(tree)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        attr = node.attr
        if not attr.startswith("_") or attr.startswith("__"):
            continue
        value = node.value
        if isinstance(value, ast.Name) and value.id in ("self", "cls"):
            continue
        if (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id == "super"
        ):
            continue
        if attr in defined or _root(value) in nova:
            continue
        yield node.lineno, ast.unparse(node)


class TestTheDoor(base.TestCase):
    def scan(self):
        found = 0
        for directory, own in OUTSIDE.items():
            if not os.path.isdir(os.path.join(ROOT, directory)):
                continue
            for path, tree in _modules(directory):
                found += 1
                yield path, own, tree
        self.assertGreater(found, 20)

    def test_outside_the_core_only_the_door_is_imported(self):
        wrong = [
            "%s:%d imports %s" % (path, line, module)
            for path, own, tree in self.scan()
            for line, module in _imported(tree)
            if not _allowed(module, own)
        ]
        self.assertEqual([], wrong)

    def test_outside_the_core_no_private_name_is_touched(self):
        wrong = [
            "%s:%d %s" % (path, line, text)
            for path, _own, tree in self.scan()
            for line, text in _private_uses(tree)
        ]
        self.assertEqual([], wrong)

    def test_the_check_catches_a_back_door(self):
        tree = ast.parse(
            "from grant_scheduler import scheduler\n"
            "from grant_scheduler.db import api as db_api\n"
            "from grant_scheduler import api\n"
            "gs = api.GrantScheduler.from_url('sqlite://')\n"
            "gs._store.read_hosts()\n"
        )
        imports = [
            m
            for _, m in _imported(tree)
            if not _allowed(m, "grant_scheduler.nova")
        ]
        self.assertEqual(
            ["grant_scheduler.scheduler", "grant_scheduler.db.api"], imports
        )
        self.assertEqual(
            [(5, "gs._store")], [(n, t) for n, t in _private_uses(tree)]
        )

    def test_the_core_never_imports_what_is_outside_it(self):
        wrong = []
        for path, tree in _modules("grant_scheduler"):
            if path.startswith(
                ("grant_scheduler/nova", "grant_scheduler/cmd")
            ):
                continue
            for line, module in _imported(tree):
                if module.startswith(
                    ("grant_scheduler.nova", "grant_scheduler.cmd")
                ) or module.startswith("grant_scheduler_bench"):
                    wrong.append("%s:%d imports %s" % (path, line, module))
        self.assertEqual([], wrong)


# Inside the Nova adapters, folders by the process each part runs in, on
# floors: a module imports only from a lower floor, or from its own
# folder.  The scheduler and the compute side never import each other.
NOVA_FLOORS = (
    # what every process shares
    (
        "grant_scheduler.nova.compat",
        "grant_scheduler.nova.amounts",
        "grant_scheduler.nova.service",
        "grant_scheduler.nova.outage",
        "grant_scheduler.nova.loop",
        "grant_scheduler.nova.fanout",
    ),
    # the books, kept from either process
    ("grant_scheduler.nova.books",),
    # each process's own parts
    ("grant_scheduler.nova.scheduler", "grant_scheduler.nova.compute"),
    # the doors Nova and operators name
    (
        "grant_scheduler.nova.driver",
        "grant_scheduler.nova.filters",
        "grant_scheduler.nova.virt",
    ),
)


def _place(module):
    """``(floor, room)`` of a ``grant_scheduler.nova`` module, or None."""
    for floor, rooms in enumerate(NOVA_FLOORS):
        for room in rooms:
            if module == room or module.startswith(room + "."):
                return floor, room
    return None


def _nova_module(path):
    return path[: -len(".py")].replace("/", ".").replace(".__init__", "")


def _floor_breaches(modules):
    """``"path:line imports module"`` for every arrow that runs up or
    across between the Nova adapters' folders."""
    wrong = []
    for path, tree in modules:
        here = _place(_nova_module(path))
        if here is None:
            continue
        for line, module in _imported(tree):
            if not module.startswith("grant_scheduler.nova."):
                continue
            there = _place(module)
            if there is None or there[1] == here[1] or there[0] < here[0]:
                continue
            if here[0] == 0 and there[0] == 0:
                continue  # the shared modules are one room
            wrong.append("%s:%d imports %s" % (path, line, module))
    return wrong


class TestNovaFloors(base.TestCase):
    def test_every_nova_module_has_a_floor(self):
        lost = [
            path
            for path, _tree in _modules("grant_scheduler/nova")
            if _place(_nova_module(path)) is None
            and not path.endswith("nova/__init__.py")
        ]
        self.assertEqual([], lost)

    def test_arrows_point_down_or_stay_in_their_folder(self):
        self.assertEqual([], _floor_breaches(_modules("grant_scheduler/nova")))

    def test_the_check_catches_an_arrow_up_and_one_across(self):
        modules = [
            (
                "grant_scheduler/nova/books/follow.py",
                ast.parse(
                    "from grant_scheduler.nova.scheduler import ranker\n"
                    "from grant_scheduler.nova.books import claims\n"
                    "from grant_scheduler.nova import compat\n"
                ),
            ),
            (
                "grant_scheduler/nova/compute/hooks.py",
                ast.parse(
                    "from grant_scheduler.nova.scheduler import stock\n"
                    "from grant_scheduler.nova.books import claims\n"
                ),
            ),
        ]
        self.assertEqual(
            [
                "grant_scheduler/nova/books/follow.py:1 imports "
                "grant_scheduler.nova.scheduler.ranker",
                "grant_scheduler/nova/compute/hooks.py:1 imports "
                "grant_scheduler.nova.scheduler.stock",
            ],
            _floor_breaches(modules),
        )


# Where the tests of each Nova adapter module are: at the module's own
# path under a tier that runs it (``books/follow.py`` ->
# ``books/test_follow.py``), in any of these tiers.
TEST_TIERS = (
    "tests/unit/nova",  # no Nova
    "tests/nova34",  # Nova 34's objects, filters and weighers
    "tests/nova22/in_nova",  # Nova 22's services, in the bullseye root
)
# The modules exercised only through another module's tests, and where.
TESTED_THROUGH = {
    "scheduler/stock.py": ("tests/nova34/test_outage.py",),
    "loop.py": (
        "tests/nova22/in_nova/books/test_follow.py",
        "tests/nova22/in_nova/scheduler/test_host_manager.py",
    ),
    "scheduler/placement_engine.py": (
        "tests/nova22/in_nova/scheduler/test_candidates.py",
        "tests/nova22/in_nova/lifecycle.py",
    ),
}


def _test_paths(module):
    """The mirrored test files of ``module`` (relative to the package)."""
    folder, name = os.path.split(module)
    return [
        os.path.join(tier, folder, "test_" + name)
        for tier in TEST_TIERS
        if os.path.exists(os.path.join(ROOT, tier, folder, "test_" + name))
    ]


class TestTestsMirrorThePackage(base.TestCase):
    def modules(self):
        package = os.path.join(ROOT, "grant_scheduler", "nova")
        for path, _tree in _modules("grant_scheduler/nova"):
            if not path.endswith("__init__.py"):
                yield os.path.relpath(os.path.join(ROOT, path), package)

    def test_every_module_has_tests_at_its_own_path(self):
        missing = [
            module
            for module in self.modules()
            if not _test_paths(module) and module not in TESTED_THROUGH
        ]
        self.assertEqual([], missing)

    def test_the_exceptions_are_still_exceptions_and_name_real_files(self):
        modules = set(self.modules())
        for module, paths in TESTED_THROUGH.items():
            self.assertIn(module, modules)
            self.assertEqual([], _test_paths(module), module)
            for path in paths:
                self.assertTrue(os.path.exists(os.path.join(ROOT, path)), path)

    def test_the_check_finds_a_module_without_tests(self):
        self.assertEqual([], _test_paths("books/no_such_module.py"))
        self.assertEqual(
            ["tests/unit/nova/books/test_claims.py"],
            _test_paths("books/claims.py"),
        )
