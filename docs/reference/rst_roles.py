"""A Griffe extension for the API reference: the docstrings' reST roles become links.

The docstrings write cross-references as reST roles (:func:`name`, :class:`~codyra.x.Y`), which
Markdown shows as a literal ":func:" before the code. Each role becomes an optional autorefs
cross-reference: a link where the name resolves to an object the reference renders, plain code
otherwise (a private module, a third-party name), so an unresolved role never fails the build.
"""

from __future__ import annotations

import html
import re

import griffe

ROLE = re.compile(r":(?:mod|func|class|meth|attr|data|obj|exc):`(~?)([\w.]+)`")


def linked(text: str, obj: griffe.Object) -> str:
    """``text`` with every reST role replaced by an optional cross-reference resolved from ``obj``."""

    def replace(match: re.Match) -> str:
        short, name = match.groups()
        try:
            identifier = obj.resolve(name)
        except griffe.NameResolutionError:
            identifier = name
        title = name.rsplit(".", 1)[-1] if short else name
        return f'<autoref identifier="{html.escape(identifier)}" optional><code>{html.escape(title)}</code></autoref>'

    return ROLE.sub(replace, text)


def rewrite(obj: griffe.Object) -> None:
    """Rewrite the roles of ``obj``'s docstring and of every member it defines (not its imports)."""
    if obj.docstring is not None:
        obj.docstring.value = linked(obj.docstring.value, obj)
    for member in obj.members.values():
        if not member.is_alias:
            rewrite(member)


class RstRoles(griffe.Extension):
    """Runs once a package is loaded, before any docstring is parsed for rendering."""

    def on_package(self, *, pkg: griffe.Module, **kwargs) -> None:
        rewrite(pkg)
