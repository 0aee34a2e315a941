"""Exceptions raised by grant_scheduler.

Each message says what was wrong, with the offending value, and what to do.
Messages never contain a database password (see ``mask_url``).
"""

import re

_SCHEME = re.compile(r"[A-Za-z][\w+.-]*://")
# NOTE: query parameters that carry a credential (PyMySQL and libpq take
# ?password=..., other drivers a token or a key).
_SECRET_QUERY = re.compile(
    r"(?i)([?&;][^=&;#?]*(?:pass|pwd|secret|token|credential|api_?key)"
    r"[^=&;#?]*=)[^&;#]*"
)
_DELIMITERS = re.compile(r"[/?#]")
_HOST_PORT = re.compile(r"(\[[^\]]*\]|[^:]*)(?::(.*))?", re.S)


def _port_of(hostport):
    """The port text of ``host[:port]``, None when there is no port."""
    return _HOST_PORT.fullmatch(hostport).group(2)


def _split_authority(rest):
    """Split what follows ``scheme://`` into ``(userinfo, after, clean)``.

    ``userinfo`` is None when the URL names no user.  ``clean`` is False
    when the user name or password holds a raw ``@``, ``/``, ``?`` or
    ``#``; the split is then made at the last ``@``, so that whatever the
    password holds stays on the masked side.
    """
    first_at = rest.find("@")
    if first_at < 0 or rest.startswith("/"):
        return None, rest, True
    delimiter = _DELIMITERS.search(rest)
    if delimiter is not None and delimiter.start() < first_at:
        # NOTE: the first "@" comes after a "/", "?" or "#": it is part of
        # the database name or the query ("host/db@x"), unless a "user:"
        # comes before that delimiter ("user:pa/ss@host"), which SQLAlchemy
        # reads as a password holding it.
        if ":" not in rest[: delimiter.start()]:
            return None, rest, True
    elif "@" not in _DELIMITERS.split(rest[first_at + 1 :], maxsplit=1)[0]:
        return rest[:first_at], rest[first_at + 1 :], True
    last_at = rest.rfind("@")
    return rest[:last_at], rest[last_at + 1 :], False


def mask_url(url):
    """Return ``url`` with every credential in it replaced by ``***``.

    Masks the password, query parameters that carry one
    (``?password=...``) and a port that is not a number (it may be a
    password that lost its ``@``).  Works on the text alone, so a malformed
    URL, which is exactly the kind that gets printed, is masked too: when
    the password holds a raw ``@``, ``/``, ``?`` or ``#`` everything up to
    the last ``@`` is masked.
    """
    if url is None:
        return None
    text = _SECRET_QUERY.sub(r"\1***", str(url))
    scheme = _SCHEME.match(text)
    prefix = scheme.group(0) if scheme else ""
    userinfo, after, clean = _split_authority(text[len(prefix) :])
    if userinfo is not None:
        user, colon, _password = userinfo.partition(":")
        prefix += (user + ":***@") if colon or not clean else userinfo + "@"
    end = _DELIMITERS.search(after)
    cut = end.start() if end else len(after)
    hostport = after[:cut]
    port = _port_of(hostport)
    if port is not None and not port.isdigit():
        hostport = hostport[: len(hostport) - len(port)] + "***"
    return prefix + hostport + after[cut:]


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
        "README.rst, 'Invariants'."
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
