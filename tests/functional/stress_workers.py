"""Process bodies for the multi-process stress test (started with spawn).

Each process builds its own ``GrantScheduler`` after it starts, as a forked
nova-scheduler worker would (DESIGN H9), and reports one result dict.
"""

import logging
import random
import time
import traceback
import uuid

STOP = None


def _gs(url, settings):
    from grant_scheduler import api

    logging.disable(logging.WARNING)
    return api.GrantScheduler.from_url(url, settings=api.Settings(**settings))


def scheduler_process(
    name,
    url,
    settings,
    flavours,
    seed,
    max_requests,
    compute_queues,
    host_owner,
    results,
):
    """Schedule random flavours until the smallest no longer fits."""
    from grant_scheduler import api

    result = {
        "name": name,
        "requests": 0,
        "placed": 0,
        "no_valid_host": [],
        "errors": [],
    }
    try:
        gs = _gs(url, settings)
        gs.scheduler.name = name
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
                result["no_valid_host"].append(flavour)
                if flavour == smallest:
                    break
                continue
            result["placed"] += 1
            compute_queues[host_owner[selection.host]].put(
                (instance_uuid, selection.host, selection.node, flavour)
            )
        result["counters"] = vars(gs.counters)
    except Exception:
        result["errors"].append(traceback.format_exc())
    results.put(result)


def compute_process(name, url, settings, queue, build_delay, results):
    """Claim what the schedulers send, after a random build delay."""
    from grant_scheduler import api

    result = {"name": name, "claimed": [], "rejected": [], "errors": []}
    try:
        gs = _gs(url, settings)
        rng = random.Random(name)
        while True:
            item = queue.get()
            if item is STOP:
                break
            instance_uuid, host, node, flavour = item
            time.sleep(rng.uniform(0, build_delay))
            try:
                gs.claim(instance_uuid, host, node, api.Resources(*flavour))
                result["claimed"].append((instance_uuid, host, node))
            except api.ClaimRejected as exc:
                result["rejected"].append(str(exc))
    except Exception:
        result["errors"].append(traceback.format_exc())
    results.put(result)
