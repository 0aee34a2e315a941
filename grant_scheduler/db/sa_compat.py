"""The few SQLAlchemy calls whose spelling differs between 1.3 and 2.x.

grant_scheduler runs inside Nova's process, on Nova's libraries: Nova 22
(Debian bullseye) brings SQLAlchemy 1.3.22, current releases 2.x.  Every
difference the code meets is handled here, once, so the data layer reads
the same on both and no version check is scattered through it.
"""

import sqlalchemy as sa
from sqlalchemy.engine import url as sa_url

SQLALCHEMY_1_3 = sa.__version__.startswith("1.3")


def select(*columns):
    """``SELECT columns...`` (1.3 takes a list, 2.x positional columns)."""
    if SQLALCHEMY_1_3:
        return sa.select(list(columns))
    return sa.select(*columns)


def case(*whens, else_=None):
    """``CASE WHEN ... END`` (1.3 takes the whens as one list)."""
    if SQLALCHEMY_1_3:
        return sa.case(list(whens), else_=else_)
    return sa.case(*whens, else_=else_)


def scalar_subquery(query):
    """A one-value ``SELECT`` used as a value (1.3 calls it ``as_scalar``)."""
    make = getattr(query, "scalar_subquery", None) or query.as_scalar
    return make()


def mapping(row):
    """A row's values by column name (2.x keeps them in ``_mapping``)."""
    return getattr(row, "_mapping", row)


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
    return url.__to_string__(hide_password=hide_password)


def url_with(url, **changes):
    """A copy of ``url`` with other parts (1.3 URLs are mutable)."""
    if hasattr(url, "set"):
        return url.set(**changes)
    copy = sa_url.make_url(render_url(url, hide_password=False))
    for name, value in changes.items():
        setattr(copy, name, value)
    return copy


def url_with_database(url, database):
    """A copy of ``url`` naming another database."""
    return url_with(url, database=database)


def lastrowid(result):
    """The driver's last insert id (MySQL's ``LAST_INSERT_ID()``)."""
    return result.lastrowid
