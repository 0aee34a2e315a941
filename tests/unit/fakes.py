"""The in-memory store the protocol's unit tests run the scheduler over.

It is ``tests.memory_store.MemoryStore``, the whole ``storage.Store`` with
the SQL store's behaviour (the conformance tests hold the two to the same
scenarios), with its test hooks: tests change the nodes behind a
scheduler's back through ``take`` and ``before_grant`` (another scheduler
winning first) and ``fail_after_write`` (a commit whose answer is lost).
"""

from tests import memory_store

FakeStore = memory_store.MemoryStore

_EPOCH = memory_store.EPOCH
