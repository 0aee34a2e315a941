"""Configuration options of grant_scheduler.

One module per option group, as in placement's ``conf`` package; this module
registers them all on a ``ConfigOpts`` object and checks every value once,
so that a bad one is reported in one line before anything runs.
"""

import contextlib
import io
import os
import re
import sys

from oslo_config import cfg

from grant_scheduler import exception
from grant_scheduler.conf import database
from grant_scheduler.conf import scheduler


def register_opts(conf):
    """Register every grant_scheduler option group on ``conf``."""
    database.register_opts(conf)
    scheduler.register_opts(conf)


def _own_opts():
    own = {}
    for module in (database, scheduler):
        for group, opts in module.list_opts().items():
            for opt in opts:
                own[(group.name, opt.dest)] = opt
    return own


def _file_value(conf, group_name, name):
    """``(path, raw text)`` of the file that sets the option last, or None."""
    found = None
    section = "DEFAULT" if group_name is None else group_name
    for path in database.config_files(conf):
        raw = database.raw_file_value(path, section, name)
        if raw is not None:
            found = (path, raw)
    return found


def _bounds(opt):
    low = getattr(opt.type, "min", None) if opt is not None else None
    high = getattr(opt.type, "max", None) if opt is not None else None
    if low is None and high is None:
        return ""
    if high is None:
        return " (at least %s)" % low
    if low is None:
        return " (at most %s)" % high
    return " (from %s to %s)" % (low, high)


def _invalid(conf, group_name, name, opt, detail, show_value=True):
    label = "[%s] %s" % (group_name or "DEFAULT", name)
    found = _file_value(conf, group_name, name)
    if found is not None:
        path, raw = found
        if show_value and raw and not (opt is not None and opt.secret):
            label += " = %s" % raw
        label += " in %s" % path
    return exception.InvalidConfig(reason="%s: %s" % (label, detail))


def _check(conf, group_name, name, opt):
    group = conf if group_name is None else conf[group_name]
    try:
        value = group[name]
    except database.SUBSTITUTION_ERRORS:
        # NOTE: the message names the text after a "$", which may be part
        # of a password: never shown.
        raise _invalid(
            conf,
            group_name,
            name,
            opt,
            database.DOLLAR_REASON,
            show_value=False,
        ) from None
    except ValueError as exc:  # ConfigFileValueError, ConfigSourceValueError
        if opt is not None and opt.secret:
            detail = "not a valid value"
        else:
            detail = str(exc).split(" is not valid: ", 1)[-1].strip()
            detail = "not valid: %s%s" % (
                detail[:1].lower() + detail[1:],
                _bounds(opt),
            )
        raise _invalid(conf, group_name, name, opt, detail) from None
    if value is None and opt is not None and opt.default is not None:
        # NOTE: "name =" with nothing after it reads as None for numbers.
        raise _invalid(conf, group_name, name, opt, "empty%s" % _bounds(opt))


def check_values(conf):
    """Read every registered option of ``conf`` once.

    Values are otherwise read, converted and checked only where they are
    used, so a bad one surfaces as a traceback in the middle of a command.

    :raises InvalidConfig: for the first value that cannot be read (out of
        range, of the wrong type, empty, or holding a ``$`` that
        oslo.config cannot substitute), naming the option, the file and,
        unless the option is secret, the value.
    """
    own = _own_opts()
    for key in list(conf):
        try:
            entry = conf[key]
        except (cfg.Error, ValueError):
            _check(conf, None, key, None)
            continue
        if isinstance(entry, cfg.ConfigOpts.GroupAttr):
            for name in list(entry):
                _check(conf, key, name, own.get((key, name)))


def _named_files(argv, kwargs):
    """The files ``conf(argv, **kwargs)`` reads (to name the bad one)."""
    files, directories = [], []
    argv = list(argv or [])
    for index, arg in enumerate(argv):
        for flag, found in (
            ("--config-file", files),
            ("--config-dir", directories),
        ):
            if arg == flag and index + 1 < len(argv):
                found.append(argv[index + 1])
            elif arg.startswith(flag + "="):
                found.append(arg.split("=", 1)[1])
    if not files:
        files = kwargs.get("default_config_files")
        if files is None:
            files = cfg.find_config_files(
                project=kwargs.get("project"), prog=kwargs.get("prog")
            )
    files = list(files)
    for directory in directories:
        if os.path.isdir(directory):
            files.extend(
                os.path.join(directory, name)
                for name in sorted(os.listdir(directory))
                if name.endswith(".conf")
            )
    return files


def _unreadable(path):
    if os.path.isdir(path):
        return (
            "%s is a directory, not a configuration file (--config-dir "
            "reads every .conf file in a directory)" % path
        )
    try:
        with open(path, encoding="utf-8") as f:
            f.read()
    except UnicodeDecodeError:
        return "%s is not a text file (it is not valid UTF-8)" % path
    except OSError as exc:
        return "%s cannot be read: %s" % (path, exc.strerror or exc)
    return None


_PARSE_ERROR = re.compile(r"(?s)^at (.+?), (.+?): (?:'.*'|\".*\"|None)$")


def parse(conf, argv, **kwargs):
    """``conf(argv, **kwargs)``, with file errors in one line.

    :raises InvalidConfig: a configuration file that cannot be read or
        parsed (a directory, a binary file, a syntax error), named, without
        quoting its lines (one may hold a password).
    """
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured):
            conf(argv, **kwargs)
    except SystemExit as exc:
        text = captured.getvalue().strip()
        if exc.code in (None, 1) and text:
            # NOTE: oslo.config writes "argument --debug: Invalid Boolean
            # value: maybe" for a command-line option's bad value in a file,
            # then exits (with status 0 in older releases).
            raise exception.InvalidConfig(reason=text.splitlines()[-1])
        sys.stderr.write(captured.getvalue())  # argparse's usage, --help
        raise
    except cfg.ConfigFileParseError as exc:
        match = _PARSE_ERROR.match(exc.msg or "")
        if match:
            where, what = match.groups()
            reason = "cannot parse %s: %s (the line is not shown)" % (
                where,
                what[:1].lower() + what[1:],
            )
        else:
            reason = "cannot parse %s" % exc.config_file
        raise exception.InvalidConfig(reason=reason) from None
    except cfg.Error:
        sys.stderr.write(captured.getvalue())
        raise
    except (UnicodeDecodeError, OSError) as exc:
        sys.stderr.write(captured.getvalue())
        for path in _named_files(argv, kwargs):
            problem = _unreadable(path)
            if problem:
                raise exception.InvalidConfig(reason=problem) from None
        raise exception.InvalidConfig(
            reason="a configuration file cannot be read (%s)"
            % type(exc).__name__
        ) from None
