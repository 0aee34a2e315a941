"""The SQL store and the unit tests' fake implement one interface."""

import inspect

from grant_scheduler import storage
from grant_scheduler.db import store as gs_store
from tests import base
from tests.unit import fakes


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

    def assert_implements(self, cls):
        interface = _interface()
        self.assertGreater(len(interface), 10)
        for name, signature in interface.items():
            method = getattr(cls, name, None)
            self.assertIsNotNone(method, "%s lacks %s" % (cls.__name__, name))
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
        self.assertEqual(set(interface), public - {"take"})

    def test_sql_store_implements_the_interface(self):
        self.assert_implements(gs_store.Store)

    def test_fake_store_implements_the_interface(self):
        self.assert_implements(fakes.FakeStore)
