"""Exceptions raised by grant_scheduler.

Each message says what was wrong, with the offending value, and what to do.
Messages never contain a database password (see ``urls.mask``).
"""


class GrantSchedulerError(Exception):
    """Base class: every error a caller of grant_scheduler may act on."""

    msg_fmt = "An unknown grant_scheduler error occurred."

    def __init__(self, message=None, **kwargs):
        self.kwargs = kwargs
        if message is None:
            message = self.msg_fmt % kwargs
        super().__init__(message)


class DatabaseConfigError(GrantSchedulerError):
    msg_fmt = (
        "The database URL %(url)s is not usable: %(reason)s. Set "
        "[grant_scheduler_database] connection (or "
        "GRANT_SCHEDULER_DATABASE_URL for alembic) to a URL such as "
        "mysql+pymysql://user:password@host/grant_scheduler."
    )


class DatabaseUnavailable(GrantSchedulerError):
    msg_fmt = (
        "Cannot connect to the database at %(url)s: %(reason)s. Check that "
        "the server is running and that the URL, user and password are right."
    )


class DatabaseError(GrantSchedulerError):
    """The database refused a statement, or a row kept changing under a
    write through every retry; nothing of the call was committed."""

    msg_fmt = (
        "The database at %(url)s did not complete the call: %(reason)s. "
        "Nothing of it was written; the call may be repeated."
    )


class SchemaNotMigrated(GrantSchedulerError):
    msg_fmt = (
        "The database at %(url)s is at schema revision %(current)s but this "
        "code needs %(head)s. Run 'grant-scheduler-manage db sync' (or "
        "'alembic upgrade head' from a checkout) first."
    )


class SchemaNewerThanCode(GrantSchedulerError):
    msg_fmt = (
        "The database at %(url)s is at schema revision %(current)s, which "
        "this code does not know (its newest is %(head)s). Upgrade "
        "grant_scheduler on this machine to the release that migrated the "
        "database."
    )


class InvalidResources(GrantSchedulerError, ValueError):
    msg_fmt = "Invalid %(name)s %(value)r: %(reason)s."


class InvalidRequest(GrantSchedulerError, ValueError):
    msg_fmt = "Invalid scheduling request: %(reason)s."


class NoValidHost(GrantSchedulerError):
    """Not every instance of a request fits; nothing stays granted.

    ``contention`` is True when the request lost a grant to a concurrent
    scheduler before a fresh read of every host showed that nothing fits:
    the capacity went to requests made at the same moment, so a retry may
    succeed if one of them fails or is released.  False means the first
    fresh read already found no room: the cloud is full for this request.
    """

    msg_fmt = (
        "No valid host was found for %(count)d instance(s) of "
        "%(resources)s: %(reason)s."
    )

    def __init__(self, message=None, contention=False, **kwargs):
        super().__init__(message, **kwargs)
        self.contention = contention


class UnknownHost(GrantSchedulerError, LookupError):
    msg_fmt = (
        "Host %(host)s node %(node)s is not known to grant_scheduler; its "
        "compute service must report it (report_host) before it can claim."
    )


class ClaimRejected(GrantSchedulerError):
    msg_fmt = (
        "Claim for instance %(instance_uuid)s on host %(host)s node %(node)s "
        "rejected: %(reason)s. Build it elsewhere (reschedule)."
    )


class InvariantViolated(GrantSchedulerError):
    msg_fmt = (
        "%(count)d invariant violation(s) found (listed above); see "
        "doc/source/contributor/protocol.rst, 'Invariants'."
    )


class InvalidConfig(GrantSchedulerError, ValueError):
    msg_fmt = "Invalid configuration: %(reason)s."


class InvalidSettings(GrantSchedulerError, ValueError):
    msg_fmt = "Invalid setting %(name)s=%(value)r: %(reason)s."


class InvalidRevision(GrantSchedulerError, ValueError):
    msg_fmt = (
        "Unknown schema revision %(revision)r: 'db sync' takes 'head' (the "
        "default) or one of this code's revisions: %(known)s."
    )


class SchemaInterrupted(GrantSchedulerError):
    msg_fmt = (
        "The database at %(url)s holds grant_scheduler tables (%(tables)s) "
        "but no schema revision (no alembic_version row): an earlier "
        "'db sync' stopped before it finished. If those tables hold no data, "
        "drop them and run 'grant-scheduler-manage db sync' again; if they "
        "do, record the revision they match with 'alembic stamp <revision>' "
        "from a checkout, then run db sync."
    )


class MigrationLocked(GrantSchedulerError):
    msg_fmt = (
        "Another schema migration of the database at %(url)s has held its "
        "migration lock for %(seconds)d seconds; wait for it to finish (or "
        "stop it) and run 'grant-scheduler-manage db sync' again."
    )
