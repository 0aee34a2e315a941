"""The driver's host manager keeps Nova's objects between requests and
rebuilds only what changed: every change Nova's own read would show still
reaches the filters and weighers."""

import time

from nova import context as nova_context
from nova import objects
from nova.scheduler import host_manager as nova_host_manager

from grant_scheduler.nova.scheduler import computes
from tests.nova22.in_nova import base


class TestKeptHostStates(base.GrantsTestBase):
    def host_states(self):
        manager = self.driver.host_manager
        context = nova_context.get_admin_context()
        return {hs.host: hs for hs in manager.host_states(context)}

    def service_id(self, host):
        [service] = [
            s
            for s in self.api.get_services()
            if s["host"] == host and s["binary"] == "nova-compute"
        ]
        return service["id"]

    def test_an_unchanged_node_keeps_its_objects_and_each_request_a_copy(
        self,
    ):
        first = self.host_states()
        second = self.host_states()
        kept = self.driver.host_manager._kept
        for host in self.HOSTS:
            self.assertIsNot(first[host], second[host])
            [(key, entry)] = [(k, e) for k, e in kept.items() if k[0] == host]
            self.assertIsNot(entry[0], second[host])
        compute_ids = {host: id(entry[1]) for (host, _), entry in kept.items()}
        self.host_states()
        self.assertEqual(
            compute_ids,
            {host: id(entry[1]) for (host, _), entry in kept.items()},
        )

    def test_a_claim_on_a_node_is_seen_by_the_next_request(self):
        before = self.host_states()
        server = self.boot()
        host = server["OS-EXT-SRV-ATTR:host"]
        after = self.host_states()
        self.assertEqual(
            before[host].free_ram_mb - base.FLAVOR["memory_mb"],
            after[host].free_ram_mb,
        )
        self.assertIn(server["id"], after[host].instances)
        [other] = [h for h in self.HOSTS if h != host]
        self.assertEqual(before[other].free_ram_mb, after[other].free_ram_mb)

    def test_a_disabled_service_is_filtered_out_and_back_when_enabled(self):
        self.api.put_service(self.service_id("host1"), {"status": "disabled"})
        for _ in range(base.SLOTS_PER_HOST):
            server = self.boot()
            self.assertEqual("host2", server["OS-EXT-SRV-ATTR:host"])
        self.boot(expected_state="ERROR")
        self.api.put_service(self.service_id("host1"), {"status": "enabled"})
        server = self.boot()
        self.assertEqual("host1", server["OS-EXT-SRV-ATTR:host"])

    def test_consumption_in_one_request_stays_in_its_copy(self):
        # A request's consumption (Nova's consume_from_request) changes its
        # own copy: the next request starts from Nova's records again.
        states = self.host_states()
        states["host1"].free_ram_mb -= 1000
        states["host1"].limits["made-up"] = 1
        again = self.host_states()
        self.assertEqual(
            states["host1"].free_ram_mb + 1000, again["host1"].free_ram_mb
        )
        self.assertNotIn("made-up", again["host1"].limits)

    def test_a_deleted_node_is_no_longer_kept(self):
        self.host_states()
        context = nova_context.get_admin_context()
        node = objects.ComputeNode.get_first_node_by_host_for_old_compat(
            context, "host2"
        )
        node.destroy()
        self.assertEqual({"host1"}, set(self.host_states()))
        self.assertEqual(
            {"host1"}, {host for host, _ in self.driver.host_manager._kept}
        )

    def cell_reader(self):
        [computes] = self.driver.host_manager._computes.values()
        return computes

    def test_a_request_reads_only_the_rows_that_changed(self):
        # Nova's own rows, stamped by Nova's own writes: after the first
        # read of every row, requests read what changed (the node a boot
        # claimed), and the rows that did not change keep their objects.
        self.host_states()
        server = self.boot()
        host = server["OS-EXT-SRV-ATTR:host"]
        [other] = [h for h in self.HOSTS if h != host]
        kept = self.driver.host_manager._kept
        before = {h: entry[1] for (h, _), entry in kept.items()}
        states = self.host_states()
        after = {h: entry[1] for (h, _), entry in kept.items()}
        self.assertIn(server["id"], states[host].instances)
        self.assertEqual(states[host].free_ram_mb, after[host].free_ram_mb)
        self.assertIs(before[other], after[other])
        self.assertEqual((1, 1), self.cell_reader().full_reads)

    def test_a_service_disabled_through_the_api_is_read_at_once(self):
        self.host_states()
        self.api.put_service(self.service_id("host1"), {"status": "disabled"})
        self.assertTrue(self.host_states()["host1"].service["disabled"])
        self.assertEqual((1, 1), self.cell_reader().full_reads)

    def test_the_loop_reads_every_row_before_a_request_finds_it_due(self):
        # Every read of every row (Nova's compute nodes and services, the
        # books' nodes) falls due within the loop's interval (1 s, the
        # default): the loop makes them, the next requests read what
        # changed.
        self.addCleanup(self.driver.stop)
        self.host_states()
        reader = self.cell_reader()
        books = self.driver.grant_scheduler._scheduler.view_cache
        books.refresh()
        due = time.monotonic() + 0.5
        reader._nodes.full_at = reader._services.full_at = due
        books._resync_at = due
        read = books.full_reads
        context = nova_context.get_admin_context()
        self.assertEqual(3, self.driver.refresh_views(context))
        self.assertEqual((2, 2), reader.full_reads)
        self.assertEqual(read + 1, books.full_reads)
        self.assertTrue(self.driver._refresher.running)
        time.sleep(0.5)
        server = self.boot()
        states = self.host_states()
        self.assertIn(
            server["id"], states[server["OS-EXT-SRV-ATTR:host"]].instances
        )
        self.assertEqual((2, 2), reader.full_reads)
        self.assertEqual(read + 1, books.full_reads)

    def test_the_start_builds_every_host_state_before_a_request(self):
        # A process that has read no cell yet (its start): the first pass
        # of the loop reads every row of each enabled cell and builds each
        # node's HostState, so the first request builds none and reads
        # only what changed.
        manager = self.driver.host_manager
        manager._computes.clear()
        manager._kept.clear()
        context = nova_context.get_admin_context()
        self.assertEqual(2, manager.read_due(context, 1.0))
        self.assertEqual(set(self.HOSTS), {host for host, _ in manager._kept})
        self.assertEqual((1, 1), self.cell_reader().full_reads)
        self.assertEqual(0, manager.read_due(context, 1.0))
        built = []
        build = manager._new_host_state
        manager._new_host_state = lambda *args: (
            built.append(args) or build(*args)
        )
        states = self.host_states()
        self.assertEqual([], built)
        self.assertEqual(set(self.HOSTS), set(states))
        for host in self.HOSTS:
            [entry] = [e for k, e in manager._kept.items() if k[0] == host]
            self.assertIsNot(entry[0], states[host])
        self.assertEqual((1, 1), self.cell_reader().full_reads)

    def test_a_heartbeat_reaches_the_host_state_kept(self):
        # What the database servicegroup driver writes every
        # report_interval, read at the next read of every service row:
        # the HostState kept is not made again, its copy of the service
        # is.
        self.host_states()
        kept = self.driver.host_manager._kept
        [before] = [e[0] for (h, _), e in kept.items() if h == "host1"]
        context = nova_context.get_admin_context()
        service = objects.Service.get_by_compute_host(context, "host1")
        service.report_count += 1
        service.save()
        seen = objects.Service.get_by_compute_host(context, "host1")
        self.cell_reader()._services.full_at = 0
        states = self.host_states()
        [after] = [e[0] for (h, _), e in kept.items() if h == "host1"]
        self.assertIs(before, after)
        # (The compute's own heartbeat may have come since.)
        self.assertGreaterEqual(
            states["host1"].service["report_count"], seen.report_count
        )
        self.assertGreaterEqual(
            states["host1"].service["last_seen_up"], seen.last_seen_up
        )
        # The rest as HostState.update(service=dict(service)) sets it.
        now = objects.Service.get_by_compute_host(context, "host1")
        self.assertIsInstance(
            states["host1"].service, nova_host_manager.ReadOnlyDict
        )
        beat = set(computes.HEARTBEAT)
        self.assertEqual(
            {k: v for k, v in dict(now).items() if k not in beat},
            {
                k: v
                for k, v in states["host1"].service.items()
                if k not in beat
            },
        )
        self.assertEqual(set(dict(now)), set(states["host1"].service))
