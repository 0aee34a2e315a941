"""The SQL store and the in-memory store implement one abstract class.

What they *do* is compared by ``test_store_conformance``; this holds their
signatures and documentation to ``storage.Store``.
"""

import inspect

from grant_scheduler import storage
from grant_scheduler.db import store as gs_store
from tests import base
from tests import memory_store
from tests.unit import fakes

# What the in-memory store offers tests beside the interface.
TEST_HOOKS = {"take", "now"}


def _interface():
    return {
        name: inspect.signature(member)
        for name, member in vars(storage.Store).items()
        if not name.startswith("_") and callable(member)
    }


class TestInterface(base.TestCase):
    def test_interface_documents_what_each_method_returns(self):
        for name in _interface():
            doc = inspect.getdoc(getattr(storage.Store, name)) or ""
            self.assertTrue(
                ":returns:" in doc or "Raise" in doc,
                "%s has no :returns:" % name,
            )

    def test_every_method_is_abstract(self):
        self.assertEqual(
            set(_interface()), set(storage.Store.__abstractmethods__)
        )
        self.assertRaises(TypeError, storage.Store)

        class Partial(storage.Store):
            def grant(self, host_ids, ask, taken, before_commit=None):
                pass

        self.assertRaises(TypeError, Partial)

    def assert_implements(self, cls, extra=frozenset()):
        self.assertTrue(issubclass(cls, storage.Store))
        self.assertEqual(frozenset(), cls.__abstractmethods__)
        interface = _interface()
        self.assertGreater(len(interface), 10)
        for name, signature in interface.items():
            method = getattr(cls, name, None)
            self.assertIsNotNone(method, "%s lacks %s" % (cls.__name__, name))
            self.assertIsNot(
                getattr(storage.Store, name),
                method,
                "%s.%s is the abstract one" % (cls.__name__, name),
            )
            self.assertEqual(
                list(signature.parameters),
                list(inspect.signature(method).parameters),
                "%s.%s" % (cls.__name__, name),
            )
        public = {
            name
            for name, member in vars(cls).items()
            if callable(member) and not name.startswith("_")
        }
        self.assertEqual(set(interface), public - set(extra))

    def test_sql_store_implements_the_interface(self):
        self.assert_implements(gs_store.Store)

    def test_memory_store_implements_the_interface(self):
        self.assert_implements(memory_store.MemoryStore, TEST_HOOKS)

    def test_the_unit_tests_run_over_the_memory_store(self):
        self.assertIs(memory_store.MemoryStore, fakes.FakeStore)
