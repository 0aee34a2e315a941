"""Print what the fault-injection and Galera suites did, after results."""


def pytest_terminal_summary(terminalreporter):
    # NOTE: imported here, not at the top: an import error in the product
    # must fail the tests that import it, not abort the whole session.
    from tests.faults import harness

    if not harness.RECORDS:
        return
    write = terminalreporter.write_line
    terminalreporter.section("faults injected and invariants checked")
    for record in harness.RECORDS:
        faults = ", ".join(
            "%s: %d" % item for item in sorted(record["faults"].items())
        )
        write(
            "%(scenario)-34s %(seconds)5.1fs  placed %(placed)4d  "
            "I1 checkpoints %(checkpoints)5d (%(unchecked)d while the "
            "database was away)  I4 after TTL+reap: held  db errors "
            "%(db_errors)d  reaped %(reaped)d  rejected %(rejected)d" % record
        )
        write("    faults: %s" % (faults or "none"))
