"""Multi-instance requests racing each other place every request that fits.

Eight OS processes each ask for three instances at once, started together
at a barrier, on twenty single-slot hosts (room for six of the requests),
against MariaDB and PostgreSQL with the product's defaults.  Round after
round: exactly six requests are placed and two answered NoValidHost, none
keeps a grant, and the hosts the failed requests left free are fewer than
one request needs (all-or-nothing kept, no NoValidHost with room).
"""

import uuid

from grant_scheduler import api
from tests import base
from tests import workers

PROCESSES = 8
PER_REQUEST = 3
HOSTS = 20
ROUNDS = 40
SLOT = api.Resources(1, 1024, 10)
WAIT = 300


def requester(url, barrier, rounds, results):
    import logging

    logging.disable(logging.CRITICAL)
    gs = api.GrantScheduler.from_url(url)
    outcomes = []
    for _ in range(rounds):
        barrier.wait(WAIT)
        uuids = [str(uuid.uuid4()) for _ in range(PER_REQUEST)]
        try:
            gs.schedule(resources=SLOT, instance_uuids=uuids)
            outcome = "placed"
        except api.NoValidHost:
            outcome = "no_valid_host"
        except Exception as exc:
            outcome = "%s: %s" % (type(exc).__name__, exc)
        # Every request of the round has ended: the round's free hosts
        # are what the failed requests saw last.
        barrier.wait(WAIT)
        free = sum(1 for r in gs.hosts() if r.state.fits(SLOT))
        barrier.wait(WAIT)
        if outcome == "placed":
            for instance in uuids:
                gs.withdraw_instance(instance)
        outcomes.append((outcome, free))
        barrier.wait(WAIT)
    results.put(outcomes)


@base.with_scenarios(base.SERVERS)
class RacingRequests(base.DatabaseTestCase):
    def test_every_request_that_fits_is_placed(self):
        gs = api.GrantScheduler(self.db)
        for number in range(HOSTS):
            name = "slot%02d" % number
            gs.report_host(name, name, api.Capacity(SLOT))
        per_process = workers.run_together(
            self,
            requester,
            self.db_fixture.url,
            [(ROUNDS,)] * PROCESSES,
            WAIT * ROUNDS,
        )
        fits = HOSTS // PER_REQUEST
        for number, round_ in enumerate(zip(*per_process)):
            outcomes = sorted(outcome for outcome, _ in round_)
            free = {free for _, free in round_}
            self.assertEqual(
                ["no_valid_host"] * (PROCESSES - fits) + ["placed"] * fits,
                outcomes,
                "round %d: free hosts after it %s" % (number, free),
            )
            self.assertEqual({HOSTS - fits * PER_REQUEST}, free)
        self.assertEqual([], gs.check(quiescent=True))
