"""A class defined in a notebook cell is read from the cell's text through its methods' code.

IPython compiles each cell under a file name of its own and keeps the cell's text in `linecache`
under that name; a class compiled there belongs to `__main__`, which has no file, so `inspect`
cannot find it. These stories compile cells the same way, in this process.
"""

from __future__ import annotations

import inspect
import linecache

import torch

from jupyterlab_gradcheck.core.check.record.source import function_source, source_hash
from support.functions import Cube

#: support.functions.Cube's class statement, as a student would type it into a cell.
CUBE = inspect.getsource(Cube).rstrip("\n")
#: The same class with its backward 1% off.
WRONG_CUBE = CUBE.replace("derivative = 3 * x * x", "derivative = 3.03 * x * x")


def _cell(name: str, text: str, kept: bool = True) -> dict:
    """The names a cell defines, compiled as IPython compiles it: under `name`, in `__main__`, its text
    kept in linecache (unless `kept` is False: a prompt that keeps nothing)."""
    if kept:
        linecache.cache[name] = (len(text), None, [line + "\n" for line in text.splitlines()], name)
    scope = {"__name__": "__main__", "torch": torch}
    exec(compile(text, name, "exec"), scope)
    return scope


def test_a_function_class_in_a_cell_is_its_own_text_not_its_metaclass():
    """Given two cells that each define a custom Function named Cube, the first with its backward off,
    when the source of each class is read,
    then each is its own cell's class text with that text's SHA-256, and the two hashes differ."""
    assert WRONG_CUBE != CUBE
    first = _cell("<cell-cube-1>", WRONG_CUBE)["Cube"]
    second = _cell("<cell-cube-2>", CUBE)["Cube"]
    one, two = function_source(first), function_source(second)
    assert one == {"text": WRONG_CUBE, "sha256": source_hash(WRONG_CUBE)}
    assert two == {"text": CUBE, "sha256": source_hash(CUBE)}
    assert one["sha256"] != two["sha256"]


def test_the_class_statement_holding_the_methods_is_the_one_read():
    """Given one cell that defines a helper class named Cube inside a function, then the Function Cube,
    when the Function's source is read,
    then the text is the Function's statement, decorator included, not the helper's nor the whole cell."""
    text = (
        "def helper():\n"
        "    class Cube:\n"
        "        def area(self):\n"
        "            return 1\n"
        "    return Cube\n"
        "\n"
        "\n"
        "def tagged(cls):\n"
        "    return cls\n"
        "\n"
        "\n"
        "@tagged\n" + CUBE + "\n\n\nprint('after')\n"
    )
    cube = _cell("<cell-cube-3>", text)["Cube"]
    assert function_source(cube)["text"] == "@tagged\n" + CUBE


def test_an_instance_of_a_cell_class_is_read_as_its_class():
    """Given a callable object whose class a cell defines, when its source is read, then it is the class's."""
    text = "class Loss:\n    def __call__(self, x):\n        return (x * x).sum()"
    loss = _cell("<cell-loss-1>", text)["Loss"]()
    assert function_source(loss)["text"] == text


def test_a_cell_whose_text_is_not_kept_has_no_source_and_never_torchs():
    """Given a Function class compiled from a cell whose text nobody kept (a plain interactive prompt),
    when its source is read, then it has none, with the reason, rather than the text of torch's
    metaclass (which every custom Function shares)."""
    cube = _cell("<cell-cube-unkept>", CUBE, kept=False)["Cube"]
    source = function_source(cube)
    assert (source["text"], source["sha256"]) == (None, None)
    assert source["reason"].startswith("OSError: ")  # inspect's words: which depend on whether __main__ has a file
