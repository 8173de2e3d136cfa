"""The ``pentegg`` command line.

Every command lives in its own module (``pentegg.cmd_*``) exposing
``register(subparsers)``, which adds a parser whose ``func(args)`` runs the command and
returns an exit code. Errors a user can cause (bad flags, bad files, out-of-range
parameters) print one line on stderr and exit 2; nothing prints a traceback for them.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from . import __version__

COMMAND_MODULES = ("cmd_info", "cmd_train", "cmd_compare", "cmd_bench", "cmd_hw", "cmd_build")


class UsageError(Exception):
    """A user error detected after parsing; printed as one line, exit code 2."""


class ArgParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line and exit with code 2. ``help_command``:
    the command whose ``--help`` the error points to (default: this parser's ``prog``)."""

    help_command: str | None = None

    def error(self, message: str):
        see = self.help_command or self.prog
        sys.stderr.write(f"{self.prog}: error: {message} (see {see} --help)\n")
        raise SystemExit(2)


def user_errors() -> tuple[type[BaseException], ...]:
    """Exception types that mean bad input, not a bug."""
    from .golden import ConfigError, DigitRangeError, InputError, StateFileError

    errs: list[type[BaseException]] = [
        UsageError,
        ConfigError,
        StateFileError,
        InputError,
        DigitRangeError,
        FileNotFoundError,
        IsADirectoryError,
        PermissionError,
    ]
    for mod, name in (
        ("pentegg.tasks", "TaskError"),
        ("pentegg.cmd_hw", "HardwareError"),
        ("pentegg.device", "DeviceError"),
        ("pentegg.transport", "TransportError"),
        ("pentegg.rtl.compact.firmware", "FirmwareBuildError"),
    ):
        try:
            errs.append(getattr(importlib.import_module(mod), name))
        except (ImportError, AttributeError):
            pass
    return tuple(errs)


def build_parser() -> ArgParser:
    p = ArgParser(
        prog="pentegg",
        description="Pentary-EGGROLL: integer-only low-rank evolution strategies for "
        "five-level networks, from the golden model to the FPGA.",
    )
    p.add_argument("--version", action="version", version=f"pentegg {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=ArgParser)
    for name in COMMAND_MODULES:
        try:
            mod = importlib.import_module(f"pentegg.{name}")
        except ModuleNotFoundError as e:
            if e.name == f"pentegg.{name}":
                continue
            raise
        mod.register(sub)
    return p


def _chosen_parser(parser: argparse.ArgumentParser, args) -> argparse.ArgumentParser:
    """The (sub)parser of the command ``args`` chose: ``pentegg bench seeds``'s for
    ``bench seeds``, so that its error names that command's ``--help``."""
    while True:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        chosen = subs and getattr(args, subs[0].dest or "", None)
        if not chosen or chosen not in subs[0].choices:
            return parser
        parser = subs[0].choices[chosen]


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # the command's own error, not the top level's (its --help lists them)
        _chosen_parser(parser, args).error(f"unrecognized arguments: {' '.join(extra)}")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except user_errors() as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        sys.stderr.write(f"pentegg {args.command}: error: {msg}\n")
        return 2
    except BrokenPipeError:  # the reader of stdout went away (`pentegg ... | head`)
        # stdout's pending bytes would fail again at exit: point it at /dev/null
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except OSError as e:  # the file system or the machine refused: one line, not a bug
        sys.stderr.write(f"pentegg {args.command}: error: {e}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write(f"pentegg {args.command}: interrupted\n")
        return 130


if __name__ == "__main__":  # pragma: no cover - use `python -m pentegg`
    from pentegg.cli import main as _main  # one copy of the module, one UsageError class

    sys.exit(_main())
