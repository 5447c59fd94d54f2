"""Python 2 Glue scripts (Glue 0.9) made parseable by ``ast``: a token-level rewrite of Python 2 syntax.

Only the syntax Python 3 refuses is rewritten, in place on its own line, so every line number the
analysis reports is the script's own: ``print x`` / ``print >>f, x`` / ``exec code`` become calls,
``except E, e`` becomes ``except E as e``, ``raise E, msg`` becomes ``raise E(msg)``, backticks become
``repr(...)``, ``<>`` becomes ``!=``, ``10L`` loses its ``L``, ``0777`` becomes ``0o777`` and ``ur''``
becomes ``r''``.

Why not lib2to3: it leaves the standard library in Python 3.13 (the project supports it) and rewrites
far more than parsing needs (``dict.iteritems``, imports), moving lines around; ``fissix`` (its fork)
would be a dependency for a few statement forms. The standard tokenizer reads Python 2 source as it is.
"""

from __future__ import annotations

import io
import tokenize
from dataclasses import dataclass

_STATEMENT_CALLS = frozenset({"print", "exec"})
_OPENING = frozenset("([{")
_CLOSING = frozenset(")]}")


@dataclass(frozen=True, order=True)
class _Edit:
    start: tuple[int, int]
    end: tuple[int, int]
    text: str


def _tokens(source: str) -> list[tokenize.TokenInfo] | None:
    try:
        return list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return None


def _statement_end(tokens: list[tokenize.TokenInfo], index: int) -> int:
    """Index of the token ending the statement that starts at ``index``: a NEWLINE, ``;`` or comment."""
    depth = 0
    for position in range(index, len(tokens)):
        token = tokens[position]
        if token.string in _OPENING and token.type == tokenize.OP:
            depth += 1
        elif token.string in _CLOSING and token.type == tokenize.OP:
            depth -= 1
        elif depth <= 0 and (
            token.type in (tokenize.NEWLINE, tokenize.COMMENT, tokenize.ENDMARKER) or token.string == ";"
        ):
            return position
    return len(tokens) - 1


def _top_level_comma(tokens: list[tokenize.TokenInfo], start: int, end: int) -> int | None:
    depth = 0
    for position in range(start, end):
        text = tokens[position].string
        if text in _OPENING:
            depth += 1
        elif text in _CLOSING:
            depth -= 1
        elif text == "," and depth == 0:
            return position
    return None


def _statement_edits(tokens: list[tokenize.TokenInfo], index: int) -> list[_Edit]:
    token = tokens[index]
    following = tokens[index + 1] if index + 1 < len(tokens) else token
    end = _statement_end(tokens, index)
    if token.string in _STATEMENT_CALLS and following.string not in ("(", "=", ".", ")", ",", "["):
        if end == index + 1:
            return [_Edit(token.end, token.end, "()")]
        first = index + 1
        edits = []
        if following.string == ">>":
            comma = _top_level_comma(tokens, first, end)
            stop = tokens[comma + 1].start if comma is not None and comma + 1 < end else tokens[end].start
            edits.append(_Edit(following.start, stop, ""))
        edits.append(_Edit(token.end, tokens[first].start, "("))
        edits.append(_Edit(tokens[end].start, tokens[end].start, ")"))
        return edits
    if token.string == "except":
        colon = next((p for p in range(index, end) if tokens[p].string == ":"), end)
        comma = _top_level_comma(tokens, index + 1, colon)
        return [_Edit(tokens[comma].start, tokens[comma].end, " as")] if comma is not None else []
    if token.string == "raise":
        comma = _top_level_comma(tokens, index + 1, end)
        if comma is not None:
            return [
                _Edit(tokens[comma].start, tokens[comma].end, "("),
                _Edit(tokens[end].start, tokens[end].start, ")"),
            ]
    return []


def _adjacent(a: tokenize.TokenInfo, b: tokenize.TokenInfo) -> bool:
    return a.end == b.start


def _edits(tokens: list[tokenize.TokenInfo]) -> list[_Edit]:
    edits: list[_Edit] = []
    depth = 0
    statement_start = True
    backtick_open = False
    for index, token in enumerate(tokens):
        following = tokens[index + 1] if index + 1 < len(tokens) else None
        if token.type in (tokenize.NL, tokenize.COMMENT):
            continue
        if statement_start and token.type == tokenize.NAME:
            edits.extend(_statement_edits(tokens, index))
        if token.type == tokenize.ERRORTOKEN and token.string == "`":
            edits.append(_Edit(token.start, token.end, ")" if backtick_open else "repr("))
            backtick_open = not backtick_open
        elif following is not None and _adjacent(token, following):
            if token.string == "<" and following.string == ">":
                edits.append(_Edit(token.start, following.end, "!="))
            elif token.type == tokenize.NUMBER and following.type == tokenize.NAME and following.string in "lL":
                edits.append(_Edit(following.start, following.end, ""))
            elif token.string == "0" and following.type == tokenize.NUMBER and following.string.isdigit():
                edits.append(_Edit(token.start, token.end, "0o"))
            elif token.string.lower() in ("ur", "u") and following.type == tokenize.STRING:
                edits.append(_Edit(token.start, token.end, token.string[1:]))
        if token.type == tokenize.OP and token.string in _OPENING:
            depth += 1
        elif token.type == tokenize.OP and token.string in _CLOSING:
            depth -= 1
        statement_start = token.type in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT) or (
            depth == 0 and token.string in (";", ":") and token.type == tokenize.OP
        )
    return edits


def _apply(source: str, edits: list[_Edit]) -> str:
    lines = source.splitlines(keepends=True)
    # Later edits first, so earlier positions stay valid; every edit is within one line's text.
    for edit in sorted(edits, reverse=True):
        (start_row, start_col), (end_row, end_col) = edit.start, edit.end
        if start_row > len(lines):
            lines.append("")
        head = lines[start_row - 1][:start_col]
        tail = lines[end_row - 1][end_col:] if end_row <= len(lines) else ""
        lines[start_row - 1 : end_row] = [head + edit.text + tail]
    return "".join(lines)


def convert_python2(source: str) -> str | None:
    """``source`` with its Python 2 syntax rewritten; ``None`` if it cannot even be tokenized."""
    tokens = _tokens(source)
    if tokens is None:
        return None
    return _apply(source, _edits(tokens))
