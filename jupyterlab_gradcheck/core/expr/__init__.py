"""The expression language: parse a function or derivative written as text, never `eval` it.

Holds the parser and its allow-list, the evaluator that walks a checked tree into torch calls,
shape inference, the function table, the input limits and the SymPy opinion. It imports
nothing from the other rooms (only `core.errors`).
"""
