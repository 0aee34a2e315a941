"""The driver's ``host_manager``: Nova's own, consuming grants.

``GrantsHostManager`` is Nova's HostManager (aggregates, cells, instance
tracking, ``get_filtered_hosts`` and ``get_weighed_hosts`` all Nova's)
with three additions:

* the instance-info calls Nova's scheduler manager forwards to it
  (``update_instance_info``, ``delete_instance_info``,
  ``sync_instance_info``) also claim and release in grant_scheduler
  (``instance_info.InstanceInfoClaims``), after Nova's own bookkeeping;
* ``host_states(context, spec_obj)`` reads Nova's HostStates on every
  release: ``get_host_states_by_uuids`` (20 and later) or
  ``get_all_host_states`` (13-19);
* ``instances_on_node`` reads a node's instances with their flavours from
  the node's cell, for claiming what a node already runs when
  grant_scheduler first sees it;
* ``get_filtered_hosts`` remembers, per request, which of Nova's enabled
  filters removed the last hosts (``rejected_by``), for the NoValidHost.

Only imported when Nova is.
"""

import weakref

from nova import context as nova_context
from nova import objects
from nova.scheduler import host_manager as nova_host_manager
from oslo_log import log as logging

from grant_scheduler.nova import claims
from grant_scheduler.nova import instance_info
from grant_scheduler.nova import view as nova_view

LOG = logging.getLogger(__name__)

_FLAVOR = ["flavor"]


class GrantsHostManager(nova_host_manager.HostManager):
    """Nova's HostManager whose instance info claims grants."""

    def __init__(self, grant_scheduler, nodes_of_host):
        """
        :param grant_scheduler: ``f()`` giving the ``GrantScheduler``.
        :param nodes_of_host: ``f(host)`` giving the host's node names.
        """
        self.instance_claims = instance_info.InstanceInfoClaims(
            grant_scheduler, nodes_of_host
        )
        self._rejected_by = weakref.WeakKeyDictionary()
        super().__init__()

    # -- why no host passed -----------------------------------------------

    def get_filtered_hosts(self, hosts, spec_obj, index=0):
        hosts = list(hosts)
        passed = list(super().get_filtered_hosts(hosts, spec_obj, index))
        if hosts and not passed:
            name = nova_view.rejecting_filter(self, hosts, spec_obj, index)
            if name is not None:
                self._rejected_by[spec_obj] = name
        return passed

    def rejected_by(self, spec_obj):
        """The name of Nova's filter that removed the last hosts of
        ``spec_obj``'s request, or None."""
        return self._rejected_by.get(spec_obj)

    # -- reading Nova's view ----------------------------------------------

    def host_states(self, context, spec_obj=None):
        """Nova's HostStates of every compute node, on any release."""
        by_uuids = getattr(self, "get_host_states_by_uuids", None)
        if by_uuids is not None:
            return list(by_uuids(context, None, spec_obj))
        return list(self.get_all_host_states(context))

    def _cell_context(self, context, host):
        # NOTE: Nova's HostManager finds a host's cell itself from 19 on;
        # 18 and older have only the host mapping.
        find = getattr(self, "_get_cell_mapping_for_host", None)
        if find is not None:
            cell = find(context, host)
        else:
            cell = objects.HostMapping.get_by_host(context, host).cell_mapping
        return nova_context.target_cell(context, cell)

    def instances(self, context, host, instance_uuids):
        """``host``'s instances among ``instance_uuids``, with flavours."""
        with self._cell_context(context, host) as cctxt:
            found = objects.InstanceList.get_by_filters(
                cctxt,
                {"uuid": list(instance_uuids), "host": host, "deleted": False},
                expected_attrs=_FLAVOR,
            )
            return list(found)

    def instances_on_node(self, context, host, node):
        """Every instance Nova places on ``host``/``node``, with flavours."""
        with self._cell_context(context, host) as cctxt:
            found = objects.InstanceList.get_by_host_and_node(
                cctxt, host, node, expected_attrs=_FLAVOR
            )
            return list(found)

    def instance_resources(self, context, instance):
        """An instance's ``Resources`` by its flavour, the flavour and
        root disk read from its cell when the instance lacks them."""
        host = getattr(instance, "host", None)
        if not instance.obj_attr_is_set("flavor") and host:
            loaded = self.instances(context, host, [instance.uuid])
            if loaded:
                instance = loaded[0]
        if not host:
            return claims.instance_resources(context, instance)
        with self._cell_context(context, host) as cctxt:
            return claims.instance_resources(
                cctxt, instance, is_bfv=self.is_volume_backed(cctxt, instance)
            )

    def is_volume_backed(self, context, instance):
        """Nova's answer, from the instance's block device mappings."""
        return claims.is_volume_backed(context, instance)

    # -- the instance info computes send ----------------------------------

    def update_instance_info(self, context, host_name, instance_info):
        super().update_instance_info(context, host_name, instance_info)
        self._guarded(
            self.instance_claims.updated,
            context,
            host_name,
            list(instance_info.objects),
            self.instance_resources,
        )

    def delete_instance_info(self, context, host_name, instance_uuid):
        super().delete_instance_info(context, host_name, instance_uuid)
        self._guarded(self.instance_claims.deleted, host_name, instance_uuid)

    def sync_instance_info(self, context, host_name, instance_uuids):
        super().sync_instance_info(context, host_name, instance_uuids)
        self._guarded(
            self.instance_claims.synced,
            context,
            host_name,
            list(instance_uuids),
            self.instances,
            self.instance_resources,
        )

    @staticmethod
    def _guarded(call, *args):
        """Nova's own bookkeeping is done; a failure here is only logged."""
        try:
            call(*args)
        except Exception:  # noqa: BLE001 - never fail Nova's RPC handler
            LOG.exception("grant_scheduler could not follow instance info")
