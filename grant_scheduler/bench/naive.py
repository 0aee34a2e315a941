"""grants-naive: the seed's steps taken literally.  UNSAFE, benchmark only.

The grant is stamped with the database's clock and the verification counts
every live grant stamped earlier than this one; there is no ticket, so
nothing ties the stamp to commit order.  Scheduler A stamps first and
commits last; B commits, reads back, cannot see A and wins; A commits,
reads back, sees B's later stamp, ignores it and wins too (DESIGN H1).  It
exists to show that overcommit happening, next to the real protocol.
"""

import random

import sqlalchemy as sa

from grant_scheduler.db import api as db_api
from grant_scheduler.db import models
from grant_scheduler.db import rows
from grant_scheduler.db import store as gs_store

G = models.grants
H = models.hosts


class NaiveStore(gs_store.Store):
    """A ``Store`` whose grant and verify follow the seed literally."""

    def _ticket_for(self, conn, host_id):
        # NOTE: no ticket is taken, so no host row lock orders the inserts;
        # the column still needs a unique value, which decides nothing here.
        return -random.getrandbits(62)

    @db_api.transactional("writer")
    def verify_grant(self, conn, grant_id, host_id, ticket):
        """Earliest DB timestamp wins: count every live grant stamped
        before mine, and win if mine still fits."""
        row = conn.execute(sa.select(H).where(H.c.id == host_id)).first()
        mine = conn.execute(sa.select(G).where(G.c.id == grant_id)).first()
        if row is None or mine is None:
            conn.execute(G.delete().where(G.c.id == grant_id))
            return False, None
        state = rows.host_state(row)
        earlier = conn.execute(
            sa.select(G).where(
                G.c.host_id == host_id,
                G.c.state.in_(rows.LIVE),
                G.c.id != grant_id,
                G.c.created_at < mine.created_at,
            )
        )
        for other in earlier:
            state.granted = state.granted + rows.resources_of(other)
        if state.fits(rows.resources_of(mine)):
            conn.execute(
                G.update()
                .where(G.c.id == grant_id)
                .values(state=models.GRANT_WON)
            )
            return True, state
        conn.execute(G.delete().where(G.c.id == grant_id))
        return False, state
