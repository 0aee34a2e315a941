"""Grants of instances Nova has given up, withdrawn when Nova says so.

A grant holds its room until the compute consumes it, or until
``grant_ttl``.  Some instances never reach a compute: the conductor's
quota recheck sets them to ERROR without a host, a user deletes a server
while it is still a build request, a conductor fails between scheduling
and casting the build.  Nova's own records say so at once; waiting for
the TTL would answer NoValidHost where the stock scheduler places.

An instance has given up its grant when Nova's records show one of:

* no instance mapping (the API deleted the build request and its mapping);
* a mapping without a cell and no build request any more, read twice so
  that the conductor's create-map-delete sequence in between is not
  mistaken for a delete;
* no live instance in its cell (deleted), or one in ERROR with no host.

Only imported when Nova is.
"""

from nova import context as nova_context
from nova import exception as nova_exception
from nova import objects
from oslo_log import log as logging

from grant_scheduler import api

LOG = logging.getLogger(__name__)

LIVE = "won"
ERROR = "error"


def _in_cell(context, mapping, instance_uuid):
    with nova_context.target_cell(context, mapping.cell_mapping) as cctxt:
        try:
            instance = objects.Instance.get_by_uuid(
                cctxt, instance_uuid, expected_attrs=[]
            )
        except nova_exception.InstanceNotFound:
            return True
    return instance.vm_state == ERROR and not instance.host


def _mapping(context, instance_uuid):
    try:
        return objects.InstanceMapping.get_by_instance_uuid(
            context, instance_uuid
        )
    except nova_exception.InstanceMappingNotFound:
        return None


def given_up(context, instance_uuid):
    """True when Nova will never build ``instance_uuid`` where it was
    granted (see the module's docstring)."""
    mapping = _mapping(context, instance_uuid)
    if mapping is None:
        return True
    if mapping.cell_mapping is None:
        try:
            objects.BuildRequest.get_by_instance_uuid(context, instance_uuid)
            return False
        except nova_exception.BuildRequestNotFound:
            mapping = _mapping(context, instance_uuid)
            if mapping is None or mapping.cell_mapping is None:
                return True
    return _in_cell(context, mapping, instance_uuid)


class StaleGrants:
    """Finds and withdraws the live grants Nova has given up."""

    def __init__(self, grant_scheduler):
        """:param grant_scheduler: ``f()`` giving the ``GrantScheduler``."""
        self._gs = grant_scheduler

    def withdraw_on(self, context, host, node):
        """Withdraw the given-up grants on one node; how many."""
        return self._withdraw(
            context,
            [g for g in self._gs().grants(host=host) if g.node == node],
        )

    def withdraw_all(self, context):
        """Withdraw every given-up grant; how many (a periodic task)."""
        return self._withdraw(context, self._gs().grants())

    def _withdraw(self, context, grants):
        uuids = sorted(
            {g.instance_uuid for g in grants if g.state == LIVE} - {None}
        )
        withdrawn = 0
        for instance_uuid in uuids:
            if not given_up(context, instance_uuid):
                continue
            try:
                withdrawn += self._gs().withdraw_instance(instance_uuid)
            except api.GrantSchedulerError:
                LOG.warning(
                    "Could not withdraw the grant of %s, which Nova gave up",
                    instance_uuid,
                    exc_info=True,
                )
                continue
            LOG.info(
                "Withdrew the grant of %s: Nova has deleted it or set it to "
                "ERROR without a host",
                instance_uuid,
            )
        return withdrawn
