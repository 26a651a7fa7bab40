"""Notebook cells: section 7, from functions to models (a linear model, softmax, a small network)."""

from __future__ import annotations

from notebook_cells import cell, code, md  # noqa: F401  (registers cells in order)

cell(
    "s7-intro",
    md(
        """## 7. From functions to models

The same discipline carries over to the models of the course. Each check below has its hand
derivation written first, in the record, with where it comes from (*origin*) and where PyTorch
puts the result (*destination*); the side panel can declare the same records, since every name
used here (`@`, `.T`, `mean`, `outer`, `softmax`, `log_softmax`, `tanh`) is in the expression
language (docs/expressions.md). Every input of a check is differentiated, data included, so each
record gives the gradient for the data as well as for the parameters.

### The mean squared error of a linear model

With the residual $r = Xw + b - y$ over $N$ samples and $L = \\frac{1}{N}\\sum_i r_i^2$:
$\\partial L/\\partial w = \\frac{2}{N} X^\\top r$ and $\\partial L/\\partial b = \\frac{2}{N}\\sum_i r_i$
(and $\\frac{2}{N}\\, r\\, w^\\top$ for $X$, $-\\frac{2}{N} r$ for $y$).""",
        """## 7. De las funciones a los modelos

La misma disciplina vale para los modelos del curso. Cada comprobación de abajo lleva primero su
derivación a mano, en el registro, con su procedencia (*origin*) y adónde deja PyTorch el
resultado (*destination*); el panel lateral puede declarar los mismos registros, porque todos los
nombres usados aquí (`@`, `.T`, `mean`, `outer`, `softmax`, `log_softmax`, `tanh`) están en el
lenguaje de expresiones (docs/expressions.md). Todas las entradas de una comprobación se derivan,
los datos también, así que cada registro da el gradiente respecto de los datos además del de los
parámetros.

### El error cuadrático medio de un modelo lineal

Con el residuo $r = Xw + b - y$ sobre $N$ muestras y $L = \\frac{1}{N}\\sum_i r_i^2$:
$\\partial L/\\partial w = \\frac{2}{N} X^\\top r$ y $\\partial L/\\partial b = \\frac{2}{N}\\sum_i r_i$
(y $\\frac{2}{N}\\, r\\, w^\\top$ para $X$, $-\\frac{2}{N} r$ para $y$).""",
    ),
)


def record_cell(
    name: str, check_id: str, function: str, inputs: str, gradients: dict, origin: str, destination: str
) -> str:
    """The code of one cell: a check record written out, then checked into the notebook's ledger."""
    written = "".join(f'\n        "{key}": "{value}",' for key, value in gradients.items())
    return (
        f'{name} = {{\n    "id": "{check_id}", "function": "{function}",\n    "inputs": {inputs},\n'
        f'    "analytical_gradient": {{{written}\n    }},\n    "origin": "{origin}",\n'
        f'    "destination": "{destination}",\n}}\nshow(check_record({name}, notebook=NOTEBOOK))'
    )


MSE_INPUTS = """{"X": [[1.0, 2.0], [3.0, -1.0], [0.5, 0.0], [2.0, 1.0]], "w": [0.3, -0.2], "b": 0.1,
               "y": [1.0, 0.0, 2.0, -1.0]}"""
MSE_GRADIENTS = {
    "w": "2/4 * X.T @ (X @ w + b - y)",
    "b": "2/4 * sum(X @ w + b - y)",
    "X": "2/4 * outer(X @ w + b - y, w)",
    "y": "-2/4 * (X @ w + b - y)",
}
cell(
    "s7-mse",
    code(
        record_cell(
            "LINEAR_MSE",
            "linear_model_mse",
            "mean((X @ w + b - y) ** 2)",
            MSE_INPUTS,
            MSE_GRADIENTS,
            "L = mean(r**2) with r = X @ w + b - y; chain rule through r: dL/dr = 2r/N",
            "w.grad (shape [2]), b.grad (shape []), X.grad (shape [4, 2]), y.grad (shape [4])",
        ),
        record_cell(
            "LINEAR_MSE",
            "linear_model_mse",
            "mean((X @ w + b - y) ** 2)",
            MSE_INPUTS,
            MSE_GRADIENTS,
            "L = mean(r**2) con r = X @ w + b - y; regla de la cadena a través de r: dL/dr = 2r/N",
            "w.grad (forma [2]), b.grad (forma []), X.grad (forma [4, 2]), y.grad (forma [4])",
        ),
    ),
)

cell(
    "s7-softmax-intro",
    md(
        """### Softmax with cross-entropy

For logits $z$ and a target distribution $y$ (here one-hot),
$L = -\\sum_j y_j \\log \\mathrm{softmax}(z)_j$ and, because $\\sum_j y_j = 1$,
$\\partial L/\\partial z = \\mathrm{softmax}(z) - y$: the famous result, which holds only when
$y$ sums to 1 (otherwise it is $\\mathrm{softmax}(z)\\sum_j y_j - y$).""",
        """### Softmax con entropía cruzada

Para los logits $z$ y una distribución objetivo $y$ (aquí one-hot),
$L = -\\sum_j y_j \\log \\mathrm{softmax}(z)_j$ y, como $\\sum_j y_j = 1$,
$\\partial L/\\partial z = \\mathrm{softmax}(z) - y$: el resultado famoso, que solo vale cuando $y$
suma 1 (si no, es $\\mathrm{softmax}(z)\\sum_j y_j - y$).""",
    ),
)

SOFTMAX_INPUTS = '{"z": [1.0, 2.0, 3.0], "y": [0.0, 1.0, 0.0]}'
SOFTMAX_GRADIENTS = {"z": "softmax(z, dim=0) - y", "y": "-log_softmax(z, dim=0)"}
cell(
    "s7-softmax",
    code(
        record_cell(
            "SOFTMAX_CE",
            "softmax_cross_entropy",
            "-(y * log_softmax(z, dim=0)).sum()",
            SOFTMAX_INPUTS,
            SOFTMAX_GRADIENTS,
            "L = -sum_j y_j (z_j - logsumexp(z)); dL/dz_i = softmax(z)_i sum_j y_j - y_i, and sum_j y_j = 1",
            "z.grad (shape [3]) and y.grad (shape [3])",
        ),
        record_cell(
            "SOFTMAX_CE",
            "softmax_cross_entropy",
            "-(y * log_softmax(z, dim=0)).sum()",
            SOFTMAX_INPUTS,
            SOFTMAX_GRADIENTS,
            "L = -sum_j y_j (z_j - logsumexp(z)); dL/dz_i = softmax(z)_i sum_j y_j - y_i, y sum_j y_j = 1",
            "z.grad (forma [3]) y y.grad (forma [3])",
        ),
    ),
)

cell(
    "s7-network-intro",
    md(
        """### A two-layer network, and a mistake kept

$H = \\tanh(X W_1)$, prediction $p = H w_2$, loss $L = \\frac{1}{N}\\sum_i (p_i - y_i)^2$. With
$r = p - y$ and $\\delta = (r\\, w_2^\\top) \\odot (1 - H^2)$ (the error sent back through $\\tanh$):
$\\partial L/\\partial w_2 = \\frac{2}{N} H^\\top r$, $\\partial L/\\partial W_1 = \\frac{2}{N} X^\\top \\delta$,
$\\partial L/\\partial X = \\frac{2}{N}\\, \\delta W_1^\\top$, $\\partial L/\\partial y = -\\frac{2}{N} r$.

The first try below forgets the derivative of $\\tanh$ in $\\partial L/\\partial W_1$ (the
factor $1 - H^2$), as students often do. The check fails and says so (`probable_bug`: autograd
and the finite differences agree with each other, not with the hand derivation); the failure is
kept, and the corrected derivation is a new declaration of its own, not an edit that hides the
first.""",
        """### Una red de dos capas, y un error conservado

$H = \\tanh(X W_1)$, predicción $p = H w_2$, pérdida $L = \\frac{1}{N}\\sum_i (p_i - y_i)^2$. Con
$r = p - y$ y $\\delta = (r\\, w_2^\\top) \\odot (1 - H^2)$ (el error que vuelve a través de $\\tanh$):
$\\partial L/\\partial w_2 = \\frac{2}{N} H^\\top r$, $\\partial L/\\partial W_1 = \\frac{2}{N} X^\\top \\delta$,
$\\partial L/\\partial X = \\frac{2}{N}\\, \\delta W_1^\\top$, $\\partial L/\\partial y = -\\frac{2}{N} r$.

El primer intento de abajo olvida la derivada de $\\tanh$ en $\\partial L/\\partial W_1$ (el factor
$1 - H^2$), como suele pasar. La comprobación falla y lo dice (`probable_bug`: autograd y las
diferencias finitas coinciden entre sí, no con la derivación a mano); el fallo se conserva, y la
derivación corregida es una declaración nueva, no una edición que esconda la primera.""",
    ),
)

NETWORK = """NETWORK_INPUTS = {{
    "X": [[1.0, 2.0], [3.0, -1.0], [0.5, 0.0], [2.0, 1.0]],
    "W1": [[0.2, -0.3, 0.1], [0.4, 0.1, -0.2]], "w2": [0.5, -0.4, 0.3], "y": [1.0, 0.0, 2.0, -1.0],
}}
RESIDUAL = "(tanh(X @ W1) @ w2 - y)"
BACK = f"outer({{RESIDUAL}}, w2) * (1 - tanh(X @ W1) ** 2)"
TWO_LAYER = {{
    "function": "mean((tanh(X @ W1) @ w2 - y) ** 2)", "inputs": NETWORK_INPUTS,
    "destination": "{destination}",
}}
# {comment_wrong}
FORGOT_TANH = {{
    **TWO_LAYER, "id": "two_layer_forgot_tanh_derivative",
    "analytical_gradient": {{
        "w2": f"2/4 * tanh(X @ W1).T @ {{RESIDUAL}}",
        "W1": f"2/4 * X.T @ outer({{RESIDUAL}}, w2)",
        "X": f"2/4 * ({{BACK}}) @ W1.T",
        "y": f"-2/4 * {{RESIDUAL}}",
    }},
    "origin": "{origin_wrong}",
}}
forgot = check_record(FORGOT_TANH, notebook=NOTEBOOK)
show(forgot)"""

cell(
    "s7-network-wrong",
    code(
        NETWORK.format(
            destination="w2.grad [3], W1.grad [2, 3], X.grad [4, 2], y.grad [4]",
            comment_wrong="A deliberate slip: W1's gradient without the derivative of tanh (1 - H**2).",
            origin_wrong="backpropagation through p = tanh(X @ W1) @ w2; slip: the factor 1 - H**2 forgotten in dL/dW1",
        ),
        NETWORK.format(
            destination="w2.grad [3], W1.grad [2, 3], X.grad [4, 2], y.grad [4]",
            comment_wrong="Un desliz deliberado: el gradiente de W1 sin la derivada de tanh (1 - H**2).",
            origin_wrong="retropropagación por p = tanh(X @ W1) @ w2; desliz: olvidado el factor 1 - H**2 en dL/dW1",
        ),
    ),
)

FIXED = """TWO_LAYER_FIXED = {{
    **TWO_LAYER, "id": "two_layer_network",
    "analytical_gradient": {{**FORGOT_TANH["analytical_gradient"], "W1": f"2/4 * X.T @ ({{BACK}})"}},
    "origin": "{origin}",
}}
fixed = check_record(TWO_LAYER_FIXED, notebook=NOTEBOOK)
show(fixed)
print("{kept}", forgot.passed, "·", "{fixed_word}", fixed.passed)"""

cell(
    "s7-network-fixed",
    code(
        FIXED.format(
            origin="backpropagation through p = tanh(X @ W1) @ w2, with delta = outer(r, w2) * (1 - H**2)",
            kept="the slip, kept: passed =",
            fixed_word="the corrected derivation: passed =",
        ),
        FIXED.format(
            origin="retropropagación por p = tanh(X @ W1) @ w2, con delta = outer(r, w2) * (1 - H**2)",
            kept="el desliz, conservado: passed =",
            fixed_word="la derivación corregida: passed =",
        ),
    ),
)

cell(
    "s7-ledger",
    code(
        'show_ledger("linear_model_mse", "softmax_cross_entropy", "two_layer_forgot_tanh_derivative", '
        '"two_layer_network")'
    ),
)
