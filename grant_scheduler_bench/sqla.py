"""The few SQLAlchemy calls whose spelling differs between 1.2-1.3 and 2.x.

The benchmark runs on the product's floors (SQLAlchemy 1.2 of Nova 18) as
well as on the current releases; it keeps its own copy of the helpers it
needs rather than reach into the product's data layer.
"""

from urllib import parse

import sqlalchemy as sa
from sqlalchemy.engine import url as sa_url

BEFORE_1_4 = tuple(int(p) for p in sa.__version__.split(".")[:2]) < (1, 4)


def select(*columns):
    """``SELECT columns...`` (1.3 takes a list, 2.x positional columns)."""
    if BEFORE_1_4:
        return sa.select(list(columns))
    return sa.select(*columns)


def case(*whens, else_=None):
    """``CASE WHEN ... END`` (1.3 takes the whens as one list)."""
    if BEFORE_1_4:
        return sa.case(list(whens), else_=else_)
    return sa.case(*whens, else_=else_)


def scalar_subquery(query):
    """A one-value ``SELECT`` used as a value (1.3 calls it ``as_scalar``)."""
    make = getattr(query, "scalar_subquery", None) or query.as_scalar
    return make()


def execute_text(conn, sql):
    """Run a literal SQL string with no parameters."""
    return conn.execute(sa.text(sql))


def make_url(text):
    """Parse a database URL (``sqlalchemy.engine.make_url`` is 1.4+)."""
    return sa_url.make_url(text)


def render_url(url, hide_password=True):
    """A ``URL`` as text, its password hidden by default."""
    render = getattr(url, "render_as_string", None)
    if render is not None:
        return render(hide_password=hide_password)
    # NOTE(sqlalchemy): before 1.4 the query's values are written as they
    # are: quoted here, so that the text parses back to the same URL.
    text = _url_with(url, query={}).__to_string__(hide_password=hide_password)
    if not url.query:
        return text
    return text + "?" + parse.urlencode(sorted(url.query.items()), doseq=True)


def url_with_database(url, database):
    """A copy of ``url`` naming another database."""
    if hasattr(url, "set"):
        return url.set(database=database)
    return _url_with(url, database=database)


def _url_with(url, **changes):
    # NOTE(sqlalchemy): before 1.4 a URL is built from its parts.
    parts = {
        "drivername": url.drivername,
        "username": url.username,
        "password": url.password,
        "host": url.host,
        "port": url.port,
        "database": url.database,
        "query": dict(url.query),
    }
    parts.update(changes)
    return sa_url.URL(**parts)
