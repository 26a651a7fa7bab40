"""The check's declaration and its fields: the spec, its values, tolerances, outputs, Hessian,
fixed arguments, the function's source and signature, the defaults, devices and the cost
estimate.

It imports no torch: the server process loads only this room. It may import `core.expr`,
never the other rooms of `core/check`.
"""
