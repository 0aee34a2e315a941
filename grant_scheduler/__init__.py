"""grant_scheduler: close the gap between a scheduler's choice and a claim.

A scheduler writes a *grant* row before it answers, and the write itself is
decided against the host row under its lock: a grant that does not fit is
never taken and the request falls over to the next host.  A compute host
consumes the grant when it claims.  See doc/source/contributor/protocol.rst
for the protocol.
"""
