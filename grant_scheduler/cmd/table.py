"""Plain-text tables for the command line."""

_NAMED_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_char(char):
    if char in _NAMED_ESCAPES:
        return _NAMED_ESCAPES[char]
    if char.isprintable():
        return char
    code = ord(char)
    if code <= 0xFF:
        return "\\x%02x" % code
    if code <= 0xFFFF:
        return "\\u%04x" % code
    return "\\U%08x" % code


def escape(value, backslash=True):
    """``str(value)`` safe for a terminal, on one line.

    Newlines, terminal escape sequences and every other character that is
    not printable (format characters such as a right-to-left override
    included) are written as Python escapes, and so is a backslash unless
    ``backslash`` is False, so that a host name cannot start a new row,
    move the cursor or recolour the screen, and what is shown tells the
    name exactly.
    """
    text = str(value)
    if text.isprintable() and (not backslash or "\\" not in text):
        return text
    return "".join(
        char if char == "\\" and not backslash else _escape_char(char)
        for char in text
    )


def amounts(resources):
    """Every class of ``resources`` and its amount, standard classes
    first: ``VCPU=1 MEMORY_MB=512 DISK_GB=10``, ``CUSTOM_BAREMETAL_GOLD=1``
    (``-`` for nothing)."""
    return " ".join("%s=%d" % item for item in resources.items()) or "-"


def render(headers, rows):
    """Align ``rows`` under ``headers``; numbers right, text left (a blank
    cell, ``""``, leaves a column of numbers right-aligned)."""
    text_rows = [[escape(cell) for cell in row] for row in rows]
    headers = [escape(header) for header in headers]
    for row in text_rows:
        if len(row) != len(headers):
            raise ValueError(
                "a row has %d cells for %d columns" % (len(row), len(headers))
            )
    widths = [
        max([len(headers[i])] + [len(row[i]) for row in text_rows])
        for i in range(len(headers))
    ]
    numeric = [
        bool(rows)
        and all(_is_number(row[i]) or row[i] == "" for row in rows)
        and any(_is_number(row[i]) for row in rows)
        for i in range(len(headers))
    ]

    def line(cells):
        return "  ".join(
            cells[i].rjust(widths[i])
            if numeric[i]
            else cells[i].ljust(widths[i])
            for i in range(len(cells))
        ).rstrip()

    out = [line(headers), line(["-" * w for w in widths])]
    out.extend(line(row) for row in text_rows)
    if not rows:
        out.append("(none)")
    return "\n".join(out)


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)
