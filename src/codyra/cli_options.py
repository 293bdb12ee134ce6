"""Command-line options that commands registered in several layers share (no heavy imports:
every ``codyra`` start builds the parsers)."""

from __future__ import annotations


def add_set_option(parser, help: str = "override a config key (repeatable), e.g. --set train.lr=1e-4") -> None:
    """``--set KEY=VALUE`` (repeatable), read by ``codyra.experiment.config.apply_sets``."""
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help=help)
