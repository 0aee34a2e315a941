"""``Store``: the ``storage.Store`` interface over SQL, one transaction each.

The SQL lives one module per table (``hosts``, ``grants``, ``claims``);
this class only opens the transactions, retried by ``Database`` on
deadlock, disconnect or a lost conditional update, and turns a repeated
claim into the first claim's outcome.
"""

from oslo_db import exception as db_exc

from grant_scheduler import exception
from grant_scheduler import storage
from grant_scheduler.db import claims
from grant_scheduler.db import grants
from grant_scheduler.db import hosts

# How many times a claim that found itself made already, and then found
# that claim gone, starts again before it gives up.
REPEATED_CLAIM_TRIES = 3


class Store:
    """The protocol's reads and writes against one ``Database``."""

    def __init__(self, db):
        self.db = db
        write = db.transactional
        read = lambda fn: db.transactional(fn, writer=False)  # noqa: E731
        with_db = _with(db)
        self._report = write(with_db(hosts.report))
        self._register = write(with_db(hosts.register))
        self._delete = write(hosts.delete)
        self._read = read(hosts.read)
        self._one = read(hosts.one)
        self._granted = read(hosts.granted_by_node)
        self._grant = write(with_db(grants.take))
        self._withdraw = write(with_db(grants.withdraw))
        self._withdraw_instance = write(with_db(grants.withdraw_instance))
        self._claim = write(with_db(claims.claim))
        self._claim_by_own_grant = write(with_db(claims.claim_by_own_grant))
        # NOTE: node ids by (host, node), learnt from claims: a compute
        # host's next claim then needs no lookup.  Ids are never reused, so
        # a stale one only misses (the general path then runs).
        self._node_ids = {}
        self._existing = read(claims.existing)
        self._release = write(with_db(claims.release))
        self._claim_rows = read(claims.listed)
        self._correct = write(with_db(claims.correct))
        self._reports = read(hosts.reports)
        self._orphan_claims = read(hosts.orphan_claims)
        self._grant_rows = read(grants.listed)
        self._reapers = {
            storage.SUPERSEDED: write(grants.reap_consumed),
            storage.EXPIRED: write(with_db(grants.expire)),
            storage.ORPHANED: write(grants.reap_orphaned),
            storage.ORPHANED_CLAIMS: write(grants.reap_orphaned_claims),
        }

    def report_host(self, host, node, capacity, used=None, node_uuid=None):
        return self._report(host, node, capacity, used, node_uuid)

    def register_host(self, host, node, capacity, used=None, node_uuid=None):
        return self._register(host, node, capacity, used, node_uuid)

    def delete_host(self, host, node):
        return self._delete(host, node)

    def read_hosts(self, since=None, known=None):
        return self._read(since, known)

    def host_state(self, host_id):
        return self._one(host_id)

    def granted_by_node(self):
        return self._granted()

    def grant(self, host_ids, ask, taken, before_commit=None):
        return self._grant(list(host_ids), ask, taken, before_commit)

    def withdraw(self, host_id, ticket, ask):
        return self._withdraw(host_id, ticket, ask)

    def withdraw_instance(self, instance_uuid):
        return self._withdraw_instance(instance_uuid)

    def claim(self, build, before_commit=None):
        """A repeated claim answers with the first one; when that claim is
        gone by the time it is read (its node was deleted, or resynced),
        the claim starts again and ends as a claim of its own,
        ``UnknownHost`` or ``ClaimRejected``."""
        node = (build.host, build.node)
        for _ in range(REPEATED_CLAIM_TRIES):
            try:
                return self._claim_once(node, build, before_commit)
            except (db_exc.DBDuplicateEntry, claims.AlreadyClaimed):
                outcome = self._existing(build.instance_uuid, *node)
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
        host_id = self._node_ids.get(node)
        outcome = None
        if host_id is not None and build.resources is not None:
            try:
                outcome = self._claim_by_own_grant(
                    host_id, build, before_commit
                )
            except claims.TakeGeneralPath:
                outcome = None
        if outcome is None:
            outcome = self._claim(build, before_commit)
        self._node_ids[node] = outcome.host_id
        return outcome

    def release(self, instance_uuid, host, node):
        return self._release(instance_uuid, host, node)

    def claim_rows(self, host=None):
        return self._claim_rows(host)

    def correct_claims(self, host, node, amounts, releases):
        return self._correct(host, node, dict(amounts), list(releases))

    def reap(self, reason, limit):
        return self._reapers[reason](limit)

    def host_reports(self):
        return self._reports()

    def orphan_claims(self):
        return self._orphan_claims()

    def grant_rows(self, host=None):
        return self._grant_rows(host)


def _with(db):
    """Pass ``db`` (the server's clock, the dialect) after the connection."""

    def bind(fn):
        def call(conn, *args):
            return fn(conn, db, *args)

        call.__name__ = fn.__name__
        return call

    return bind
