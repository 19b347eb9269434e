"""A small, safe expression language for campaign files: `cores // threads`, `p <= q`.

Campaigns derive parameters from others and filter points with constraints. Running Python's
`eval` on a file someone mailed you is not acceptable, so expressions are parsed with `ast`
and evaluated by walking a whitelist of node types: numbers, strings, names, arithmetic,
comparisons, `and`/`or`/`not`, `x if c else y`, lists, and calls to a few pure functions.
Attribute access, subscripts, comprehensions, lambdas and anything else are refused.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from clusterbench.errors import UserInputError

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

    def evaluate(self, values: Mapping[str, Any]) -> Any:
        try:
            return _eval(self.tree.body, values)
        except UserInputError:
            raise
        except (ArithmeticError, TypeError, ValueError) as exc:
            raise UserInputError(f"expression {self.text!r} failed: {exc}") from None

    def __repr__(self) -> str:
        return f"Expression({self.text!r})"


@lru_cache(maxsize=1024)
def _parse(text: str) -> ast.Expression:
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
    return tree


_ALLOWED = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.Name, ast.Load,
            ast.Constant, ast.Call, ast.IfExp, ast.List, ast.Tuple, ast.And, ast.Or,
            *_BINARY, *_COMPARE, *_UNARY)


def _eval(node: ast.AST, values: Mapping[str, Any]) -> Any:
    match node:
        case ast.Constant(value=v):
            return v
        case ast.Name(id=name):
            if name in values:
                return values[name]
            raise UserInputError(f"unknown name {name!r} in an expression",
                                 hint="known here: " + ", ".join(sorted(values)))
        case ast.BinOp(left=left, op=op, right=right):
            a, b = _eval(left, values), _eval(right, values)
            if isinstance(op, ast.Pow) and isinstance(b, int | float) and abs(b) > MAX_EXPONENT:
                raise UserInputError(f"exponent {b} is too large (limit {MAX_EXPONENT})")
            return _BINARY[type(op)](a, b)
        case ast.UnaryOp(op=op, operand=operand):
            return _UNARY[type(op)](_eval(operand, values))
        case ast.BoolOp(op=ast.And(), values=items):
            result = True
            for item in items:
                result = _eval(item, values)
                if not result:
                    return result
            return result
        case ast.BoolOp(op=ast.Or(), values=items):
            result = False
            for item in items:
                result = _eval(item, values)
                if result:
                    return result
            return result
        case ast.Compare(left=left, ops=ops, comparators=rights):
            a = _eval(left, values)
            for op, right in zip(ops, rights, strict=True):
                b = _eval(right, values)
                if not _COMPARE[type(op)](a, b):
                    return False
                a = b
            return True
        case ast.IfExp(test=test, body=body, orelse=orelse):
            return _eval(body, values) if _eval(test, values) else _eval(orelse, values)
        case ast.List(elts=elts) | ast.Tuple(elts=elts):
            return [_eval(e, values) for e in elts]
        case ast.Call(func=ast.Name(id=fname), args=args):
            return FUNCTIONS[fname](*(_eval(a, values) for a in args))
    raise UserInputError(f"cannot evaluate {ast.dump(node)}")  # pragma: no cover - refused at parse


def substitute(template: str, values: Mapping[str, Any]) -> str:
    """'{threads}' -> '2' in environment values and commands; '{{' stays a literal brace."""
    out, i = [], 0
    while i < len(template):
        ch = template[i]
        if template.startswith("{{", i) or template.startswith("}}", i):
            out.append(ch)
            i += 2
        elif ch == "{":
            end = template.find("}", i)
            if end < 0:
                raise UserInputError(f"unclosed '{{' in {template!r}")
            name = template[i + 1:end].strip()
            if name not in values:
                raise UserInputError(f"unknown name {{{name}}} in {template!r}",
                                     hint="known here: " + ", ".join(sorted(values)))
            out.append(str(values[name]))
            i = end + 1
        else:
            out.append(ch)
            i += 1
    return "".join(out)
