"""One benchmark run: S scheduler processes, compute processes, a checker.

The parent resets the tables, reports the hosts, hands each scheduler
process its share of the seeded request stream and checks invariant I1 at
checkpoints while they run.  Counters come from SQLAlchemy events in every
process and from the checker, never from a strategy's own bookkeeping.
"""

import cProfile
import logging
import multiprocessing
import queue as queue_module
import random
import resource
import time
import traceback
import uuid

import sqlalchemy as sa

from grant_scheduler import api
from grant_scheduler_bench import baselines
from grant_scheduler_bench import metrics
from grant_scheduler_bench import profiles
from grant_scheduler_bench import strategies

STOP = None
COMPUTES = 2
RESULT_TIMEOUT = 1800
START_TIMEOUT = 300


def count_statements(database, latency_s=0.0):
    """Count statements, commits and rollbacks on ``database``'s engine;
    optionally sleep before each statement to model a remote database."""
    counts = {"statements": 0, "commits": 0, "rollbacks": 0}
    engine = database.get_engine()

    @sa.event.listens_for(engine, "rollback")
    def _rollback(*args):
        counts["rollbacks"] += 1

    @sa.event.listens_for(engine, "before_cursor_execute")
    def _statement(*args):
        counts["statements"] += 1
        if latency_s:
            time.sleep(latency_s)

    @sa.event.listens_for(engine, "commit")
    def _commit(*args):
        counts["commits"] += 1

    return counts


def _settings(options):
    """The product's defaults, but for what the command line changed."""
    changed = {
        name: options[name]
        for name in ("host_subset_size", "max_fallovers")
        if options.get(name) is not None
    }
    return api.Settings(**changed)


def scheduler_process(
    strategy_name,
    options,
    stream,
    compute_queues,
    host_owner,
    index,
    reply_queue,
    results,
    barrier,
    releases,
):
    logging.disable(logging.WARNING)
    strategy = strategies.STRATEGIES[strategy_name]
    result = {
        "latencies": [],
        "placed": 0,
        "placed_vcpus": 0,
        "placed_by_vcpus": {},
        "no_valid_host": 0,
        "errors": [],
        "attempts": 0,
        "conflicts": 0,
        "nvh_conflicts": 0,
        "nvh_with_room": 0,
        "nvh_check_s": 0.0,
    }
    try:
        hooks = api.Hooks()
        if options["commit_delay_ms"]:
            # NOTE: a random share of the delay per grant: H1 needs one
            # grant to sit uncommitted longer than a later one.
            delay = options["commit_delay_ms"] / 1000.0
            jitter = random.Random(options["seed"])
            hooks.on(
                "grant_inserted",
                lambda **info: time.sleep(jitter.uniform(0, delay)),
            )
        side = strategy.scheduler_side(
            options["url"],
            _settings(options),
            hooks,
            rng=random.Random(options["seed"]),
        )
        counts = count_statements(side.gs.database, options["latency_s"])
        room = metrics.room_check(strategy, options)
        profiler = None
        if options.get("profile_path") and index == 0:
            profiler = cProfile.Profile()
        barrier.wait(RESULT_TIMEOUT)
        if profiler is not None:
            clocks = (time.perf_counter(), time.process_time())
            profiler.enable()
        for amount in stream:
            instance_uuid = str(uuid.uuid4())
            begun = time.monotonic()
            conflicts = side.conflicts
            started = time.perf_counter()
            if strategy.retries_on_reject:
                placed = _place_with_retries(
                    side,
                    amount,
                    instance_uuid,
                    compute_queues,
                    host_owner,
                    index,
                    reply_queue,
                )
            else:
                destination = side.place(amount, instance_uuid)
                placed = destination is not None
                if placed:
                    host, node = destination
                    compute_queues[host_owner[host]].put(
                        (instance_uuid, host, node, amount, None)
                    )
            result["latencies"].append(time.perf_counter() - started)
            result["placed" if placed else "no_valid_host"] += 1
            if placed:
                result["placed_vcpus"] += amount.vcpus
                by_size = result["placed_by_vcpus"]
                by_size[amount.vcpus] = by_size.get(amount.vcpus, 0) + 1
            else:
                result["nvh_conflicts"] += side.conflicts - conflicts
            # nvh_with_room: a fresh read after each NoValidHost, on its own
            # uncounted connection; metrics takes its time off the clock.
            # Room a compute host freed after the request began is room the
            # answer could not have seen: those hosts are left out, asked
            # for after the read, since a release that began after the
            # answer may have committed before the read.
            if not placed:
                checked = time.perf_counter()
                fitting = room(amount)
                result["nvh_with_room"] += bool(
                    fitting - releases.since(begun)
                )
                result["nvh_check_s"] += time.perf_counter() - checked
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(options["profile_path"])
            profiles.write_clocks(
                options["profile_path"],
                wall_s=time.perf_counter() - clocks[0],
                cpu_s=time.process_time() - clocks[1],
            )
        result.update(counts)
        result["attempts"] = side.attempts
        result["conflicts"] = side.conflicts
        # Linux reports the peak resident set size in KiB.
        result["rss_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    except Exception:
        result["errors"].append(traceback.format_exc())
    results.put(("scheduler", result))


def _place_with_retries(
    side, amount, instance_uuid, compute_queues, host_owner, index, reply_queue
):
    ignore = set()
    for _ in range(strategies.MAX_ATTEMPTS):
        destination = side.choose(amount, ignore)
        if destination is None:
            return False
        host, node = destination
        compute_queues[host_owner[host]].put(
            (instance_uuid, host, node, amount, index)
        )
        if reply_queue.get(timeout=RESULT_TIMEOUT):
            return True
        side.conflicts += 1
        ignore.add(host)
    return False


def _check_alive(schedulers, computes):
    """Raise once the run cannot end: a compute process has died (a
    scheduler would wait for its answers), or no scheduler process is
    left to put a result.  A process that dies puts nothing; its
    traceback is on stderr."""
    for process in computes:
        if process.exitcode not in (None, 0):
            raise RuntimeError(
                "a compute process died (exit code %s)" % process.exitcode
            )
    if not any(p.is_alive() for p in schedulers):
        raise RuntimeError("a scheduler process died without a result")


def _next_result(results, processes, timeout=RESULT_TIMEOUT):
    """The next ``(kind, result)`` put on ``results``; a RuntimeError
    once none of ``processes`` is alive to put one, or after
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return results.get(timeout=0.2)
        except queue_module.Empty:
            pass
        if not any(p.is_alive() for p in processes):
            # NOTE: a process's result is in the pipe before it exits.
            try:
                return results.get(timeout=1.0)
            except queue_module.Empty:
                raise RuntimeError(
                    "a compute process died without a result (exit codes "
                    "%s)" % [p.exitcode for p in processes]
                ) from None
        if time.monotonic() > deadline:
            raise RuntimeError(
                "no result from the compute processes in %d s" % timeout
            )


def compute_process(strategy_name, options, work, replies, results, releases):
    logging.disable(logging.WARNING)
    strategy = strategies.STRATEGIES[strategy_name]
    result = {"claimed": 0, "rejected": 0, "released": 0, "errors": []}
    try:
        side = strategy.compute_side(options["url"], _settings(options))
        counts = count_statements(side.gs.database, options["latency_s"])
        rng = random.Random(options["seed"])
        while True:
            item = work.get()
            if item is STOP:
                break
            instance_uuid, host, node, amount, reply = item
            if options["build_delay_ms"]:
                time.sleep(rng.uniform(0, options["build_delay_ms"]) / 1000.0)
            accepted = side.claim(instance_uuid, host, node, amount)
            result["claimed" if accepted else "rejected"] += 1
            if reply is not None:
                replies[reply].put(accepted)
            if accepted and rng.random() < options["churn"]:
                # NOTE: marked before (a read racing the release) and
                # after (a release that began before the request and
                # committed after its fresh read).
                releases.mark(host)
                if side.gs.release(instance_uuid, host, node):
                    result["released"] += 1
                releases.mark(host)
        result.update(counts)
    except Exception:
        result["errors"].append(traceback.format_exc())
    results.put(("compute", result))


class Releases:
    """When compute processes last released an instance on each host, on
    the machine's monotonic clock, shared by every process of a run."""

    def __init__(self, ctx, names):
        self.names = list(names)
        self._index = {name: n for n, name in enumerate(self.names)}
        self._at = ctx.Array("d", len(self.names), lock=False)

    def mark(self, host):
        """Called before the release and after it, so that no release in
        flight at any moment of a request is missed."""
        self._at[self._index[host]] = time.monotonic()

    def since(self, moment):
        """Hosts with a release marked at or after ``moment``."""
        return {
            name
            for name, at in zip(self.names, self._at)
            if at and at >= moment
        }


def reset(database, workload):
    """Bring the schema to head, empty the tables and add the workload's
    hosts."""
    gs = api.GrantScheduler(database)
    gs.upgrade_schema()
    baselines.reset(
        database, workload.host_names(), api.Capacity(workload.capacity)
    )
    return gs


def run(strategy_name, workload, schedulers, options, progress=None):
    """One run; returns the raw counts for ``metrics.summarise``."""
    database = api.Database(options["url"])
    service = None
    processes = []
    try:
        gs = reset(database, workload)
        # A strategy with a service of its own (placement-api) starts it for
        # this run; the run's processes then connect to the service's URL.
        service = _start_service(strategy_name, workload, options)
        if service is not None:
            options = dict(options, **service.options)
        stream = workload.stream(options["seed"])
        names = workload.host_names()
        host_owner = {name: n % COMPUTES for n, name in enumerate(names)}
        ctx = multiprocessing.get_context("spawn")
        work = [ctx.Queue() for _ in range(COMPUTES)]
        results = ctx.Queue()
        barrier = ctx.Barrier(schedulers + 1)
        replies = [ctx.Queue() for _ in range(schedulers)]
        releases = Releases(ctx, names)
        computes = [
            ctx.Process(
                target=compute_process,
                args=(
                    strategy_name,
                    dict(options, seed=n),
                    work[n],
                    replies,
                    results,
                    releases,
                ),
            )
            for n in range(COMPUTES)
        ]
        if options.get("profile_dir"):
            options = dict(
                options,
                profile_path=profiles.path(
                    options["profile_dir"],
                    strategy_name,
                    workload.name,
                    workload.hosts,
                    schedulers,
                    options["seed"],
                ),
            )
        procs = [
            ctx.Process(
                target=scheduler_process,
                args=(
                    strategy_name,
                    dict(options, seed=options["seed"] * 1000 + n),
                    stream[n::schedulers],
                    work,
                    host_owner,
                    n,
                    replies[n],
                    results,
                    barrier,
                    releases,
                ),
            )
            for n in range(schedulers)
        ]
        processes += computes + procs
        for process in processes:
            process.start()
        # NOTE: the clock starts once every scheduler process has imported
        # and built its side, so start-up is not counted as scheduling.
        barrier.wait(START_TIMEOUT)
        cpu = metrics.MachineCpu()
        cpu.start()
        started = time.perf_counter()
        overcommitted = set()
        scheduler_results = []
        compute_results = []
        checkpoints = 0
        while len(scheduler_results) < schedulers:
            overcommitted |= _overcommitted(gs, service)
            checkpoints += 1
            try:
                kind, result = results.get(timeout=0.2)
            except queue_module.Empty:
                _check_alive(procs, computes)
                continue
            if kind == "compute":
                # A compute process ended early (its error is in it).
                compute_results.append(result)
                continue
            scheduler_results.append(result)
            if progress:
                progress(len(scheduler_results), schedulers)
        elapsed = time.perf_counter() - started
        cpu_busy = cpu.share()
        for queue in work:
            queue.put(STOP)
        while len(compute_results) < COMPUTES:
            compute_results.append(_next_result(results, computes)[1])
        for process in computes + procs:
            process.join(60)
        overcommitted |= _overcommitted(gs, service, final=True)
        raw = {
            "schedulers": scheduler_results,
            "computes": compute_results,
            "elapsed_s": elapsed,
            "cpu_busy": cpu_busy,
            "overcommitted_hosts": len(overcommitted),
            "checkpoints": checkpoints,
        }
        if service is not None:
            service, running = None, service
            raw.update(running.stop())
        return raw
    finally:
        # NOTE: a run that failed leaves no process waiting for work or
        # answers that will not come (the interpreter would wait for it).
        for process in processes:
            if process.is_alive():
                process.terminate()
                process.join(10)
        if service is not None:
            service.stop()
        database.dispose()


def _start_service(strategy_name, workload, options):
    start = getattr(
        strategies.STRATEGIES[strategy_name], "start_service", None
    )
    return start(workload, options) if start else None


def _overcommitted(gs, service=None, final=False):
    if service is not None:
        return service.overcommitted(final=final)
    return {v.host for v in gs.check() if v.invariant == "I1"}


def commit_ceiling(url, seconds=1.0):
    """The database's raw single-row commit rate, measured now."""
    database = api.Database(url)
    try:
        return baselines.commit_ceiling(database, seconds)
    finally:
        database.dispose()
