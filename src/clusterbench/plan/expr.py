"""A small, safe expression language for campaign files: `cores // threads`, `p <= q`.

Campaigns derive parameters from others and filter points with constraints. Running Python's
`eval` on a file someone mailed you is not acceptable, so expressions are parsed with `ast`
and evaluated by walking a whitelist of node types: numbers, strings, names, arithmetic,
comparisons, `and`/`or`/`not`, `x if c else y`, lists, and calls to a few pure functions.
Attribute access, subscripts, comprehensions, lambdas and anything else are refused.

Expressions are bounded too, because a campaign file may be hostile: the text's length and
nesting are checked before it is parsed, the tree's size after, and every operation that can
grow a value (`**`, `*`, `+`) checks the size of its result before computing it (limits
max_expr_chars, max_expr_depth, max_expr_nodes, max_int_bits, max_sequence). There are no loops,
so evaluation steps are bounded by the tree's size.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

from clusterbench.errors import UserInputError
from clusterbench.limits import exceeded, limit

FUNCTIONS = {
    "min": min, "max": max, "abs": abs, "int": int, "float": float, "round": round,
    "sqrt": math.sqrt, "floor": math.floor, "ceil": math.ceil, "log2": math.log2,
    "isqrt": math.isqrt, "str": str,
}

_BINARY = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_COMPARE = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_}
MAX_EXPONENT = 64  # 2 ** 64 is plenty for sizes; 10 ** 10 ** 10 would hang the planner


class Expression:
    """A parsed expression: `names` it reads, `evaluate(values)` with those names bound."""

    def __init__(self, text: str):
        self.text = text
        self.tree = _parse(text)
        self.names = frozenset(n.id for n in ast.walk(self.tree) if isinstance(n, ast.Name)
                               and n.id not in FUNCTIONS)
        self._run = _compile(self.tree.body)  # campaigns evaluate one expression 100,000s of times

    def evaluate(self, values: Mapping[str, Any]) -> Any:
        try:
            return self._run(values)
        except UserInputError:
            raise
        except (ArithmeticError, TypeError, ValueError) as exc:
            raise UserInputError(f"expression {self.text!r} failed: {exc}") from None

    def __repr__(self) -> str:
        return f"Expression({self.text!r})"


def _nesting(text: str) -> int:
    depth = deepest = 0
    for ch in text:
        if ch in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in ")]}":
            depth -= 1
    return deepest


def _tree_depth(node: ast.AST) -> int:
    children = list(ast.iter_child_nodes(node))
    return 1 + max(map(_tree_depth, children), default=0)


@lru_cache(maxsize=1024)
def _parse(text: str) -> ast.Expression:
    if len(text) > limit("max_expr_chars"):
        raise exceeded("max_expr_chars", len(text), f"expression {text[:40]!r}...")
    if _nesting(text) > limit("max_expr_depth"):
        raise exceeded("max_expr_depth", _nesting(text), f"nesting of expression {text[:40]!r}")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise UserInputError(f"expression {text!r} is not valid: {exc.msg}",
                             hint="use arithmetic, comparisons, and/or/not and min/max/sqrt/...") from None
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED):
            raise UserInputError(f"expression {text!r} uses {type(node).__name__}, which is not allowed",
                                 hint="allowed: numbers, strings, names, + - * / // % **, comparisons, "
                                      "and/or/not, x if c else y, [lists], " + ", ".join(sorted(FUNCTIONS)))
        if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS
                                               and not node.keywords):
            raise UserInputError(f"expression {text!r} calls something that is not allowed",
                                 hint="functions: " + ", ".join(sorted(FUNCTIONS)))
    nodes = sum(1 for _ in ast.walk(tree))
    if nodes > limit("max_expr_nodes"):
        raise exceeded("max_expr_nodes", nodes, f"expression {text[:40]!r}")
    if _tree_depth(tree) > 2 * limit("max_expr_depth"):  # unary chains (- - - x) nest without brackets
        raise exceeded("max_expr_depth", _tree_depth(tree) // 2, f"nesting of expression {text[:40]!r}")
    return tree


_ALLOWED = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.Name, ast.Load,
            ast.Constant, ast.Call, ast.IfExp, ast.List, ast.Tuple, ast.And, ast.Or,
            *_BINARY, *_COMPARE, *_UNARY)


Evaluator = Callable[[Mapping[str, Any]], Any]


def _compile(node: ast.AST) -> Evaluator:
    """Turn a checked tree into nested closures: the tree is walked once, not per evaluation."""
    match node:
        case ast.Constant(value=v):
            return lambda values: v
        case ast.Name(id=name):
            def lookup(values: Mapping[str, Any]) -> Any:
                try:
                    return values[name]
                except KeyError:
                    raise UserInputError(f"unknown name {name!r} in an expression",
                                         hint="known here: " + ", ".join(sorted(values))) from None
            return lookup
        case ast.BinOp(left=left, op=ast.Pow(), right=right):
            a, b = _compile(left), _compile(right)

            def power(values: Mapping[str, Any]) -> Any:
                x, y = a(values), b(values)
                if isinstance(y, int | float) and abs(y) > MAX_EXPONENT:
                    raise UserInputError(f"exponent {y} is too large (limit {MAX_EXPONENT})")
                if isinstance(x, int) and isinstance(y, int) and y > 0 and x.bit_length() * y > limit("max_int_bits"):
                    raise exceeded("max_int_bits", f"about {x.bit_length() * y} bits", "the result of **")
                return _sized(x ** y)
            return power
        case ast.BinOp(left=left, op=op, right=right):
            a, b, fn = _compile(left), _compile(right), _BINARY[type(op)]

            def binary(values: Mapping[str, Any]) -> Any:
                x, y = a(values), b(values)
                _check_growth(op, x, y)
                return _sized(fn(x, y))
            return binary
        case ast.UnaryOp(op=op, operand=operand):
            a, fn = _compile(operand), _UNARY[type(op)]
            return lambda values: fn(a(values))
        case ast.BoolOp(op=op, values=items):
            parts = [_compile(i) for i in items]
            want = isinstance(op, ast.Or)  # stop at the first truthy (or) / falsy (and) operand

            def boolean(values: Mapping[str, Any]) -> Any:
                result = not want
                for part in parts:
                    result = part(values)
                    if bool(result) == want:
                        return result
                return result
            return boolean
        case ast.Compare(left=left, ops=ops, comparators=rights):
            first = _compile(left)
            chain = [(_COMPARE[type(op)], _compile(r)) for op, r in zip(ops, rights, strict=True)]

            def compare(values: Mapping[str, Any]) -> bool:
                a = first(values)
                for fn, right in chain:
                    b = right(values)
                    if not fn(a, b):
                        return False
                    a = b
                return True
            return compare
        case ast.IfExp(test=test, body=body, orelse=orelse):
            t, y, n = _compile(test), _compile(body), _compile(orelse)
            return lambda values: y(values) if t(values) else n(values)
        case ast.List(elts=elts) | ast.Tuple(elts=elts):
            items = [_compile(e) for e in elts]
            return lambda values: [i(values) for i in items]
        case ast.Call(func=ast.Name(id=fname), args=args):
            fn, params = FUNCTIONS[fname], [_compile(a) for a in args]
            return lambda values: fn(*(p(values) for p in params))
    raise UserInputError(f"cannot evaluate {ast.dump(node)}")  # pragma: no cover - refused at parse


def _length(value: Any) -> int | None:
    return len(value) if isinstance(value, str | list | tuple) else None


def _check_growth(op: ast.operator, x: Any, y: Any) -> None:
    """Refuse `x op y` before computing it when its result would be too large to hold."""
    if isinstance(op, ast.Mult):
        for seq, times in ((x, y), (y, x)):
            if _length(seq) is not None and isinstance(times, int) and _length(seq) * max(times, 0) > limit(
                    "max_sequence"):
                raise exceeded("max_sequence", _length(seq) * times, "the length of a repeated string or list")
        if isinstance(x, int) and isinstance(y, int) and x.bit_length() + y.bit_length() > limit("max_int_bits") + 1:
            raise exceeded("max_int_bits", f"about {x.bit_length() + y.bit_length()} bits", "the result of *")
    elif isinstance(op, ast.Add) and _length(x) is not None and _length(y) is not None:
        if _length(x) + _length(y) > limit("max_sequence"):
            raise exceeded("max_sequence", _length(x) + _length(y), "the length of a joined string or list")


def _sized(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > limit("max_int_bits"):
        raise exceeded("max_int_bits", f"{value.bit_length()} bits", "an integer")
    return value


_FIELD = re.compile(r"\{\{|\}\}|\{([^{}]*)\}?")


def substitute(template: str, values: Mapping[str, Any], quote: Callable[[str], str] | None = None) -> str:
    """'{threads}' -> '2' in environment values and commands; '{{' stays a literal brace.

    With `quote` (shlex.quote for a shell command line), every substituted value passes through
    it, so a value is always one word of the command and never shell syntax."""

    def field(m: re.Match) -> str:
        text = m.group(0)
        if text in ("{{", "}}"):
            return text[0]
        if not text.endswith("}"):
            raise UserInputError(f"unclosed '{{' in {template!r}")
        name = m.group(1).strip()
        if name not in values:
            raise UserInputError(f"unknown name {{{name}}} in {template!r}",
                                 hint="known here: " + ", ".join(sorted(values)))
        text = str(values[name])
        if "\0" in text:
            raise UserInputError(f"{{{name}}} contains a NUL byte, which no command line or environment can hold")
        return quote(text) if quote else text

    return _FIELD.sub(field, template)
