"""``Store``: the ``storage.Store`` interface over SQL.

The SQL lives one module per table (``hosts``, ``grants``, ``claims``); each
function this class calls is one transaction, declared at its definition
(``@db_api.writer`` or ``@db_api.reader``: retried by the ``Database`` on
deadlock, disconnect or a lost conditional update).  This class only
passes the ``Database`` and turns a repeated claim into the first claim's
outcome.
"""

import dataclasses

from oslo_db import exception as db_exc

from grant_scheduler import exception
from grant_scheduler import storage
from grant_scheduler.db import claims
from grant_scheduler.db import grants
from grant_scheduler.db import hosts

# How many times a claim that found itself made already, and then found
# that claim gone, starts again before it gives up.
REPEATED_CLAIM_TRIES = 3

# The transaction that deletes rows for each of ``storage.REAP_REASONS``.
REAPERS = {
    storage.SUPERSEDED: grants.reap_consumed,
    storage.EXPIRED: grants.expire,
    storage.ORPHANED: grants.reap_orphaned,
    storage.ORPHANED_CLAIMS: grants.reap_orphaned_claims,
}


class Store(storage.Store):
    """The protocol's reads and writes against one ``Database``."""

    def __init__(self, db):
        self.db = db
        # NOTE: node ids by (host, node), learnt from the rows read and
        # from claims: a node's claim then needs no lookup (a scheduler
        # process claims from the computes' instance information on the
        # nodes of its view).  Ids are never reused, so a stale one only
        # misses (the general path then runs).
        self._node_ids = {}

    def report_host(self, host, node, capacity, used=None, node_uuid=None):
        return hosts.report(self.db, host, node, capacity, used, node_uuid)

    def register_host(self, host, node, capacity, used=None, node_uuid=None):
        return hosts.register(self.db, host, node, capacity, used, node_uuid)

    def delete_host(self, host, node):
        return hosts.delete(self.db, host, node)

    def read_hosts(self, since=None, known=None):
        found = hosts.read(self.db, since, known)
        ids = self._node_ids
        for state, _stamp in found:
            ids[(state.host, state.node)] = state.host_id
        return found

    def host_state(self, host_id):
        return hosts.state(self.db, host_id)

    def granted_by_node(self):
        return hosts.granted_by_node(self.db)

    def grant(self, host_ids, ask, taken, before_commit=None):
        return grants.take(self.db, list(host_ids), ask, taken, before_commit)

    def withdraw(self, host_id, ticket, ask):
        return grants.withdraw(self.db, host_id, ticket, ask)

    def withdraw_instance(self, instance_uuid, scheduler=None):
        return grants.withdraw_instance(self.db, instance_uuid, scheduler)

    def claim(self, build, before_commit=None):
        """A repeated claim answers with the first one; when that claim is
        gone by the time it is read (its node was deleted, or resynced),
        the claim starts again and ends as a claim of its own,
        ``UnknownHost`` or ``ClaimRejected``."""
        node = (build.host, build.node)
        build = dataclasses.replace(
            build, resources_of=storage.asked_once(build.resources_of)
        )
        for _ in range(REPEATED_CLAIM_TRIES):
            try:
                return self._claim_once(node, build, before_commit)
            except (db_exc.DBDuplicateEntry, claims.AlreadyClaimed):
                outcome = claims.existing(self.db, build.instance_uuid, *node)
                if outcome is not None:
                    return outcome
        raise exception.ClaimRejected(
            instance_uuid=build.instance_uuid,
            host=build.host,
            node=build.node,
            reason="its claim there kept appearing and disappearing "
            "(the node is being deleted and reported again)",
        )

    def _claim_once(self, node, build, before_commit):
        outcome = claims.claim(
            self.db,
            build,
            host_id=self._node_ids.get(node),
            before_commit=before_commit,
        )
        self._node_ids[node] = outcome.host_id
        return outcome

    def release(self, instance_uuid, host, node):
        return claims.release(self.db, instance_uuid, host, node)

    def claim_rows(self, host=None):
        return claims.listed(self.db, host)

    def claimed_on(self, instance_uuids):
        return claims.claimed_on(self.db, list(instance_uuids))

    def correct_claims(self, host, node, amounts, releases):
        return claims.correct(
            self.db, host, node, dict(amounts), list(releases)
        )

    def reap(self, reason, limit):
        return REAPERS[reason](self.db, limit)

    def host_reports(self):
        return hosts.reports(self.db)

    def orphan_claims(self):
        return hosts.orphan_claims(self.db)

    def grant_rows(self, host=None, live=False):
        return grants.listed(self.db, host, live)
