"""Claims from the instance information computes send to the schedulers.

Every Nova compute (with ``[filter_scheduler] track_instance_changes``, on
by default) casts to every scheduler: ``update_instance_info`` once an
instance is spawned (or resized, unshelved, migrated to it),
``delete_instance_info`` once one is gone from the host, and
``sync_instance_info``, the uuids of all its instances, every
``scheduler_instance_sync_interval`` seconds (120).  ``InstanceInfoClaims``
turns them into claims and releases, so grants are consumed without
anything installed on the computes.  It cannot veto a build: by the time
the information arrives the instance runs.

Claims and releases are idempotent per instance, so every scheduler
process doing them (the casts are fanned out) is harmless; each process
remembers what it has claimed, to skip repeats and to know an instance's
node when a delete names only the host.  A repeat would still be a
transaction of two statements per scheduler worker and boot, so a
process claims at once only the instances it granted itself
(``GrantedHere``), and defers the others (``defer_others``); after
``consume_interval`` it reads in one statement which of them are
claimed by then (by the process that granted them) and claims only the
rest (an instance no process granted: a forced host, a build placed
while the database was down; or one whose granting process ended).
Releases go the same way: the process that made an instance's claim
releases it at once, the others a ``consume_interval`` later if it is
still claimed.

A sync claims the listed instances this process has not seen claimed (an
instance still building is listed as soon as the resource tracker set its
host, and claiming it then consumes its grant early), and releases an
instance it has claimed only when two syncs in a row no longer list it:
a sync whose list was read before a build set its host, but cast after
that build's update, must not release the new instance.
"""

import collections
import dataclasses
import threading
import time

from oslo_log import log as logging

from grant_scheduler import api
from grant_scheduler.nova import compat
from grant_scheduler.nova import outage
from grant_scheduler.nova.books import claims

LOG = logging.getLogger(__name__)

_READ_AT_ONCE = 500
"""Deferred instances whose claims one statement reads."""


class GrantedHere:
    """The instances this process granted whose instance information it
    has not had yet: those it claims at once (``InstanceInfoClaims``).
    At most ``limit`` are kept, the oldest dropped first (an instance
    dropped is claimed after a delay, as another process's)."""

    def __init__(self, limit=10000):
        self._limit = limit
        self._lock = threading.Lock()
        self._granted = collections.OrderedDict()

    def note(self, instance_uuid, amount=None):
        """This process took a grant for ``instance_uuid``, of ``amount``
        (``Resources``) where the caller knows it."""
        with self._lock:
            self._granted[instance_uuid] = amount
            self._granted.move_to_end(instance_uuid)
            while len(self._granted) > self._limit:
                self._granted.popitem(last=False)

    def take(self, instance_uuid):
        """``(granted, amount)``: whether this process granted
        ``instance_uuid``, and the amount noted (forgotten then)."""
        with self._lock:
            amount = self._granted.pop(instance_uuid, _NOT_NOTED)
        if amount is _NOT_NOTED:
            return False, None
        return True, amount


_NOT_NOTED = object()


@dataclasses.dataclass
class _Release:
    host: str
    node: object  # its node's name, or None when this process never knew
    since: float


@dataclasses.dataclass
class _Deferred:
    context: object
    host: str
    instance: object
    resources_of: object
    since: float


class InstanceInfoClaims:
    """Claims and releases from instance info, for one scheduler process."""

    def __init__(self, grant_scheduler, nodes_of_host, allocations=None):
        """
        :param grant_scheduler: ``f()`` giving the ``GrantScheduler``.
        :param nodes_of_host: ``f(host)`` giving the names of the host's
            nodes grant_scheduler knows, for a delete whose node this
            process has not seen.
        :param allocations: ``f(node_uuid)``, what each consumer holds on
            the node's provider in placement (``claims.on_provider``).
        """
        self._gs = grant_scheduler
        self._nodes_of_host = nodes_of_host
        self._allocations = allocations
        self._lock = threading.Lock()
        self._claimed = {}  # host -> {instance uuid: node}
        self._missing = {}  # host -> uuids the last sync did not list
        self._granted_here = None
        self._defer_for = 0.0
        self._deferred = {}  # instance uuid -> _Deferred
        self._releases = {}  # instance uuid -> _Release
        self._mine = set()  # instances whose claim this process made
        self._clock = time.monotonic
        self._looked_at = None  # when claim_deferred last ran

    def defer_others(self, granted_here, delay):
        """From now on, claim at once from a cast only the instances
        ``granted_here`` (a ``GrantedHere``) holds; defer the others by
        ``delay`` seconds (``claim_deferred``).  Nothing is deferred with
        a ``delay`` of 0 (the loop that claims them is off)."""
        self._granted_here = granted_here
        self._defer_for = delay if delay and delay > 0 else 0.0

    def deferred(self):
        """The uuids of the instances whose claim is deferred."""
        with self._lock:
            return sorted(self._deferred)

    def deferred_releases(self):
        """The uuids of the instances whose release is deferred."""
        with self._lock:
            return sorted(self._releases)

    @staticmethod
    def _due(entries, now, delay):
        """The entries of ``entries`` (kept in the order they were
        deferred: the due come first) due by ``now``, taken out."""
        due = {}
        for uuid, entry in entries.items():
            if now - entry.since < delay:
                break
            due[uuid] = entry
        for uuid in due:
            del entries[uuid]
        return due

    def claim_deferred(self, now=None):
        """Claim the deferred instances that are due (by ``now``, a
        ``time.monotonic()``, by default now) and still unclaimed, and
        release those whose deferred release is due and that are still
        claimed: one read of where they are claimed, then a claim of each
        one not claimed on its node, a release of each one still claimed
        (the worker that claimed it did not release it).

        :returns: how many were claimed here.
        """
        now = self._clock() if now is None else now
        with self._lock:
            self._looked_at = now
            due = self._due(self._deferred, now, self._defer_for)
            releases = self._due(self._releases, now, self._defer_for)
        if not due and not releases:
            return 0
        uuids = sorted(set(due) | set(releases))
        located = {}
        try:
            for start in range(0, len(uuids), _READ_AT_ONCE):
                located.update(
                    self._gs().claimed_on(uuids[start : start + _READ_AT_ONCE])
                )
        except BaseException:
            with self._lock:
                for uuid, entry in due.items():
                    self._deferred.setdefault(uuid, entry)
                for uuid, entry in releases.items():
                    self._releases.setdefault(uuid, entry)
            raise
        for uuid, entry in sorted(releases.items()):
            for host, node in located.get(uuid, ()):
                if host == entry.host and entry.node in (None, node):
                    self._release(uuid, host, [node])
        claimed = 0
        for uuid, entry in sorted(due.items()):
            node = compat.field(entry.instance, "node")
            there = [n for h, n in located.get(uuid, ()) if h == entry.host]
            if there and (not node or node in there):
                with self._lock:
                    self._claimed.setdefault(entry.host, {})[uuid] = (
                        node or there[0]
                    )
                continue
            if self._claim(
                entry.context, entry.host, entry.instance, entry.resources_of
            ):
                claimed += 1
        return claimed

    def _granted(self, instance_uuid):
        """``GrantedHere.take``'s answer, or ``(False, None)`` where this
        process notes nothing."""
        if self._granted_here is None:
            return False, None
        return self._granted_here.take(instance_uuid)

    def _defers(self, context, host, instance, resources_of):
        """Defer the claim of ``instance``, which this process did not
        grant."""
        if not self._defer_for:
            return False
        with self._lock:
            if instance.uuid in self._claimed.get(host, {}):
                return False  # a repeat: answered from memory
            self._deferred.setdefault(
                instance.uuid,
                _Deferred(
                    context, host, instance, resources_of, self._clock()
                ),
            )
        return True

    def claimed(self, host):
        """``{instance uuid: node}`` this process claimed on ``host``, or
        found claimed there (``claim_deferred``)."""
        with self._lock:
            return dict(self._claimed.get(host, {}))

    def updated(self, context, host, instances, resources_of, cast=False):
        """Claim ``instances`` (Nova Instances on ``host``).

        :param resources_of: ``f(context, instance)`` giving its
            ``Resources``, for an instance without a grant.
        :param cast: the compute's cast, which every scheduler process
            gets: an instance this process did not grant is deferred
            (``defer_others``), and the deferred ones due by now are
            claimed after it, when they were last looked at a
            ``consume_interval`` ago or more (the follower's loop looks
            at them as often when no cast comes).
        """
        for instance in instances:
            granted = None
            if cast:
                here, granted = self._granted(instance.uuid)
                if not here and self._defers(
                    context, host, instance, resources_of
                ):
                    continue
            self._claim(context, host, instance, resources_of, granted)
        if cast and self._defer_for:
            # NOTE: once per consume_interval at most, however many casts
            # come meanwhile: one read for every instance due by then.
            now = self._clock()
            looked_at = self._looked_at
            if looked_at is None or now - looked_at >= self._defer_for:
                self.claim_deferred(now)

    def forget(self, host, node):
        """Drop what this process remembers claiming on ``host``/``node``
        (its row was just created: nothing is claimed there)."""
        with self._lock:
            remembered = self._claimed.get(host, {})
            for instance_uuid in [
                u for u, n in remembered.items() if n == node
            ]:
                del remembered[instance_uuid]

    def deleted(self, host, instance_uuid, cast=False):
        """Release ``instance_uuid`` from ``host``.

        :param cast: the compute's cast (or a sync's), which every
            scheduler process gets: unless this process made the
            instance's claim, the release is deferred as a claim is
            (``claim_deferred``), and made then only if the instance is
            still claimed there.
        """
        with self._lock:
            node = self._claimed.get(host, {}).pop(instance_uuid, None)
            self._missing.get(host, set()).discard(instance_uuid)
            self._deferred.pop(instance_uuid, None)
            mine = instance_uuid in self._mine
            self._mine.discard(instance_uuid)
            if cast and self._defer_for and not mine:
                self._releases.setdefault(
                    instance_uuid, _Release(host, node, self._clock())
                )
                return False
        return self._release(
            instance_uuid, host, [node] if node else self._nodes_of_host(host)
        )

    def _release(self, instance_uuid, host, nodes):
        """Release ``instance_uuid`` from the first of ``nodes`` of
        ``host`` it is claimed on; False if none."""
        for candidate in nodes:
            try:
                if self._gs().release(instance_uuid, host, candidate):
                    LOG.debug(
                        "Released %s from %s/%s",
                        instance_uuid,
                        host,
                        candidate,
                    )
                    return True
            except outage.FAILURES:
                raise  # the database's: the caller's outage takes it
            except api.GrantSchedulerError:
                LOG.exception(
                    "Could not release instance %s from %s/%s",
                    instance_uuid,
                    host,
                    candidate,
                )
        return False

    def synced(self, context, host, instance_uuids, load, resources_of):
        """Reconcile with the full list of ``host``'s instances.

        :param load: ``f(context, host, uuids)`` giving those instances as
            Nova Instances with their flavour and node.
        """
        listed = set(instance_uuids)
        self._forget_lost(host)
        with self._lock:
            known = dict(self._claimed.get(host, {}))
            gone = set(known) - listed
            release = gone & self._missing.get(host, set())
            self._missing[host] = gone - release
        new = listed - set(known)
        if new:
            try:
                instances = load(context, host, sorted(new))
            except Exception:  # noqa: BLE001 - the next sync tries again
                LOG.exception(
                    "Could not read instances %s of host %s", sorted(new), host
                )
                instances = ()
            self.updated(context, host, instances, resources_of, cast=True)
        for instance_uuid in sorted(release):
            self.deleted(host, instance_uuid, cast=True)

    def _forget_lost(self, host):
        """Forget the claims this process remembers on ``host`` that the
        books no longer hold (a database restored or replaced, a claim
        released by another process), so that the sync claims them again:
        one statement per sync."""
        with self._lock:
            if not self._claimed.get(host):
                return
        try:
            held = {(c.instance_uuid, c.node) for c in self._gs().claims(host)}
        except api.GrantSchedulerError:
            LOG.exception("Could not read the claims of host %s", host)
            return
        with self._lock:
            remembered = self._claimed.get(host, {})
            for instance_uuid, node in list(remembered.items()):
                if (instance_uuid, node) not in held:
                    del remembered[instance_uuid]

    def _count_anyway(self, context, host, node, instance, resources_of, exc):
        """An instance runs where there was no room for it (its grant
        expired and the slot went to another): it is counted all the same,
        over the node's limit, which ``check`` then reports and which no
        grant of a class it is over in fits into until that class is back
        within its limit."""
        try:
            self._gs().correct_claims(
                host,
                node,
                {
                    instance.uuid: self._amount(
                        context, host, node, instance, resources_of
                    )
                },
            )
        except api.GrantSchedulerError:
            LOG.exception(
                "Could not count instance %s on %s/%s",
                instance.uuid,
                host,
                node,
            )
            return False
        LOG.error(
            "Instance %s runs on %s/%s, where grant_scheduler had no room for "
            "it (%s): it is counted, and the node is over its limit",
            instance.uuid,
            host,
            node,
            exc,
        )
        return True

    def _amount(self, context, host, node, instance, resources_of):
        """What ``instance`` holds on the node's own provider (placement's
        record, Nova 17-22): a class of a child or sharing provider is
        not the node's."""
        state = self._gs().view().by_node().get((host, node))
        amount = resources_of(context, instance)
        return claims.on_provider(
            state, {instance.uuid: amount}, self._allocations
        )[instance.uuid]

    def _claim(self, context, host, instance, resources_of, granted=None):
        """Claim ``instance`` on its node; ``granted``: the amount of the
        grant this process took for it, where it did."""
        instance_uuid = instance.uuid
        node = compat.field(instance, "node")
        if not node:
            nodes = self._nodes_of_host(host)
            if len(nodes) != 1:
                LOG.warning(
                    "Instance %s on %s names no node and the host has %d; "
                    "not claimed",
                    instance_uuid,
                    host,
                    len(nodes),
                )
                return None
            node = nodes[0]
        with self._lock:
            if self._claimed.get(host, {}).get(instance_uuid) == node:
                return None
        try:
            outcome = claims.claim(
                self._gs(),
                instance_uuid,
                host,
                node,
                lambda: self._amount(
                    context, host, node, instance, resources_of
                ),
                granted=granted,
            )
        except api.ClaimRejected as exc:
            if not self._count_anyway(
                context, host, node, instance, resources_of, exc
            ):
                return None
            outcome = None
        except api.GrantSchedulerError:
            LOG.exception(
                "Could not claim instance %s on %s/%s",
                instance_uuid,
                host,
                node,
            )
            return None
        with self._lock:
            self._claimed.setdefault(host, {})[instance_uuid] = node
            self._missing.get(host, set()).discard(instance_uuid)
            if outcome is None or outcome.how != api.CLAIM_EXISTING:
                self._mine.add(instance_uuid)
        if outcome is not None:
            LOG.debug(
                "Claimed %s on %s/%s (%s)",
                instance_uuid,
                host,
                node,
                outcome.how,
            )
        return outcome
