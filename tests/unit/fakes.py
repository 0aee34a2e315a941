"""An in-memory ``storage.Store`` for the protocol's unit tests.

It implements the same interface as ``grant_scheduler.db.store.Store``
(``test_storage`` holds both to ``storage.Store``) with the same rule: a
grant is taken only if it fits the node as it is *now*.  Tests change the
nodes behind a scheduler's back through ``before_grant`` (another scheduler
winning first) and ``fail_after_write`` (a commit whose answer is lost).
"""

import dataclasses
import datetime
import itertools

from grant_scheduler import storage
from grant_scheduler.resources import NOTHING

_EPOCH = datetime.datetime(2026, 1, 1)


class FakeStore:
    def __init__(self, states):
        self.states = {s.host_id: s for s in states}
        self.grants = {}  # (host id, ticket) -> resources
        self.withdrawn = []
        self.reads = []
        self.known = []
        self.offered = []  # the host ids of each grant call
        self.before_grant = None
        self.fail_after_write = None
        self._tickets = itertools.count(1)
        self._stamps = itertools.count(1)

    # -- what tests look at ------------------------------------------------

    def take(self, host_id, amount):
        """Another scheduler wins ``amount`` on the node."""
        state = self.states[host_id]
        self.states[host_id] = dataclasses.replace(
            state, granted=state.granted + amount
        )

    # -- storage.Store -----------------------------------------------------

    def report_host(self, host, node, capacity, used=None, node_uuid=None):
        raise NotImplementedError

    def register_host(self, host, node, capacity, used=None, node_uuid=None):
        raise NotImplementedError

    def delete_host(self, host, node):
        found = [
            s for s in self.states.values() if (s.host, s.node) == (host, node)
        ]
        for state in found:
            del self.states[state.host_id]
        return bool(found)

    def read_hosts(self, since=None, known=None):
        self.reads.append(since)
        # NOTE: a copy: the cache goes on updating the stamps it passed.
        self.known.append(
            known and storage.Known(dict(known.stamps), known.newest)
        )
        return [
            (
                dataclasses.replace(s),
                _EPOCH + datetime.timedelta(seconds=next(self._stamps)),
            )
            for s in self.states.values()
        ]

    def host_state(self, host_id):
        state = self.states.get(host_id)
        return None if state is None else dataclasses.replace(state)

    def granted_by_node(self):
        return {
            (s.host, s.node): s.granted
            for s in self.states.values()
            if s.granted != NOTHING
        }

    def grant(self, host_ids, ask, taken, before_commit=None):
        resources = ask.resources
        self.offered.append(list(host_ids))
        for host_id in host_ids:
            if self.before_grant is not None:
                self.before_grant(host_id)
            state = self.states.get(host_id)
            if state is not None and state.fits(resources):
                break
        else:
            return storage.Taken(
                False, states={h: self.host_state(h) for h in host_ids}
            )
        ticket = next(self._tickets)
        self.take(host_id, resources)
        self.grants[(host_id, ticket)] = resources
        taken.append((host_id, ticket))
        if self.fail_after_write is not None:
            raise self.fail_after_write
        return storage.Taken(
            True, host_id=host_id, grant_id=ticket, ticket=ticket
        )

    def withdraw(self, host_id, ticket, ask):
        resources = ask.resources
        self.withdrawn.append((host_id, ticket))
        if self.grants.pop((host_id, ticket), None) is None:
            return False
        self.take(host_id, NOTHING - resources)
        return True

    def withdraw_instance(self, instance_uuid):
        raise NotImplementedError

    def claim(self, build, before_commit=None):
        raise NotImplementedError

    def release(self, instance_uuid, host, node):
        raise NotImplementedError

    def claim_rows(self, host=None):
        raise NotImplementedError

    def correct_claims(self, host, node, amounts, releases):
        raise NotImplementedError

    def reap(self, reason, limit):
        return 0, 0

    def host_reports(self):
        return []

    def orphan_claims(self):
        return []

    def grant_rows(self, host=None):
        return []
