"""Exceptions raised by grant_scheduler.

Each message says what was wrong, with the offending value, and what to do.
Messages never contain a database password (see ``mask_url``).
"""

import re

from sqlalchemy.engine import url as sa_url


def mask_url(url):
    """Return ``url`` with any password replaced by ``***``.

    Works on malformed URLs too, which is exactly when they get printed.
    """
    if url is None:
        return None
    text = str(url)
    try:
        return sa_url.make_url(text).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - any parse failure: fall back to regex
        # NOTE: "user:password@" wherever it is, scheme or no scheme.
        return re.sub(r"([^:/@\s]+:)[^@/\s]*@", r"\1***@", text)


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
    transient = False
    """True when the connection was lost after this process had connected
    (then worth a retry in a fresh transaction)."""

    msg_fmt = (
        "Cannot connect to the database at %(url)s: %(reason)s. Check that "
        "the server is running and that the URL, user and password are right."
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
    msg_fmt = (
        "No valid host was found for %(count)d instance(s) of "
        "%(resources)s: %(reason)s."
    )


class UnknownHost(GrantSchedulerError, LookupError):
    msg_fmt = (
        "Host %(host)s node %(node)s is not known to grant_scheduler; its "
        "compute service must report it (report_host) before it can claim."
    )


class ClaimRejected(GrantSchedulerError):
    msg_fmt = (
        "Claim for instance %(instance_uuid)s on host %(host)s node %(node)s "
        "rejected: %(reason)s. The build should be rescheduled."
    )


class InvariantViolated(GrantSchedulerError):
    msg_fmt = (
        "%(count)d invariant violation(s) found (listed above); see "
        "README.rst, 'Invariants'."
    )
