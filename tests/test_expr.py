"""The campaign expression language evaluates arithmetic and refuses everything else."""

import pytest

from clusterbench.errors import UserInputError
from clusterbench.plan.expr import Expression, substitute
from clusterbench.plan.ranges import parse_int_values


@pytest.mark.parametrize("text, values, expected", [
    ("cores // threads", {"cores": 8, "threads": 2}, 4),
    ("p <= q", {"p": 2, "q": 4}, True),
    ("p <= q", {"p": 4, "q": 2}, False),
    ("1 <= p <= q < 8", {"p": 2, "q": 4}, True),
    ("nb * 10 if layout == 'mpi' else nb", {"nb": 32, "layout": "mpi"}, 320),
    ("min(n, 4000) // nb * nb", {"n": 9000, "nb": 192}, 3840),
    ("int(sqrt(0.8 * memory_bytes / 8))", {"memory_bytes": 8 * 10**6}, 894),
    ("blas in ['openblas-serial', 'blis-openmp']", {"blas": "blis-openmp"}, True),
    ("not (nb > 64 and layout == 'mpi')", {"nb": 128, "layout": "mpi"}, False),
    ("2 ** 10", {}, 1024),
])
def test_evaluates(text, values, expected):
    assert Expression(text).evaluate(values) == expected


def test_names_are_reported_for_dependency_order():
    assert Expression("min(cores // threads, ranks)").names == {"cores", "threads", "ranks"}


@pytest.mark.parametrize("text", [
    "__import__('os').system('true')",   # attribute access and a forbidden call
    "().__class__",                       # attribute access
    "open('/etc/passwd')",                # not a whitelisted function
    "[x for x in range(3)]",              # comprehension
    "lambda: 1",
    "a[0]",                               # subscript
    "2 ** 100000",                        # exponent limit (would hang)
    "nb +",                               # syntax
])
def test_refuses(text):
    with pytest.raises(UserInputError):
        Expression(text).evaluate({"a": [1], "nb": 1})


def test_unknown_name_lists_known_ones():
    with pytest.raises(UserInputError, match="unknown name 'foo'") as info:
        Expression("foo + 1").evaluate({"nb": 1})
    assert "nb" in str(info.value)


def test_substitute():
    assert substitute("mpirun -np {ranks} ./a {{x}}", {"ranks": 4}) == "mpirun -np 4 ./a {x}"
    with pytest.raises(UserInputError):
        substitute("{missing}", {})


def test_geometric_ranges():
    assert parse_int_values("1..1024:*4") == [1, 4, 16, 64, 256, 1024]
    with pytest.raises(UserInputError):
        parse_int_values("0..8:*2")
