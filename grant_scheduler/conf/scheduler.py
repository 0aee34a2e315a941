"""The ``[grant_scheduler]`` option group: the knobs of the grants protocol.

These definitions are the only place the knobs' defaults and bounds are
written: ``grant_scheduler.settings.Settings`` is built from them.
"""

from oslo_config import cfg

from grant_scheduler.conf import types

GROUP_NAME = "grant_scheduler"

group = cfg.OptGroup(
    GROUP_NAME,
    title="grant_scheduler protocol options",
    help="Options of the grants protocol (scheduler, compute claim, reaper).",
)

scheduler_opts = [
    cfg.IntOpt(
        "grant_ttl",
        default=600,
        min=1,
        max=7 * 24 * 3600,
        help="""
Seconds a grant stays live before the reaper may delete it if no compute host
has consumed it.  Make it longer than the worst delay between a scheduler's
answer and the compute host's claim (image download, conductor queues);
a compute host that arrives for an expired or reaped grant re-checks capacity
and rejects the build when it no longer fits.
""",
    ),
    cfg.IntOpt(
        "host_subset_size",
        default=3,
        min=1,
        max=1000,
        help="""
Choose randomly among this many best-fitting hosts.  Values above 1 keep
concurrent schedulers from herding onto the same host and so reduce conflicts;
1 always picks the best fit.  Used by the Python API, the command line and the
benchmark; inside Nova, Nova's own [filter_scheduler] host_subset_size
decides instead, among the hosts Nova's weighers ranked.
""",
    ),
    cfg.IntOpt(
        "max_fallovers",
        default=10,
        min=0,
        max=10000,
        help="""
How many times one instance may fall over to the next host after its grant
did not fit (another writer took the room since this scheduler's last read),
before every host is read again; NoValidHost is answered only when that fresh
read shows no host fits.  Each fall-over costs a grant write and a read of
what changed.  Inside Nova 17-22 Nova's sorted host list bounds the
fall-overs instead.
""",
    ),
    cfg.IntOpt(
        "reap_interval",
        default=60,
        min=1,
        max=24 * 3600,
        help="Seconds between two runs of the periodic grant reaper.",
    ),
    cfg.IntOpt(
        "reconcile_interval",
        default=60,
        min=0,
        max=24 * 3600,
        help="""
Inside Nova: seconds between two reconciliations of the claims with Nova's
records (the instances each node runs, building ones included, and the
migrations in progress), run by every scheduler process from its periodic
tasks, so the books agree with what runs within this interval (and a build
consumes its grant once Nova has set its host, before its spawn ends).
Nova's scheduler manager runs the periodic tasks every [scheduler]
periodic_task_interval seconds (60), which bounds how often this runs.
0 turns it off.
""",
    ),
    types.FiniteFloatOpt(
        "consume_interval",
        default=2.0,
        min=0.0,
        max=3600.0,
        help="""
Inside Nova: seconds between two looks, by every scheduler process, at the
instances its live grants are for, in Nova's records.  A grant is consumed
(its instance counted on the node) once Nova has set the instance's host and
node, which the compute's resource tracker does before the spawn begins, so
within this interval of the build's start whatever the spawn takes; a grant
whose instance is building on another node (a reschedule to an alternate)
is withdrawn, and the instance counted where it runs; a grant of an
instance Nova has deleted, or set to ERROR without a host, is withdrawn.
Each look is one statement on grant_scheduler's database, plus, when grants
are live, one query of Nova's API database and two per cell.  It also
claims the instances whose information (cast by the computes to every
scheduler worker) this process deferred: a worker claims at once only the
instances it granted, and after this interval reads in one statement which
of the others are claimed, claiming the rest; and releases at once only
the instances whose claim it made, the others after this interval if they
are still claimed (0: every worker claims and releases every instance at
once, a repeat for all but one).  The loop
starts with the scheduler's periodic tasks (Nova's [DEFAULT]
periodic_enable).  0 turns the loop off: the periodic tasks then do the
same every [scheduler] periodic_task_interval seconds.
""",
    ),
    types.FiniteFloatOpt(
        "view_refresh_interval",
        default=1.0,
        min=0.0,
        max=3600.0,
        help="""
Inside Nova: seconds between two looks, by a loop of every scheduler
process, at whether a read of every row of its views (grant_scheduler's
host rows, every view_resync_interval; Nova's compute node rows, every
view_resync_interval; Nova's compute service rows, every [DEFAULT]
report_interval) falls due within this time: one that does is made then,
so that requests read only what changed instead of carrying it; its
first pass (Nova 18-22) also reads every row of each enabled cell and
builds each node's HostState, which the first request would otherwise
carry.  The loop starts with the scheduler's periodic tasks (Nova's
[DEFAULT] periodic_enable).  0 turns the loop off: each such read is
then made by the first request that finds it due.
""",
    ),
    cfg.IntOpt(
        "sync_concurrency",
        default=4,
        min=1,
        max=64,
        help="""
Inside Nova 17-22: how many compute nodes a scheduler process's sync (the
periodic task that registers the nodes its books lack and reports the
capacities placement changed) reads from placement at a time.  A node
read is one or two requests (its usages, its inventories); the first
sync of a process reads every node whose provider it has not seen, so
every node after a start: at 10,000 nodes 20,000 requests, minutes one
at a time.  1 reads them one after the other.
""",
    ),
    cfg.StrOpt(
        "database_failure",
        default="schedule",
        choices=["schedule", "refuse"],
        help="""
Inside Nova: what a scheduler does while grant_scheduler's own database
cannot be reached or fails in the middle of a grant.  "schedule" (the
default): the request goes on as the stock scheduler decides it, with no
grant written: on Nova 17-22 by Nova's filters and weighers and
placement's candidates and claims, which still keep every node within its
inventory; on 13-16 by Nova's filters and weighers over its compute node
records, the computes' own resource claims guarding each node as they do
for the stock scheduler.  The outage is logged when it starts, every
minute while it lasts and when it ends; a request tries the database
again every ten seconds (one statement).  When it is back, the books
first catch up with what Nova placed meanwhile (a reconciliation from
Nova's records) before any grant is made.  "refuse": nothing is placed
meanwhile and each request is answered NoValidHost naming the cause.  A
production cloud keeps building through an outage of a plugin's
database: "schedule".  (The compute side never fails a build or a delete
for it either way: see the docs' failure behaviour.)
""",
    ),
    cfg.BoolOpt(
        "build_allocation_requests",
        default=True,
        help="""
Inside Nova 18-22: for a request of one unnumbered group of resources
only (standard classes, PCPU, an Ironic flavour's custom class; no
required trait, aggregate or request group of its own), build the
allocation request of the node Nova's filters and weighers chose instead
of asking placement for allocation candidates of every node first; the
grant and placement's own claim still decide on that node, and once
placement refuses one such request (a class the node's own provider lacks)
the rest of the request is decided by placement's candidates.  Turn it
off where compute nodes take DISK_GB from a sharing provider, so that no
boot first tries a claim placement refuses.  Nova's [scheduler]
max_placement_results bounds the nodes a built request filters and weighs
(a random sample of those with room), as it bounds placement's candidates.
""",
    ),
    types.FiniteFloatOpt(
        "view_resync_interval",
        default=60.0,
        min=0.0,
        max=24 * 3600.0,
        help="""
Seconds between two full reads of every host row by a scheduler.  In
between, each request reads only the rows changed since the previous one
(and the live grants), so a decision does not cost a read of every host.
Inside Nova the driver reads Nova's compute node and compute service rows
the same way: per request only the changed rows, every row at this
interval (the bound on how late a change the stamps cannot show is seen:
a writer's clock behind by more than view_overlap, a row deleted outright),
and every service row also every [DEFAULT] report_interval (the
heartbeats).  0 reads every row on every request.
""",
    ),
    types.FiniteFloatOpt(
        "view_overlap",
        default=2.0,
        min=0.0,
        max=3600.0,
        help="""
Seconds of changes read again on each refresh, for writes stamped before
the previous read but committed after it (longer than a host-row write
transaction; raise it if database clocks disagree, as on Galera).  A change
missed here only makes the view stale until the next full read: grants are
still decided in their own write.  Nova's compute node and service rows
are stamped by Nova's processes from their own clocks, in whole seconds on
MySQL: for them at least 1 second is used, and the overlap must also
cover the clock skew between Nova's hosts.
""",
    ),
    cfg.IntOpt(
        "reap_batch_size",
        default=500,
        min=1,
        max=100000,
        help="""
At most this many grant rows are deleted per reaper transaction, so the
reaper never holds locks for long.
""",
    ),
]


def register_opts(conf):
    conf.register_group(group)
    conf.register_opts(scheduler_opts, group=group)


def list_opts():
    return {group: scheduler_opts}
