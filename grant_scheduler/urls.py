"""Database URLs as text: masking, the secrets in them, and what makes one
unreadable.

Everything here works on the text alone, so a malformed URL, which is
exactly the kind that gets printed, is handled too.
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


def mask(url):
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


def problem(url):
    """Why ``url``'s user name, password or port cannot be read, or None.

    Never quotes any part of the URL: a raw character in a password leaves
    fragments of it where SQLAlchemy looks for the host or the port.  The
    URL is split as ``mask`` splits it.
    """
    text = str(url)
    scheme = _SCHEME.match(text)
    if scheme is None:
        return (
            "it does not start with a scheme such as mysql+pymysql:// or "
            "postgresql+psycopg2://"
        )
    userinfo, after, clean = _split_authority(text[scheme.end() :])
    if not clean or (
        userinfo is not None and re.search(r"%(?![0-9A-Fa-f]{2})", userinfo)
    ):
        return (
            "the user name or password holds a character that must be "
            "percent-encoded in a URL (write @ as %40, : as %3A, / as %2F, "
            "? as %3F, # as %23 and % as %25; in Python "
            "urllib.parse.quote(password, safe='') does it)"
        )
    hostport = _DELIMITERS.split(after, maxsplit=1)[0]
    port = _port_of(hostport)
    if port is not None and not port.isdigit():
        return "its port is not a number"
    return None


def secrets(url):
    """The password and credential query values written in ``url``, as
    written (for scrubbing text that may quote them); [] for None."""
    if not url:
        return []
    text = str(url)
    scheme = _SCHEME.match(text)
    rest = text[scheme.end() :] if scheme else text
    userinfo, _after, _clean = _split_authority(rest)
    found = []
    if userinfo is not None and ":" in userinfo:
        found.append(userinfo.partition(":")[2])
    for match in _SECRET_QUERY.finditer(text):
        found.append(text[match.end(1) : match.end()])
    return found
