"""Several Nova scheduler processes and compute processes fill the hosts.

Each scheduler process has its own driver, loaded by stevedore, and a Nova
view that never sees a claim; each compute process claims through the
``build_instance`` hook.  Checked on MySQL: I1 at every checkpoint and at
the end, every multi-instance request placed whole or not at all, and every
granted build claimed by its grant.
"""

import multiprocessing
import queue as queue_module
import time

import sqlalchemy as sa

from grant_scheduler import api
from grant_scheduler.db import models
from tests import base
from tests.nova34 import concurrency_workers as workers

SCHEDULERS = 4
COMPUTES = 2
TIMEOUT = 600


@base.with_scenarios([("mysql", {"backend": "mysql"})])
class NovaPathFill(base.DatabaseTestCase):
    def test_fill(self):
        gs = api.GrantScheduler(self.db)
        names = workers.host_names()
        owner = {name: n % COMPUTES for n, name in enumerate(names)}
        ctx = multiprocessing.get_context("spawn")
        queues = [ctx.Queue() for _ in range(COMPUTES)]
        results = ctx.Queue()
        url = self.db_fixture.url
        computes = [
            ctx.Process(
                target=workers.compute_process,
                args=("compute%d" % n, url, queues[n], results),
            )
            for n in range(COMPUTES)
        ]
        schedulers = [
            ctx.Process(
                target=workers.scheduler_process,
                args=("scheduler%d" % n, url, n, 200, queues, owner, results),
            )
            for n in range(SCHEDULERS)
        ]
        for process in computes + schedulers:
            process.start()
        self.addCleanup(_kill, computes + schedulers)

        violations, checkpoints, done = [], 0, []
        deadline = time.monotonic() + TIMEOUT
        while len(done) < SCHEDULERS:
            self.assertLess(time.monotonic(), deadline, "schedulers hung")
            violations.extend(gs.check())
            checkpoints += 1
            try:
                done.append(results.get(timeout=0.1))
            except queue_module.Empty:
                pass
        for build_queue in queues:
            build_queue.put(workers.STOP)
        built = [results.get(timeout=TIMEOUT) for _ in range(COMPUTES)]
        for process in computes + schedulers:
            process.join(60)
        violations.extend(gs.check())

        for outcome in done + built:
            self.assertEqual([], outcome["errors"], outcome["name"])
        self.assertGreater(checkpoints, 1)
        self.assertEqual([], violations, "I1 violated")

        placed = [u for o in done for request in o["placed"] for u in request]
        failed = [u for o in done for request in o["failed"] for u in request]
        multi = [r for o in done for r in o["placed"] if len(r) > 1]
        self.assertTrue(placed and failed and multi, "not a real fill")
        # Every granted build claimed by its grant, never rejected.
        self.assertEqual([], [r for o in built for r in o["rejected"]])
        self.assertCountEqual(placed, [u for o in built for u in o["built"]])
        with self.db.reader() as conn:
            claims = {
                row.instance_uuid: row.grant_ticket
                for row in conn.execute(sa.select(models.claims))
            }
            grants = conn.execute(
                sa.select(models.grants.c.instance_uuid, models.grants.c.state)
            ).all()
        self.assertCountEqual(placed, claims)
        self.assertTrue(all(t is not None for t in claims.values()))
        # All or nothing: a failed request left no grant and no claim.
        self.assertEqual([], [u for u in failed if u in claims])
        left = {uuid for uuid, state in grants if state == "won"}
        self.assertEqual(set(), left & set(failed))
        # I2 once quiet: capacity a failed multi-instance request held for a
        # moment is back; one scheduler takes what is left of it, and then
        # no host has room for the smallest flavour.
        smallest = api.Resources(*min(workers.FLAVOURS))
        with self.assertRaises(api.NoValidHost):
            for _ in range(len(names) * 8):
                gs.schedule(*smallest.as_dict().values())
        self.assertEqual(
            [], [r.state.host for r in gs.hosts() if r.state.fits(smallest)]
        )
        self.assertEqual([], gs.check())


def _kill(processes):
    for process in processes:
        if process.is_alive():
            process.kill()
