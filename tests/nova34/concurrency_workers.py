"""Process bodies for the Nova-path concurrency test (spawned, not forked).

A scheduler process loads the driver the way Nova's SchedulerManager does
and answers multi-instance requests with Queens-style calls; a compute
process owns some hosts and runs each build through the ``build_instance``
hook, as Nova's ComputeManager did.  Nova's view of the hosts never changes
(its records are the fill's starting point), so only the grants keep the
schedulers from promising the same room twice.
"""

import random
import traceback
import uuid

from grant_scheduler.nova import compat

STOP = "stop"
HOSTS = 12
CAPACITY = (8, 16384, 200)
FLAVOURS = [(1, 2048, 20), (2, 4096, 40), (4, 8192, 80)]


def host_names():
    return ["nova%02d" % n for n in range(HOSTS)]


def _nova(url):
    from tests.nova34 import base as nova_base

    fixture = nova_base.ConfFixture(
        url,
        filter_scheduler={
            "weight_classes": ["nova.scheduler.weights.ram.RAMWeigher"]
        },
    )
    fixture.setUp()
    from tests.nova34 import fakes

    return fakes


def scheduler_process(
    name, url, seed, max_requests, compute_queues, owner, results
):
    from nova import exception as nova_exception
    from stevedore import driver as stevedore_driver

    fakes = _nova(url)
    outcome = {"name": name, "placed": [], "failed": [], "errors": []}
    try:
        cloud = fakes.NovaCloud()
        for host in host_names():
            cloud.add(host, *CAPACITY)
        driver = stevedore_driver.DriverManager(
            "nova.scheduler.driver", "grant_scheduler", invoke_on_load=True
        ).driver
        driver.host_manager = fakes.HostManager(cloud, driver)
        rng = random.Random(seed)
        context = fakes.context()
        for _ in range(max_requests):
            flavour = fakes.flavor(*rng.choice(FLAVOURS))
            count = rng.randint(1, 3)
            uuids = [str(uuid.uuid4()) for _ in range(count)]
            spec = fakes.request_spec(flavour, num_instances=count)
            try:
                answer = driver.select_destinations(
                    context, spec, uuids, None, None, None, False
                )
            except nova_exception.NoValidHost:
                outcome["failed"].append(uuids)
                if count == 1 and flavour.vcpus == min(FLAVOURS)[0]:
                    break  # not even the smallest single instance fits
                continue
            outcome["placed"].append(uuids)
            for instance_uuid, [selection] in zip(uuids, answer):
                host = selection.service_host
                compute_queues[owner[host]].put(
                    (
                        instance_uuid,
                        host,
                        selection.nodename,
                        flavour.vcpus,
                        flavour.memory_mb,
                        flavour.root_gb,
                    )
                )
    except Exception:  # noqa: BLE001 - reported to the test
        outcome["errors"].append(traceback.format_exc())
    results.put(outcome)


def compute_process(name, url, builds, results):
    fakes = _nova(url)
    from tests.nova34.compute import test_hooks

    outcome = {"name": name, "built": [], "rejected": [], "errors": []}
    managers = {}
    try:
        while True:
            item = builds.get()
            if item == STOP:
                break
            instance_uuid, host, node, vcpus, ram, disk = item
            manager = managers.setdefault(
                host, test_hooks.ComputeManager(host)
            )
            instance = fakes.instance(
                instance_uuid, fakes.flavor(vcpus, ram, disk), host, node
            )
            try:
                test_hooks.build(manager, instance, node)
                outcome["built"].append(instance_uuid)
            except compat.FatalHookException as exc:
                outcome["rejected"].append(str(exc))
    except Exception:  # noqa: BLE001 - reported to the test
        outcome["errors"].append(traceback.format_exc())
    results.put(outcome)
