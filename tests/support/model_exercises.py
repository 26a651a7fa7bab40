"""The two model exercises as a student declares them, with the values worked out by hand.

Shared by the command-line and REST stories: softmax cross-entropy for one sample, and the
mean squared error of a linear model `X @ w + b` over four samples.
"""

from __future__ import annotations

import math

#: -(y * log_softmax(z)).sum() at z = [1, 2, 3] with the one-hot y = [0, 1, 0]. d/dz is
#: softmax(z) * sum(y) - y, which is softmax(z) - y because y sums to 1; d/dy is -log_softmax(z).
SOFTMAX_CROSS_ENTROPY = {
    "id": "softmax_cross_entropy",
    "function": "-(y*log_softmax(z, dim=0)).sum()",
    "inputs": {"z": [1.0, 2.0, 3.0], "y": [0.0, 1.0, 0.0]},
    "analytical_gradient": {"z": "softmax(z, dim=0) - y", "y": "-log_softmax(z, dim=0)"},
    "origin": "d/dz_i of -sum_j y_j (z_j - log sum_k exp z_k) = softmax(z)_i sum_j y_j - y_i",
    "destination": "z.grad and y.grad",
}

#: The same loss with the "- y" forgotten: the classic slip, a finding and not an error.
FORGOTTEN_TARGET = {
    **SOFTMAX_CROSS_ENTROPY,
    "id": "softmax_cross_entropy_forgot_y",
    "analytical_gradient": {"z": "softmax(z, dim=0)", "y": "-log_softmax(z, dim=0)"},
}

_TOTAL = math.exp(1) + math.exp(2) + math.exp(3)
#: softmax([1, 2, 3]) - [0, 1, 0], by hand.
SOFTMAX_MINUS_Y = [math.exp(1) / _TOTAL, math.exp(2) / _TOTAL - 1, math.exp(3) / _TOTAL]

#: mean((X @ w + b - y) ** 2) over N = 4 samples of 2 features. With the residual
#: r = X @ w + b - y = [-1.0, 1.2, -1.75, 1.5]: d/dw = 2/N X.T @ r, d/db = 2/N sum(r),
#: d/dX = 2/N outer(r, w), d/dy = -2/N r.
MEAN_SQUARED_ERROR = {
    "id": "linear_model_mse",
    "function": "mean((X @ w + b - y) ** 2)",
    "inputs": {
        "X": [[1.0, 2.0], [3.0, -1.0], [0.5, 0.0], [2.0, 1.0]],
        "w": [0.3, -0.2],
        "b": 0.1,
        "y": [1.0, 0.0, 2.0, -1.0],
    },
    "analytical_gradient": {
        "w": "2/4 * X.T @ (X @ w + b - y)",
        "b": "2/4 * sum(X @ w + b - y)",
        "X": "2/4 * outer(X @ w + b - y, w)",
        "y": "-2/4 * (X @ w + b - y)",
    },
    "origin": "chain rule through the residual r = X @ w + b - y of mean(r ** 2)",
    "destination": "w.grad, b.grad, X.grad and y.grad",
}

#: 2/4 * X.T @ r and 2/4 * sum(r) with r = [-1.0, 1.2, -1.75, 1.5], by hand.
MSE_W_GRADIENT = [0.5 * (-1.0 + 3.6 - 0.875 + 3.0), 0.5 * (-2.0 - 1.2 + 1.5)]  # [2.3625, -0.85]
MSE_B_GRADIENT = 0.5 * (-1.0 + 1.2 - 1.75 + 1.5)  # -0.025
