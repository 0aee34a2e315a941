"""Plain-text tables for the command line."""


def render(headers, rows):
    """Align ``rows`` under ``headers``; numbers right, text left."""
    text_rows = [[str(cell) for cell in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in text_rows:
        widths = [
            max(w, len(cell)) for w, cell in zip(widths, row, strict=True)
        ]
    numeric = [
        all(_is_number(row[i]) for row in rows) and bool(rows)
        for i in range(len(headers))
    ]

    def line(cells):
        return "  ".join(
            cell.rjust(width) if num else cell.ljust(width)
            for cell, width, num in zip(cells, widths, numeric, strict=True)
        ).rstrip()

    out = [line(headers), line(["-" * w for w in widths])]
    out.extend(line(row) for row in text_rows)
    if not rows:
        out.append("(none)")
    return "\n".join(out)


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)
