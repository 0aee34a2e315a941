"""grant_scheduler: close the gap between a scheduler's choice and a claim.

A scheduler writes a *grant* row before it answers, verifies by reading back
that no grant earlier in commit order invalidates it, and a compute host
consumes the grant when it claims.  See README.rst for the protocol.
"""
