"""Process bodies for the fault-injection suite (started with spawn).

A scheduler or compute process may be told to SIGKILL itself at an exact
protocol step (an injection point of ``grant_scheduler.injection``).  Every
process treats a database that is away as a production service would: the
request fails (after the library's own retries), it is counted, and the
process goes on with the next one.  Events go to one queue so the test can
redeliver a dead compute's unfinished builds, as an RPC layer that never
saw an acknowledgement would.
"""

import logging
import os
import random
import signal
import time
import traceback
import uuid

STOP = None


def _gs(url, settings, hooks=None):
    """``url`` is a URL, or ``(url, engine options)``."""
    from grant_scheduler import api
    from grant_scheduler import injection
    from grant_scheduler.db import api as db_api

    logging.disable(logging.CRITICAL)
    url, options = url if isinstance(url, tuple) else (url, {})
    return api.GrantScheduler(
        db_api.Database(url, **options),
        settings=api.Settings(**settings),
        hooks=hooks or injection.Hooks(),
    )


def _die_at(hooks, point, count, threshold):
    """SIGKILL this process at ``point`` once ``count()`` reaches
    ``threshold``."""

    def maybe_die(**info):
        if count() >= threshold:
            os.kill(os.getpid(), signal.SIGKILL)

    hooks.on(point, maybe_die)


def scheduler_process(
    name,
    url,
    settings,
    flavours,
    seed,
    max_requests,
    compute_queues,
    host_owner,
    events,
    kill_point=None,
    kill_on_request=None,
):
    """Schedule random flavours until the smallest no longer fits."""
    from grant_scheduler import api
    from grant_scheduler import exception
    from grant_scheduler import injection

    result = {
        "name": name,
        "requests": 0,
        "placed": 0,
        "placed_after_db_error": 0,
        "no_valid_host": 0,
        "db_errors": 0,
        "errors": [],
    }
    try:
        hooks = injection.Hooks()
        gs = _gs(url, settings, hooks)
        gs.scheduler.name = name
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
                    *flavour, instance_uuids=[instance_uuid]
                )
            except api.NoValidHost:
                result["no_valid_host"] += 1
                if flavour == smallest:
                    break
                continue
            except exception.DatabaseUnavailable:
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
    except Exception:
        result["errors"].append(traceback.format_exc())
    result["finished_at"] = time.time()
    events.put(("result", name, result))


def compute_process(
    name, url, settings, queue, events, kill_on_claim=None, backlog=()
):
    """Claim each build; SIGKILL inside the ``kill_on_claim``-th claim.

    ``backlog``: builds redelivered from a dead predecessor, done first.
    """
    from grant_scheduler import api
    from grant_scheduler import exception
    from grant_scheduler import injection

    result = {
        "name": name,
        "claimed": 0,
        "rejected": 0,
        "db_errors": 0,
        "errors": [],
    }
    try:
        hooks = injection.Hooks()
        gs = _gs(url, settings, hooks)
        if kill_on_claim is not None:
            _die_at(
                hooks,
                "claim_written",
                lambda: result["claimed"] + 1,
                kill_on_claim,
            )
        backlog = list(backlog)
        while True:
            item = backlog.pop(0) if backlog else queue.get()
            if item is STOP:
                break
            instance_uuid, host, node, flavour = item
            events.put(("started", name, item))
            outcome = None
            while outcome is None:
                try:
                    gs.claim(
                        instance_uuid, host, node, api.Resources(*flavour)
                    )
                    outcome = "claimed"
                except api.ClaimRejected:
                    # H5: the grant expired while the database was away and
                    # the host has no room now: the build is rescheduled.
                    outcome = "rejected"
                except exception.DatabaseUnavailable:
                    result["db_errors"] += 1
                    time.sleep(0.2)
            result[outcome] += 1
            events.put((outcome, name, instance_uuid))
    except Exception:
        result["errors"].append(traceback.format_exc())
    events.put(("result", name, result))
