"""Scheduler and compute process bodies shared by the multi-process tests
(stress, faults, Galera), started with spawn.

Each process builds its own ``GrantScheduler`` after it starts, as a forked
nova-scheduler worker would (H9), with the product's default
settings, and reports through one event queue:

``("answered", name, instance uuid)``
    a scheduler answered a build;
``("started", name, build)`` / ``("claimed" | "rejected", name, uuid)``
    a compute began and ended a claim (the fault suite redelivers the
    builds a killed compute started and never ended, as an RPC layer that
    saw no acknowledgement would);
``("result", name, result)``
    the process's totals, once, at the end.

A process may be told to SIGKILL itself at an exact protocol step (an
injection point of ``grant_scheduler.injection``).  With
``tolerate_db_errors`` a process treats a database that is away as a
production service would: the request fails after the library's own
retries, is counted, and the process goes on with the next one.
"""

import logging
import multiprocessing
import os
import random
import signal
import time
import traceback
import uuid

STOP = None


def kill(processes):
    """SIGKILL what is still running, and reap it (a test's cleanup)."""
    for process in processes:
        if process.is_alive():
            process.kill()
        process.join(10)


def run_together(testcase, target, url, args_list, timeout):
    """Start one spawned process per ``args`` of ``args_list``, running
    ``target(url, barrier, *args, results)`` and held at one barrier so
    that they race from the same moment; return what each puts on
    ``results``, in order of arrival.  Processes left running are killed
    at the test's cleanup."""
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(len(args_list))
    results = ctx.Queue()
    processes = [
        ctx.Process(target=target, args=(url, barrier, *args, results))
        for args in args_list
    ]
    for process in processes:
        process.start()
    testcase.addCleanup(kill, processes)
    found = [results.get(timeout=timeout) for _ in processes]
    for process in processes:
        process.join(timeout)
    return found


def _gs(url, name, hooks):
    """``url`` is a URL, or ``(url, engine options)``."""
    from grant_scheduler import api
    from grant_scheduler.db import api as db_api

    logging.disable(logging.CRITICAL)
    url, options = url if isinstance(url, tuple) else (url, {})
    return api.GrantScheduler(
        db_api.Database(url, **options), name=name, hooks=hooks
    )


def _die_at(hooks, point, count, threshold):
    """SIGKILL this process at ``point`` once ``count()`` reaches
    ``threshold``."""

    def maybe_die(**info):
        if count() >= threshold:
            os.kill(os.getpid(), signal.SIGKILL)

    hooks.on(point, maybe_die)


def _unavailable():
    from grant_scheduler import exception

    return exception.DatabaseUnavailable


def amount_of(flavour):
    """A flavour's ``Resources``: ``(vCPU, RAM, disk)``, and optionally a
    fourth item of ``(class, amount)`` pairs (a tuple, so that flavours
    still compare and hash)."""
    from grant_scheduler import api

    classes = dict(flavour[3]) if len(flavour) > 3 else {}
    return api.Resources(*flavour[:3], **classes)


def scheduler_process(
    name,
    url,
    flavours,
    seed,
    max_requests,
    compute_queues,
    host_owner,
    events,
    kill_point=None,
    kill_on_request=None,
    tolerate_db_errors=True,
):
    """Schedule random flavours until the smallest no longer fits."""
    from grant_scheduler import api
    from grant_scheduler import injection

    result = {
        "name": name,
        "requests": 0,
        "placed": 0,
        "placed_after_db_error": 0,
        "no_valid_host": [],
        "db_errors": 0,
        "errors": [],
    }
    tolerated = _unavailable() if tolerate_db_errors else ()
    try:
        hooks = injection.Hooks()
        gs = _gs(url, name, hooks)
        if kill_point is not None:
            _die_at(
                hooks, kill_point, lambda: result["requests"], kill_on_request
            )
        rng = random.Random(seed)
        smallest = min(flavours)
        while result["requests"] < max_requests:
            flavour = rng.choice(flavours)
            result["requests"] += 1
            instance_uuid = str(uuid.uuid4())
            try:
                [selection] = gs.schedule(
                    resources=amount_of(flavour),
                    instance_uuids=[instance_uuid],
                )
            except api.NoValidHost:
                result["no_valid_host"].append(tuple(flavour))
                if flavour == smallest:
                    break
                continue
            except tolerated:
                result["db_errors"] += 1
                time.sleep(0.2)
                continue
            result["placed"] += 1
            if result["db_errors"]:
                result["placed_after_db_error"] += 1
            events.put(("answered", name, instance_uuid))
            compute_queues[host_owner[selection.host]].put(
                (instance_uuid, selection.host, selection.node, flavour)
            )
        result["counters"] = vars(gs.counters)
    except Exception:
        result["errors"].append(traceback.format_exc())
    result["finished_at"] = time.time()
    events.put(("result", name, result))


def compute_process(
    name,
    url,
    queue,
    events,
    kill_on_claim=None,
    backlog=(),
    build_delay=0.0,
    tolerate_db_errors=True,
):
    """Claim each build after up to ``build_delay`` seconds; SIGKILL inside
    the ``kill_on_claim``-th claim.

    ``backlog``: builds redelivered from a dead predecessor, done first.
    """
    from grant_scheduler import api
    from grant_scheduler import injection

    result = {
        "name": name,
        "claimed": [],
        "rejected": [],
        "db_errors": 0,
        "errors": [],
    }
    tolerated = _unavailable() if tolerate_db_errors else ()
    try:
        hooks = injection.Hooks()
        gs = _gs(url, name, hooks)
        if kill_on_claim is not None:
            _die_at(
                hooks,
                "claim_written",
                lambda: len(result["claimed"]) + 1,
                kill_on_claim,
            )
        rng = random.Random(name)
        backlog = list(backlog)
        while True:
            item = backlog.pop(0) if backlog else queue.get()
            if item is STOP:
                break
            instance_uuid, host, node, flavour = item
            events.put(("started", name, item))
            time.sleep(rng.uniform(0, build_delay))
            outcome = None
            while outcome is None:
                try:
                    gs.claim(instance_uuid, host, node, amount_of(flavour))
                    outcome = "claimed"
                    result["claimed"].append((instance_uuid, host, node))
                except api.ClaimRejected as exc:
                    # H5: the grant expired while the database was away and
                    # the host has no room now: the build is rescheduled.
                    outcome = "rejected"
                    result["rejected"].append(str(exc))
                except tolerated:
                    result["db_errors"] += 1
                    time.sleep(0.2)
            events.put((outcome, name, instance_uuid))
    except Exception:
        result["errors"].append(traceback.format_exc())
    events.put(("result", name, result))
