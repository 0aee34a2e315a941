"""Nova's compute node and compute service rows, read as they change.

Nova's HostManager reads every compute node and every compute service
row of every cell for each request: at 10,000 nodes that read alone is
seconds.  ``CellComputes`` keeps one cell's rows, and Nova's objects made
from them, between requests, and reads per request only what changed:

* **Compute nodes**: the rows whose ``updated_at``, ``created_at`` or
  ``deleted_at`` is at or after the previous read's mark, less an overlap
  (``[grant_scheduler] view_overlap``, at least a second); a soft-deleted
  row (``deleted`` set, ``updated_at`` left as it was, ``deleted_at``
  stamped) is read by its ``deleted_at`` and dropped.  The mark is the
  earlier of this process's clock when the previous read began and the
  newest stamp that read found, so neither a writer whose clock runs
  ahead nor this process's own clock running ahead moves it past a change
  still to come.
* **Compute services**: every service heartbeats every ``report_interval``
  (its ``updated_at`` moves each time), so a read by stamp would return
  them all.  Per request only the rows that changed *and* matter before
  the next heartbeat are read: created or deleted since the mark, or
  updated since it and now disabled or forced down, or updated since it
  and kept as disabled or forced down (enabled again).  Every service
  row is read again every ``report_interval`` seconds, so the heartbeat
  Nova's ComputeFilter judges a service's liveness by is at most one
  interval older than the one Nova's own read would find.
* **The safety net**: every row of both tables is read again every
  ``[grant_scheduler] view_resync_interval`` seconds (0: on every
  request).  A change that the marks cannot catch (a writer whose clock is
  more than the overlap behind, a transaction open longer than the
  overlap between its stamp and its commit, a row deleted outright) is
  therefore seen within that interval; every other change is seen by the
  next request, as by Nova's own read.
* **Off the requests**: a loop of the scheduler process
  (``[grant_scheduler] view_refresh_interval``, every second by default)
  makes each read of every row of a table as it falls due within its own
  interval (``read_due``), so that requests read only what changed; one
  that finds such a read due (the loop off or late) makes it itself.
  Reads of one cell are made one at a time (the host manager's lock).

Stamps are written by Nova's processes from their own clocks, in whole
seconds on MySQL: the overlap must cover the precision, the skew between
Nova's hosts and the longest compute-node or service write transaction.

A row read again and equal to the one kept keeps its object, so Nova's
objects (and the driver's HostStates built from them) are made again only
for the rows that changed.  A service row whose heartbeat alone changed
(``updated_at``, ``last_seen_up``, ``report_count``: what every compute
writes every ``report_interval``) keeps its object too, with the new
heartbeat set on it, and ``beats`` tells the host manager to copy the
service into the host's HostState again: at 10,000 nodes every service
row changes between two reads of every row, and rebuilding each object
and each HostState for it would cost seconds a minute.

**Stamps first.**  Between two full reads a request reads the stamps
alone (id, ``updated_at``, ``created_at``, ``deleted_at``, ``deleted``)
of the rows the marks select, then whole only those that are not the
kept rows: new, stamped otherwise, or not yet *settled*.  A kept row is
settled when all its stamps are before the start of the read that
fetched it less the overlap: every write committed after that read is
stamped at or after that bound, so a row still stamped alike is the row
kept.  Without this, a table whose newest stamps stop moving (compute
services that report through another servicegroup driver than the
database, a cloud where nothing is written for a while, many rows
created in the same second) would be read whole, within the overlap of
its mark, on every request.  A row rewritten within the same second as
its last stamp is caught because it was not settled when read; that
holds as long as this process's clock is not ahead of Nova's writers by
more than the overlap (the mark itself never trusts this clock), and
beyond it by the next full read.

Only imported when Nova is.
"""

import datetime
import time

import sqlalchemy as sa
from nova import objects
from oslo_config import cfg
from oslo_log import log as logging
from oslo_utils import timeutils

LOG = logging.getLogger(__name__)

# The stamps' precision in MySQL's DATETIME columns, which Nova's are.
MIN_OVERLAP = datetime.timedelta(seconds=1)

COMPUTE_BINARY = "nova-compute"


def _nova_db():
    """Nova's database API (``nova.db.main.api`` from 2023.1 on)."""
    try:
        from nova.db.main import api
    except ImportError:
        from nova.db.sqlalchemy import api
    return api


def _nova_models():
    try:
        from nova.db.main import models
    except ImportError:
        from nova.db.sqlalchemy import models
    return models


def nova_engine(cctxt):
    """The engine of the cell ``cctxt`` targets, as Nova's own reads find
    it."""
    return _nova_db().get_engine(context=cctxt)


_SQLALCHEMY = tuple(int(part) for part in sa.__version__.split(".")[:2])


def _select(columns):
    """``SELECT columns`` (SQLAlchemy before 1.4 takes them as a list)."""
    if _SQLALCHEMY < (1, 4):
        return sa.select(list(columns))
    return sa.select(*columns)


def _rows(conn, query):
    return [dict(getattr(r, "_mapping", r)) for r in conn.execute(query)]


STAMPS = ("updated_at", "created_at", "deleted_at")
"""A row's stamps: written by every write of it (a soft delete stamps
``deleted_at`` and leaves ``updated_at`` as it was)."""


def _newest(rows, newest):
    for row in rows:
        for column in STAMPS:
            stamp = row.get(column)
            if stamp is not None and (newest is None or stamp > newest):
                newest = stamp
    return newest


def _stamped_before(row, bound):
    """Whether every stamp of ``row`` is before ``bound``."""
    return all(
        row.get(column) is None or row[column] < bound for column in STAMPS
    )


class Timing:
    """When ``CellComputes`` reads everything, and how far back it reads
    what changed."""

    def __init__(self, resync_interval, overlap, service_interval):
        """
        :param resync_interval: seconds between two reads of every row
            (0: every read reads every row).
        :param overlap: seconds read again before each mark (raised to
            ``MIN_OVERLAP``).
        :param service_interval: seconds between two reads of every
            service row (Nova's ``report_interval``); never more than
            ``resync_interval``.
        """
        self.resync_interval = resync_interval
        self.overlap = max(datetime.timedelta(seconds=overlap), MIN_OVERLAP)
        self.service_interval = min(service_interval, resync_interval)

    @classmethod
    def of(cls, conf):
        """From the driver's options (their defaults where they are not
        registered in ``conf``) and Nova's ``report_interval``."""
        from grant_scheduler.conf import scheduler as gs_scheduler

        values = {opt.name: opt.default for opt in gs_scheduler.scheduler_opts}
        try:
            settings = conf.grant_scheduler
            for name in ("view_resync_interval", "view_overlap"):
                values[name] = getattr(settings, name)
        except (AttributeError, cfg.NoSuchOptError):
            pass
        return cls(
            values["view_resync_interval"],
            values["view_overlap"],
            getattr(conf, "report_interval", 10),
        )


HEARTBEAT = ("updated_at", "last_seen_up", "report_count")
"""What a compute service's heartbeat writes in its row (the database
servicegroup driver's ``report_count``, with the stamps Nova's database
API sets with it)."""


def _beat(service, before, row):
    """Set ``row``'s heartbeat on ``service`` (made from ``before``) if
    that is all ``row`` changed; returns whether it did."""
    if before.keys() != row.keys() or any(
        before[column] != value
        for column, value in row.items()
        if column not in HEARTBEAT
    ):
        return False
    fields = [column for column in HEARTBEAT if column in service.fields]
    for column in fields:
        setattr(service, column, row[column])
    service.obj_reset_changes(fields)
    return True


class _Table:
    """One table's rows and the objects made from them, kept by id."""

    def __init__(self, make, beat=None, watch=None):
        """
        :param make: ``f(cctxt, row)``, the object of a row.
        :param beat: ``f(object, row before, row)``, which sets a
            heartbeat on the kept object in place when that is all that
            changed (``_beat``), or None.
        :param watch: ``f(row)``, True for a row whose id the next reads
            select however it is stamped (``watched``), or None.
        """
        self._make = make
        self._beat = beat
        self._watch = watch
        self.kept = {}
        """``{id: (row, object)}``."""
        self.watched = set()
        """Ids of the kept rows ``watch`` is True of."""
        self._objects = None
        """Every kept object, in a list made again only when one is
        replaced, added or gone (``objects``)."""
        self.beats = {}
        """``{host: count}``: the read count of each host's last
        heartbeat set in place, so that what was made from the object
        before (a HostState's copy of the service) is made again."""
        self._reads = 0
        self.settled = set()
        """Ids of the kept rows no later write can leave stamped as they
        are (``take``)."""
        self.full_at = None
        self.mark = None
        self.rows_read = 0
        """Whole rows read."""
        self.stamps_read = 0
        """Rows read for their stamps alone."""
        self.full_reads = 0

    def take(self, cctxt, rows, full, settled_before):
        """Keep ``rows`` (every row when ``full``); a deleted row goes.

        :param settled_before: a write that commits after these rows were
            read is stamped at or after it (the read's start less the
            overlap): a row whose stamps are all before it is settled, and
            a later read that finds the same stamps has found this row.
        """
        kept = {} if full else self.kept
        settled = set() if full else self.settled
        watched = set() if full else self.watched
        self._reads += 1
        changed = False
        for row in rows:
            row_id = row["id"]
            if row.get("deleted"):
                changed |= kept.pop(row_id, None) is not None
                settled.discard(row_id)
                watched.discard(row_id)
                continue
            before = self.kept.get(row_id)
            if before is None:
                before = (row, self._make(cctxt, row))
                changed = True
            elif before[0] != row:
                if self._beat and self._beat(before[1], before[0], row):
                    before = (row, before[1])
                    self.beats[row.get("host")] = self._reads
                else:
                    before = (row, self._make(cctxt, row))
                    changed = True
            kept[row_id] = before
            if self._watch is not None and self._watch(row):
                watched.add(row_id)
            else:
                watched.discard(row_id)
            if _stamped_before(row, settled_before):
                settled.add(row_id)
            else:
                settled.discard(row_id)
        if changed or len(kept) != len(self.kept):
            # NOTE: a read of every row that kept every object and found
            # as many rows found no row gone either.
            self._objects = None
        self.kept = kept
        self.settled = settled
        self.watched = watched
        self.rows_read += len(rows)
        self.full_reads += bool(full)

    def objects(self):
        """Every kept object, in a list shared until one is replaced,
        added or gone: read it, never change it."""
        if self._objects is None:
            self._objects = [obj for _row, obj in self.kept.values()]
        return self._objects

    def unchanged(self, stamps):
        """Whether a row read for its stamps alone is the one kept: settled
        and stamped alike."""
        row_id = stamps["id"]
        if row_id not in self.settled:
            return False
        row = self.kept[row_id][0]
        return all(row.get(c) == stamps.get(c) for c in STAMPS)

    def due(self, now):
        return self.full_at is None or now >= self.full_at

    def moved(self, began, rows, full, now, interval):
        """The next read's mark: the earlier of when this one began and
        the newest stamp it found."""
        newest = _newest(rows, None if full else self.mark)
        self.mark = began if newest is None else min(began, newest)
        if full:
            self.full_at = now + interval


def _watched(service_row):
    """A disabled or forced down service, whose next change (enabled
    again) the stamps alone would not select."""
    return bool(service_row.get("disabled") or service_row.get("forced_down"))


def _compute_node(cctxt, row):
    return objects.ComputeNode._from_db_object(
        cctxt, objects.ComputeNode(cctxt), dict(row)
    )


def _service(cctxt, row):
    return objects.Service._from_db_object(
        cctxt, objects.Service(cctxt), dict(row)
    )


class CellComputes:
    """One cell's compute nodes and compute services as Nova's objects,
    kept between requests and read as they change (see the module)."""

    def __init__(
        self, timing, engine=nova_engine, clock=None, utcnow=None, cell=None
    ):
        """
        :param timing: ``Timing``.
        :param engine: ``f(cctxt)`` giving the cell's engine.
        :param clock: monotonic seconds (``time.monotonic``).
        :param utcnow: this process's UTC wall clock, naive as Nova's
            stamps (``timeutils.utcnow``).
        :param cell: the cell's mapping (``self.cell``), for the reads
            made outside a request (``read_due``'s caller targets it).
        """
        self.cell = cell
        self._timing = timing
        self._engine = engine
        self._clock = clock or time.monotonic
        self._utcnow = utcnow or timeutils.utcnow
        self._nodes = _Table(_compute_node)
        self._services = _Table(_service, beat=_beat, watch=_watched)
        self._by_host = (None, {})
        """``(services list, {host: service})`` of the last ``read``."""

    def read(self, cctxt):
        """``([compute node], {host: service})`` of the cell, every row as
        of now (see the module for what "now" means for each table); kept
        between reads until a row changes, so that a request builds
        nothing per node: read them, never change them."""
        began, now = self._utcnow(), self._clock()
        # NOTE: one connection for every statement of the read (one
        # checkout, and on MySQL one snapshot from the first statement on).
        with self._engine(cctxt).connect() as conn:
            self._read(cctxt, conn, began, now)
        services = self._services.objects()
        if self._by_host[0] is not services:
            self._by_host = (services, {s.host: s for s in services})
        return self._nodes.objects(), self._by_host[1]

    def read_due(self, cctxt, ahead):
        """Read every row of each table whose read of every row falls due
        within ``ahead`` seconds (or was never made), and nothing of the
        others: run by a loop of the process's own every ``ahead``
        seconds, so that a request seldom finds such a read due.  A table
        read whole on every request (an interval of 0) is left to them.

        :returns: how many tables were read whole.
        """
        began, now = self._utcnow(), self._clock()
        due = sum(
            bool(interval) and table.due(now + ahead)
            for table, _, _, interval in self._tables()
        )
        if due:
            with self._engine(cctxt).connect() as conn:
                self._read(cctxt, conn, began, now, ahead, only_due=True)
        return due

    def _tables(self):
        """``(table, Nova's table, condition, full read interval)`` of
        each table."""
        timing = self._timing
        models = _nova_models()
        return (
            (
                self._nodes,
                models.ComputeNode.__table__,
                self._node_condition,
                timing.resync_interval,
            ),
            (
                self._services,
                models.Service.__table__,
                self._service_condition,
                timing.service_interval,
            ),
        )

    def _read(self, cctxt, conn, began, now, ahead=0, only_due=False):
        """Read each table whole if that read falls due within ``ahead``
        seconds, else what changed (or, ``only_due``, nothing)."""
        overlap = self._timing.overlap
        settled_before = began - overlap
        for table, nova_table, condition, interval in self._tables():
            full = table.due(now + ahead)
            if only_due and not (full and interval):
                # NOTE: an interval of 0 reads every row on every request.
                continue
            since = None if full else table.mark - overlap
            if full:
                rows = stamps = _rows(
                    conn, nova_table.select().where(condition(since))
                )
            else:
                rows, stamps = self._changed(
                    conn, table, nova_table, condition(since)
                )
            table.take(cctxt, rows, full, settled_before)
            table.moved(began, stamps, full, now, interval)

    @staticmethod
    def _changed(conn, table, nova_table, condition):
        """``(rows, stamps)``: the stamps of the rows meeting
        ``condition``, then whole the ones among them that are not the
        kept rows (new, stamped otherwise, or not yet settled); a soft
        delete needs no more than its stamps."""
        columns = [nova_table.c.id, nova_table.c.deleted]
        columns += [nova_table.c[column] for column in STAMPS]
        stamps = _rows(conn, _select(columns).where(condition))
        table.stamps_read += len(stamps)
        rows = [s for s in stamps if s.get("deleted")]
        wanted = [
            s["id"]
            for s in stamps
            if not s.get("deleted") and not table.unchanged(s)
        ]
        if wanted:
            rows += _rows(
                conn,
                nova_table.select().where(nova_table.c.id.in_(wanted)),
            )
        return rows, stamps

    def _node_condition(self, since):
        table = _nova_models().ComputeNode.__table__
        if since is None:
            return table.c.deleted == 0
        return sa.or_(
            table.c.updated_at >= since,
            table.c.created_at >= since,
            table.c.deleted_at >= since,
        )

    def _service_condition(self, since):
        table = _nova_models().Service.__table__
        computes = table.c.binary == COMPUTE_BINARY
        if since is None:
            return sa.and_(computes, table.c.deleted == 0)
        watched = sorted(self._services.watched)
        state = [
            table.c.disabled == sa.true(),
            table.c.forced_down == sa.true(),
        ]
        if watched:
            state.append(table.c.id.in_(watched))
        return sa.and_(
            computes,
            sa.or_(
                table.c.created_at >= since,
                table.c.deleted_at >= since,
                sa.and_(table.c.updated_at >= since, sa.or_(*state)),
            ),
        )

    def __len__(self):
        """How many compute nodes are kept."""
        return len(self._nodes.kept)

    def holds(self, node):
        """Whether ``node`` is the object kept for its row."""
        return self._nodes.kept.get(node.id, (None, None))[1] is node

    @property
    def beats(self):
        """``{host: count}``, which moves each time a heartbeat alone is
        set in place on the host's kept service object."""
        return self._services.beats

    @property
    def rows_read(self):
        """Whole rows read so far, both tables."""
        return self._nodes.rows_read + self._services.rows_read

    @property
    def stamps_read(self):
        """Rows read for their stamps alone so far, both tables."""
        return self._nodes.stamps_read + self._services.stamps_read

    @property
    def full_reads(self):
        """``(compute node, service)`` reads of every row so far."""
        return self._nodes.full_reads, self._services.full_reads
