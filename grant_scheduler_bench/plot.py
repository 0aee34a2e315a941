"""``--plot``: throughput and conflicts against schedulers, as a PNG.

One row of two charts per (workload, hosts) pair, one line per strategy
(the mean over repeated runs).
matplotlib is an optional extra (``pip install 'grant_scheduler[plot]'``).
"""

from grant_scheduler import api

METRICS = (
    ("placements_per_s", "placements / s"),
    ("conflicts_per_placement", "conflicts / placement"),
)


def require_matplotlib():
    """Fail before a long run rather than after it."""
    try:
        import matplotlib  # noqa: F401, PLC0415 - optional dependency
    except ImportError:
        raise api.GrantSchedulerError(
            "--plot needs matplotlib; install it with "
            "pip install 'grant_scheduler[plot]'"
        )


def write(rows, path, title=None):
    require_matplotlib()
    import matplotlib  # noqa: PLC0415 - optional dependency

    matplotlib.use("Agg")
    from matplotlib import pyplot  # noqa: PLC0415 - optional dependency

    groups = sorted({(r["workload"], r["hosts"]) for r in rows})
    figure, axes = pyplot.subplots(
        len(groups),
        len(METRICS),
        figsize=(5.5 * len(METRICS), 3.6 * len(groups)),
        squeeze=False,
    )
    for index, (workload, hosts) in enumerate(groups):
        row_axes = axes[index]
        chosen = [
            r
            for r in rows
            if r["workload"] == workload and r["hosts"] == hosts
        ]
        for column, (key, label) in enumerate(METRICS):
            ax = row_axes[column]
            for strategy in sorted({r["strategy"] for r in chosen}):
                points = _mean_by_schedulers(
                    [r for r in chosen if r["strategy"] == strategy], key
                )
                ax.plot(
                    [p[0] for p in points],
                    [p[1] for p in points],
                    marker="o",
                    label=strategy,
                )
            ax.set_xlabel("scheduler processes")
            ax.set_ylabel(label)
            ax.set_title("%s, %d hosts" % (workload, hosts))
            ax.set_xticks(sorted({r["schedulers"] for r in chosen}))
            ax.grid(True, alpha=0.3)
        row_axes[0].legend(fontsize="small")
    if title:
        figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    pyplot.close(figure)


def _mean_by_schedulers(rows, key):
    """``[(schedulers, mean of key)]``: repeated runs (--repeat) averaged."""
    values = {}
    for row in rows:
        values.setdefault(row["schedulers"], []).append(row[key])
    return [
        (count, sum(found) / len(found))
        for count, found in sorted(values.items())
    ]
