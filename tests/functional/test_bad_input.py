"""Bad input is refused with an error naming it, and writes nothing.

Each case checks the exception type a caller catches, that its message
names the offending value, and that the hosts, grants and claims tables
are exactly as they were before the call.
"""

import uuid

import sqlalchemy as sa

from grant_scheduler import api
from grant_scheduler import exception
from grant_scheduler import injection
from grant_scheduler.db import api as db_api
from grant_scheduler.db import migration
from grant_scheduler.db import models
from grant_scheduler.db import sa_compat
from grant_scheduler.resources import MAX_AMOUNT
from tests import base
from tests import proxy

CAPACITY = api.Capacity(api.Resources(8, 16384, 200))
U1 = "6a3c1f0e-56a1-4c3e-9d5e-0b8e2d6f1a27"
NOT_INTEGERS = [1.5, "2", None, True, [1]]
OUT_OF_RANGE = [-1, MAX_AMOUNT + 1, 10**30]


def snapshot(database):
    """Every row of the three tables, to compare before and after.

    A host's ``ticket`` counter and change stamp are left out: a grant that
    was written and then withdrawn leaves them moved on, by design.
    """
    host_columns = [
        c for c in models.hosts.c if c.name not in ("ticket", "updated_at")
    ]
    with database.connect() as conn:
        return {
            table.name: sorted(
                tuple(row) for row in conn.execute(sa_compat.select(*columns))
            )
            for table, columns in (
                (models.hosts, host_columns),
                (models.grants, list(models.grants.c)),
                (models.claims, list(models.claims.c)),
            )
        }


def new_uuid():
    return str(uuid.uuid4())


class BadInputTestCase(base.DatabaseTestCase):
    def setUp(self):
        super().setUp()
        self.gs = api.GrantScheduler(self.db)
        self.gs.report_host("cmp1", "cmp1", CAPACITY)
        self.gs.schedule(1, 1024, 10)

    def assertRefused(self, error, call, *fragments):
        before = snapshot(self.db)
        with self.assertRaises(error) as caught:
            call()
        for fragment in fragments:
            self.assertIn(fragment, str(caught.exception))
        self.assertEqual(before, snapshot(self.db), "something was written")
        return caught.exception


@base.with_scenarios(base.ALL_BACKENDS)
class Amounts(BadInputTestCase):
    def test_schedule_amounts(self):
        for position, name in enumerate(("vcpus", "memory_mb", "disk_gb")):
            for value in NOT_INTEGERS + OUT_OF_RANGE:
                amounts = [1, 1024, 10]
                amounts[position] = value
                with self.subTest(name=name, value=value):
                    self.assertRefused(
                        exception.InvalidResources,
                        lambda a=amounts: self.gs.schedule(*a),
                        "Invalid %s %r" % (name, value),
                    )
        # Nothing at all is no request; one class alone is (Ironic's).
        self.assertRefused(
            exception.InvalidResources,
            lambda: self.gs.schedule(0, 0, 0),
            "at least one amount must be above 0",
        )
        for name in ("custom_gold", "CUSTOM GOLD", "X" * 256):
            with self.subTest(resource_class=name):
                self.assertRefused(
                    exception.InvalidResources,
                    lambda n=name: self.gs.schedule(
                        resources=api.Resources.of({n: 1})
                    ),
                    "Invalid resource class",
                )

    def test_claim_amounts(self):
        for value in NOT_INTEGERS + OUT_OF_RANGE:
            with self.subTest(value=value):
                self.assertRefused(
                    exception.InvalidResources,
                    lambda v=value: self.gs.claim(
                        new_uuid(), "cmp1", "cmp1", api.Resources(v, 1024, 10)
                    ),
                    "Invalid VCPU %r" % (value,),
                )

    def test_report_amounts_and_ratios(self):
        for value in NOT_INTEGERS + OUT_OF_RANGE:
            with self.subTest(value=value):
                capacity = api.Capacity(api.Resources(8, value, 200))
                self.assertRefused(
                    exception.InvalidResources,
                    lambda c=capacity: self.gs.report_host("cmp2", "n", c),
                    "Invalid MEMORY_MB total %r" % (value,),
                )
        for ratio in (0, -1.0, "2", None, 1000000, True, float("nan")):
            with self.subTest(ratio=ratio):
                capacity = api.Capacity(
                    api.Resources(8, 1024, 200), ram_allocation_ratio=ratio
                )
                self.assertRefused(
                    exception.InvalidResources,
                    lambda c=capacity: self.gs.report_host("cmp2", "n", c),
                    "MEMORY_MB allocation_ratio",
                )

    def test_instance_counts_and_uuids(self):
        cases = [
            ({"num_instances": 0}, "at least 1"),
            ({"num_instances": -2}, "at least 1"),
            ({"num_instances": 1.5}, "not an integer"),
            ({"num_instances": True}, "not an integer"),
            ({"instance_uuids": []}, "no instance uuids"),
            ({"instance_uuids": [U1, U1]}, "repeat"),
            ({"num_instances": 3, "instance_uuids": [U1]}, "num_instances"),
            ({"instance_uuids": "abc"}, "list of UUIDs"),
            ({"instance_uuids": ["abc"]}, "not a UUID"),
            ({"instance_uuids": [U1 + "0000"]}, "not a UUID"),
            ({"force_hosts": "cmp1"}, "list of names"),
            ({"ignore_hosts": "cmp1"}, "list of names"),
            ({"force_nodes": "cmp1"}, "list of names"),
            ({"request_id": "r" * 300}, "at most 255"),
            ({"request_id": "r\x00"}, "control character"),
        ]
        for kwargs, fragment in cases:
            with self.subTest(**kwargs):
                self.assertRefused(
                    exception.InvalidRequest,
                    lambda k=kwargs: self.gs.schedule(1, 1024, 10, **k),
                    fragment,
                )


@base.with_scenarios(base.ALL_BACKENDS)
class Requests(BadInputTestCase):
    def test_larger_than_any_host(self):
        self.assertRefused(
            exception.NoValidHost,
            lambda: self.gs.schedule(9, 1024, 10),
            "no host has room",
        )

    def test_multi_instance_that_does_not_all_fit(self):
        self.assertRefused(
            exception.NoValidHost,
            lambda: self.gs.schedule(4, 4096, 10, num_instances=2),
        )

    def test_claim_on_unknown_host_or_node(self):
        for host, node in (("nowhere", "cmp1"), ("cmp1", "nowhere")):
            with self.subTest(host=host, node=node):
                self.assertRefused(
                    exception.UnknownHost,
                    lambda h=host, n=node: self.gs.claim(
                        new_uuid(), h, n, api.Resources(1, 1024, 10)
                    ),
                    "Host %s node %s" % (host, node),
                )

    def test_claim_without_uuid(self):
        self.assertRefused(
            exception.InvalidRequest,
            lambda: self.gs.claim("", "cmp1", "cmp1"),
            "instance uuid",
        )

    def test_unknown_forced_host_is_named(self):
        self.assertRefused(
            exception.NoValidHost,
            lambda: self.gs.schedule(1, 1024, 10, force_hosts=["ghost"]),
            "ghost",
            "not known",
        )

    def test_wrong_types(self):
        self.assertRefused(
            exception.InvalidRequest, lambda: self.gs.grants(host=5), "host 5"
        )
        self.assertRefused(
            exception.InvalidResources,
            lambda: self.gs.report_host("cmp1", "cmp1", (8, 1024, 10)),
            "Capacity",
        )
        self.assertRefused(
            exception.InvalidResources,
            lambda: self.gs.claim(new_uuid(), "cmp1", "cmp1", (1, 1, 1)),
            "Resources",
        )

    def test_names(self):
        for bad, fragment in (
            ("", "empty"),
            ("x" * 300, "at most 255"),
            ("cmp\x00", "control character"),
            ("cmp\n2", "control character"),
            ("cmp\x1b[2J", "control character"),
            (" cmp2", "white space"),
            ("cmp2 ", "white space"),
            (5, "not a string"),
        ):
            with self.subTest(name=bad):
                self.assertRefused(
                    exception.InvalidRequest,
                    lambda b=bad: self.gs.report_host(b, "n", CAPACITY),
                    fragment,
                )
                self.assertRefused(
                    exception.InvalidRequest,
                    lambda b=bad: self.gs.report_host("h", b, CAPACITY),
                    fragment,
                )

    def test_every_name_is_checked_by_one_rule(self):
        # The scheduler's own name and the request id reach the database
        # too; a lone surrogate cannot be encoded for any of them.
        bad_names = (
            ("s" * 256, "at most 255"),
            ("s\x1b[2J", "control character"),
            ("s\nt", "control character"),
            ("s\u2028t", "control character"),
            ("s\u202et", "control character"),
            ("h\ud800", "surrogate"),
            ("\u3000s", "white space"),
        )
        for bad, fragment in bad_names:
            with self.subTest(name=bad):
                for call in (
                    lambda b=bad: api.GrantScheduler(self.db, name=b),
                    lambda b=bad: self.gs.report_host(b, "n", CAPACITY),
                    lambda b=bad: self.gs.report_host("h", b, CAPACITY),
                    lambda b=bad: self.gs.register_host("h", b, CAPACITY),
                    lambda b=bad: self.gs.delete_host(b, "cmp1"),
                    lambda b=bad: self.gs.claim(U1, "cmp1", b),
                    lambda b=bad: self.gs.release(U1, b, "cmp1"),
                    lambda b=bad: self.gs.grants(host=b),
                    lambda b=bad: self.gs.schedule(1, 1024, 10, request_id=b),
                    lambda b=bad: self.gs.schedule(
                        1, 1024, 10, force_hosts=[b]
                    ),
                    lambda b=bad: self.gs.claim(
                        U1, "cmp1", "cmp1", request_id=b
                    ),
                ):
                    self.assertRefused(
                        exception.InvalidRequest, call, fragment
                    )
        # The longest names that fit are stored and read back whole, in
        # one-byte and in four-byte characters.
        for longest in ("s" * 255, "\U0001f680" * 255):
            gs = api.GrantScheduler(self.db, name=longest)
            gs.report_host(longest, longest, CAPACITY)
            [selection] = gs.schedule(
                1, 1024, 10, force_hosts=[longest], request_id=longest
            )
            [row] = gs.grants(host=longest)
            self.assertEqual(
                (longest, longest), (row.scheduler, row.request_id)
            )
            self.assertEqual(
                (longest, longest), (selection.host, selection.node)
            )

    def test_instance_uuid_objects_are_taken(self):
        value = uuid.uuid4()
        [selection] = self.gs.schedule(1, 1024, 10, instance_uuids=[value])
        self.assertEqual(str(value), selection.instance_uuid)
        outcome = self.gs.claim(value, "cmp1", "cmp1", selection.resources)
        self.assertEqual("grant", outcome.how)
        self.assertRefused(
            exception.InvalidRequest,
            lambda: self.gs.claim("uuid-1", "cmp1", "cmp1"),
            "not a UUID",
        )


@base.with_scenarios(base.ALL_BACKENDS)
class ValuesEveryBackendStores(BadInputTestCase):
    def test_amounts_beyond_32_bits(self):
        big = api.Resources(4, 2**31 + 1024, 2**33)
        self.gs.report_host("big", "big", api.Capacity(big))
        [selection] = self.gs.schedule(
            1, 2**31, 2**32, force_hosts=["big"], instance_uuids=[U1]
        )
        self.gs.claim(
            U1,
            "big",
            "big",
            api.Resources(1, 2**31, 2**32),
        )
        report = [r for r in self.gs.hosts() if r.state.host == "big"][0]
        self.assertEqual(2**31, report.state.used.memory_mb)
        self.assertEqual([], self.gs.check())

    def test_names_compare_exactly_on_every_backend(self):
        # MariaDB's default collation folded case: 'cmp1' and 'CMP1' were
        # one host there and two on SQLite and PostgreSQL.
        self.gs.report_host("CMP1", "cmp1", CAPACITY)
        self.gs.report_host("cmp1", "CMP1", CAPACITY)
        names = sorted((r.state.host, r.state.node) for r in self.gs.hosts())
        self.assertEqual(
            [("CMP1", "cmp1"), ("cmp1", "CMP1"), ("cmp1", "cmp1")], names
        )

    def test_four_byte_characters_in_names(self):
        self.gs.report_host("rack-\U0001f680", "node-\u00e9", CAPACITY)
        [selection] = self.gs.schedule(
            1, 1024, 10, force_hosts=["rack-\U0001f680"]
        )
        self.assertEqual("node-\u00e9", selection.node)

    def test_duplicate_claim_and_release(self):
        [selection] = self.gs.schedule(1, 1024, 10, instance_uuids=[U1])
        first = self.gs.claim(U1, "cmp1", "cmp1", selection.resources)
        after_first = snapshot(self.db)
        again = self.gs.claim(U1, "cmp1", "cmp1", selection.resources)
        self.assertEqual("existing", again.how)
        self.assertEqual(first.grant_ticket, again.grant_ticket)
        self.assertEqual(after_first, snapshot(self.db))
        self.assertTrue(self.gs.release(U1, "cmp1", "cmp1"))
        after_release = snapshot(self.db)
        self.assertFalse(self.gs.release(U1, "cmp1", "cmp1"))
        self.assertEqual(after_release, snapshot(self.db))
        self.assertEqual([], self.gs.check())


class TestUrls(base.TestCase):
    def test_missing(self):
        for url in (None, ""):
            with self.assertRaises(exception.DatabaseConfigError) as caught:
                api.GrantScheduler.from_url(url)
            self.assertIn("no database URL", str(caught.exception))

    def test_malformed_keeps_the_password_out(self):
        with self.assertRaises(exception.DatabaseConfigError) as caught:
            api.GrantScheduler.from_url("u:hunter2@db.example.org/gs")
        self.assertNotIn("hunter2", str(caught.exception))
        self.assertIn("not usable", str(caught.exception))

    def test_unknown_driver(self):
        gs = api.GrantScheduler.from_url("nosuchdb://u:hunter2@h/db")
        with self.assertRaises(exception.DatabaseConfigError) as caught:
            gs.hosts()
        self.assertNotIn("hunter2", str(caught.exception))

    def test_unreachable_at_start(self):
        gs = api.GrantScheduler.from_url(
            "mysql+pymysql://u:hunter2@127.0.0.1:9/gs",
            settings=api.Settings(),
        )
        with self.assertRaises(exception.DatabaseUnavailable) as caught:
            gs.schedule(1, 1024, 10)
        self.assertIn("127.0.0.1:9", str(caught.exception))
        self.assertNotIn("hunter2", str(caught.exception))


class TestSchema(base.TestCase):
    def test_not_migrated(self):
        fixture = self.useFixture(
            base.DatabaseFixture("sqlite", migrate=False)
        )
        gs = api.GrantScheduler(fixture.database)
        with self.assertRaises(exception.SchemaNotMigrated) as caught:
            gs.schedule(1, 1024, 10)
        self.assertIn("db sync", str(caught.exception))
        with fixture.database.connect() as conn:
            self.assertEqual([], sa.inspect(conn).get_table_names())

    def test_newer_than_code(self):
        fixture = self.useFixture(base.DatabaseFixture("sqlite"))
        with fixture.database.connect() as conn:
            sa_compat.execute_text(
                conn, "UPDATE alembic_version SET version_num = 'f00dfeed0099'"
            )
            if hasattr(conn, "commit"):
                conn.commit()
        gs = api.GrantScheduler(db_api.Database(fixture.url))
        with self.assertRaises(exception.SchemaNewerThanCode) as caught:
            gs.report_host("cmp1", "cmp1", CAPACITY)
        self.assertIn("f00dfeed0099", str(caught.exception))
        with fixture.database.connect() as conn:
            self.assertEqual(
                0,
                conn.execute(
                    sa_compat.select(sa.func.count()).select_from(models.hosts)
                ).scalar(),
            )


@base.with_scenarios(base.SERVERS)
class DatabaseGoesAway(base.DatabaseTestCase):
    """The server vanishes inside a grant's transaction."""

    def test_mid_request(self):
        cut, through_proxy = proxy.through(
            sa_compat.make_url(self.db_fixture.url)
        )
        self.addCleanup(cut.stop)
        hooks = injection.Hooks()
        cutting = [True]

        def cut_the_connection(**info):
            if cutting:
                cut.stop()

        gs = api.GrantScheduler(db_api.Database(through_proxy), hooks=hooks)
        gs.report_host("cmp1", "cmp1", CAPACITY)
        before = snapshot(self.db)
        hooks.on("grant_inserted", cut_the_connection)
        with self.assertRaises(exception.DatabaseUnavailable) as caught:
            gs.schedule(1, 1024, 10)
        self.assertIn("127.0.0.1:%d" % cut.port, str(caught.exception))
        # The insert's transaction never committed: nothing partial.
        self.assertEqual(before, snapshot(self.db))
        # The server is back: the same object goes on, no restart needed.
        cutting.clear()
        cut.start()
        [selection] = gs.schedule(1, 1024, 10)
        self.assertEqual("cmp1", selection.host)
        self.assertEqual(
            migration.head_revision(), migration.current_revision(gs.database)
        )

    def test_ping_tries_once(self):
        # A probe of a database taken as down (the Nova adapters' outage)
        # must cost one connection attempt, not a transaction's retries.
        cut, through_proxy = proxy.through(
            sa_compat.make_url(self.db_fixture.url)
        )
        self.addCleanup(cut.stop)
        gs = api.GrantScheduler(db_api.Database(through_proxy))
        gs.ping()
        attempts = []
        sa.event.listen(
            gs.database.get_engine(),
            "do_connect",
            lambda *args: attempts.append(1),
        )
        cut.stop()
        with self.assertRaises(exception.DatabaseUnavailable):
            gs.ping()
        # (A transaction would retry a refused connection on MySQL some
        # thirty times.)
        self.assertLessEqual(len(attempts), 2)
        cut.start()
        gs.ping()
