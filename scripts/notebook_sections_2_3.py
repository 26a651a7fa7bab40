"""Notebook cells: section 2, the common confusion, and section 3, finite differences."""

from __future__ import annotations

from notebook_cells import SEED_TEXT, cell, code, md  # noqa: F401  (registers cells in order)

# ------------------------------------------------------------------ 2. the common confusion
cell(
    "s2-intro",
    md(
        """## 2. The common confusion

`backward()` does not *return* a gradient: it **adds** it into `.grad`. A second pass without
clearing gives twice the gradient. Clearing deliberately with `x.grad = None` and running a
fresh pass gives it back. `torch.autograd.grad` **returns** the gradient and leaves `.grad`
alone, so `.grad` stays `None`.

The expectations come first, in their own column; each pass is recomputed from `x` (the graph
is rebuilt every time), and what PyTorch gives goes in the next columns.""",
        """## 2. Probar la confusión habitual

`backward()` no *devuelve* un gradiente: lo **suma** en `.grad`. Una segunda pasada sin limpiar
da el doble del gradiente. Limpiar a propósito con `x.grad = None` y hacer una pasada nueva lo
devuelve a su valor. `torch.autograd.grad` **devuelve** el gradiente y no toca `.grad`, que
sigue siendo `None`.

Las expectativas van primero, en su propia columna; cada pasada se recalcula desde `x` (el
grafo se reconstruye cada vez), y lo que da PyTorch va en las columnas siguientes.""",
    ),
)

CONFUSION = """# {comment_expect}
expected = {{
    "{k1}": 6.0,
    "{k2}": 12.0,  # {comment_twice}
    "{k3}": 6.0,
    "{k4}": 6.0,
    "{k5}": None,  # {comment_none}
}}

x = torch.tensor(3.0, dtype=torch.float64, requires_grad=True)
observed = {{}}
(x * x).backward()  # {comment_rebuild}
observed["{k1}"] = x.grad.clone()
(x * x).backward()  # {comment_no_clear}
observed["{k2}"] = x.grad.clone()
x.grad = None  # {comment_clear}
(x * x).backward()
observed["{k3}"] = x.grad.clone()
x.grad = None
(returned,) = torch.autograd.grad(x * x, x)
observed["{k4}"] = returned
observed["{k5}"] = x.grad


def described(value):
    if value is None:
        return ["None", "-", "-", "-"]
    return [f"{{value.item():g}}", str(list(value.shape)), str(value.dtype).replace("torch.", ""), str(value.device)]


rows = "".join(
    f"<tr><td>{{step}}</td><td>{{expected[step]}}</td>" + "".join(f"<td>{{c}}</td>" for c in described(observed[step])) + "</tr>"
    for step in expected)
display(HTML("<table><tr><th>{h_step}</th><th>{h_expect}</th><th>{h_observe}</th><th>shape</th><th>dtype</th>"
             "<th>device</th></tr>" + rows + "</table>"))"""

cell(
    "s2-by-hand",
    code(
        CONFUSION.format(
            comment_expect="Expectations, written before any pass: f(x) = x*x at x = 3, f'(x) = 2x = 6.",
            k1="pass 1: x.grad",
            k2="pass 2, no clearing: x.grad",
            k3="x.grad = None, fresh pass: x.grad",
            k4="torch.autograd.grad: returned",
            k5="torch.autograd.grad: x.grad afterwards",
            comment_twice="backward() adds into .grad: 6 + 6",
            comment_none="autograd.grad returns the gradient; it does not write .grad",
            comment_rebuild="each pass rebuilds the graph from x",
            comment_no_clear="no clearing in between",
            comment_clear="the deliberate clearing",
            h_step="step",
            h_expect="expectation (written first)",
            h_observe="observation",
        ),
        CONFUSION.format(
            comment_expect="Expectativas, escritas antes de cualquier pasada: f(x) = x*x en x = 3, f'(x) = 2x = 6.",
            k1="pasada 1: x.grad",
            k2="pasada 2, sin limpiar: x.grad",
            k3="x.grad = None, pasada nueva: x.grad",
            k4="torch.autograd.grad: devuelto",
            k5="torch.autograd.grad: x.grad después",
            comment_twice="backward() suma en .grad: 6 + 6",
            comment_none="autograd.grad devuelve el gradiente; no escribe .grad",
            comment_rebuild="cada pasada reconstruye el grafo desde x",
            comment_no_clear="sin limpiar entre medias",
            comment_clear="la limpieza deliberada",
            h_step="paso",
            h_expect="expectativa (escrita primero)",
            h_observe="observación",
        ),
    ),
)

cell(
    "s2-engine-intro",
    md(
        """The checker makes the same passes for every check, records each one (value, shape, dtype,
device) and compares them: the second pass must be twice the first, the pass after clearing
must equal the first, and `torch.autograd.grad` must leave `.grad` untouched. Here they are for
the `square` check of section 1, as its ledger entry holds them.""",
        """El comprobador hace las mismas pasadas en cada comprobación, registra cada una (valor, forma,
tipo, dispositivo) y las compara: la segunda pasada debe ser el doble de la primera, la pasada
tras limpiar debe igualar a la primera y `torch.autograd.grad` no debe tocar `.grad`. Aquí
están para la comprobación `square` de la sección 1, tal como las guarda su entrada del
registro.""",
    ),
)

cell(
    "s2-engine",
    code(
        """display(HTML(observations_table(square.record) + comparisons_table(square.record)))
print("autograd_grad left .grad untouched:",
      square.record["observations"]["autograd_grad"]["grad_attribute_untouched"])""",
        """display(HTML(observations_table(square.record) + comparisons_table(square.record)))
print("autograd_grad no tocó .grad:",
      square.record["observations"]["autograd_grad"]["grad_attribute_untouched"])""",
    ),
)

# ------------------------------------------------------------------ 3. finite differences
cell(
    "s3-intro",
    md(
        """## 3. Finite differences

A third, independent witness: the central difference
$\\dfrac{f(x+h) - f(x-h)}{2h}$. Its error has two parts. **Truncation**, about
$h^2 |f\'\'\'(x)| / 6$, shrinks with the step. **Rounding**, about $\\varepsilon |f(x)| / h$ where
$\\varepsilon$ is the dtype's machine epsilon, grows as the step shrinks. The best step is near
$\\varepsilon^{1/3}$ and the best relative error near $\\varepsilon^{2/3}$: about $6\\cdot10^{-6}$
and $4\\cdot10^{-11}$ in float64, about $5\\cdot10^{-3}$ and $2\\cdot10^{-5}$ in float32.

We choose both the step and the tolerance, and write them in the record. For $\\sin x$ at
$x = 1$ (a function whose third derivative is not zero, so truncation shows) we take
$h = 10^{-5}$: truncation $\\approx 10^{-10} \\cos(1)/6 \\approx 9\\cdot10^{-12}$, rounding
$\\approx 2.2\\cdot10^{-16} \\cdot \\sin(1)/10^{-5} \\approx 2\\cdot10^{-11}$, together about
$5\\cdot10^{-11}$ relative to $\\cos 1$. A tolerance of `rtol = 1e-8` leaves a margin of a few
hundred for the constants, and still catches any derivative wrong by one part in $10^8$.""",
        """## 3. Diferencias finitas

Un tercer testigo, independiente: la diferencia central
$\\dfrac{f(x+h) - f(x-h)}{2h}$. Su error tiene dos partes. El **truncamiento**, del orden de
$h^2 |f\'\'\'(x)| / 6$, disminuye con el paso. El **redondeo**, del orden de
$\\varepsilon |f(x)| / h$, donde $\\varepsilon$ es el épsilon de máquina del tipo, crece al
reducir el paso. El mejor paso está cerca de $\\varepsilon^{1/3}$ y el mejor error relativo
cerca de $\\varepsilon^{2/3}$: unos $6\\cdot10^{-6}$ y $4\\cdot10^{-11}$ en float64, unos
$5\\cdot10^{-3}$ y $2\\cdot10^{-5}$ en float32.

Elegimos el paso y la tolerancia, y los escribimos en el registro. Para $\\sin x$ en $x = 1$
(una función cuya tercera derivada no es cero, así que el truncamiento se ve) tomamos
$h = 10^{-5}$: truncamiento $\\approx 10^{-10} \\cos(1)/6 \\approx 9\\cdot10^{-12}$, redondeo
$\\approx 2.2\\cdot10^{-16} \\cdot \\sin(1)/10^{-5} \\approx 2\\cdot10^{-11}$, en total unos
$5\\cdot10^{-11}$ relativos a $\\cos 1$. Una tolerancia `rtol = 1e-8` deja un margen de unos
cientos para las constantes, y aun así detecta cualquier derivada que se equivoque en una parte
entre $10^8$.""",
    ),
)

cell(
    "s3-chosen",
    code(
        """SIN_CHOSEN_STEP = {
    "id": "sin_chosen_step", "function": "sin(x)", "x": 1.0, "dtype": "float64",
    "analytical_gradient": "cos(x)",
    "finite_difference": {"scheme": "central", "step": 1e-5, "rtol": 1e-8, "atol": 1e-10},
    "origin": "output sin(x) (a scalar); by hand d/dx sin x = cos x, 0.5403 at x = 1",
    "destination": "x.grad (shape [])",
}
sin_chosen = check_record(SIN_CHOSEN_STEP, notebook=NOTEBOOK)
show(sin_chosen)
fd = next(c for c in sin_chosen.record["comparisons"] if c["name"] == "autograd_vs_finite_difference")
print(f"finite difference vs autograd: max rel err {fd['max_rel_err']:.2e} within rtol {fd['rtol']:g}: {fd['passed']}")""",
        """SIN_CHOSEN_STEP = {
    "id": "sin_chosen_step", "function": "sin(x)", "x": 1.0, "dtype": "float64",
    "analytical_gradient": "cos(x)",
    "finite_difference": {"scheme": "central", "step": 1e-5, "rtol": 1e-8, "atol": 1e-10},
    "origin": "salida sin(x) (un escalar); a mano d/dx sen x = cos x, 0.5403 en x = 1",
    "destination": "x.grad (forma [])",
}
sin_chosen = check_record(SIN_CHOSEN_STEP, notebook=NOTEBOOK)
show(sin_chosen)
fd = next(c for c in sin_chosen.record["comparisons"] if c["name"] == "autograd_vs_finite_difference")
print(f"diferencia finita frente a autograd: error relativo máx. {fd['max_rel_err']:.2e} dentro de rtol {fd['rtol']:g}: {fd['passed']}")""",
    ),
)

cell(
    "s3-sweep-intro",
    md(
        """### The step sweep: float32 against float64

The check also swept the step over seventeen decades, in both dtypes, measuring the error of
the central difference against the float64 autograd derivative. The V shape is the two errors
meeting: truncation on the right, rounding on the left. The dashed line is the step used, the
circle the theoretical floor $(\\varepsilon^{1/3}, \\varepsilon^{2/3})$.""",
        """### El barrido del paso: float32 frente a float64

La comprobación también barrió el paso a lo largo de diecisiete décadas, en los dos tipos,
midiendo el error de la diferencia central frente a la derivada de autograd en float64. La
forma de V es el encuentro de los dos errores: truncamiento a la derecha, redondeo a la
izquierda. La línea discontinua es el paso usado; el círculo, el suelo teórico
$(\\varepsilon^{1/3}, \\varepsilon^{2/3})$.""",
    ),
)

SWEEP = """sweep = sin_chosen.record["step_sweep"]
display(SVG(render_sweep(sweep)))
for series in sweep["series"]:
    at_1e7 = series["errors"][series["steps"].index(1e-7)]
    print(f"{{series['dtype']}}: eps {{series['eps']:.2e}} · {best} {{series['best_step']:.0e}} "
          f"({err} {{series['best_error']:.1e}}) · {at} h = 1e-7: {err} {{at_1e7:.1e}}")"""

cell(
    "s3-sweep",
    code(
        SWEEP.format(best="best step", err="error", at="at"),
        SWEEP.format(best="mejor paso", err="error", at="con"),
    ),
)

cell(
    "s3-float32-intro",
    md(
        """### Why float32 cannot use a step of 1e-7

Machine epsilon in float32 is $2^{-23} \\approx 1.19\\cdot10^{-7}$: between 2 and 4,
neighbouring float32 numbers are $2.4\\cdot10^{-7}$ apart. So $3 + 10^{-7}$ *is* 3 in float32:
the step vanishes before the function is even evaluated, both sides of the difference are the
same number, and the quotient is 0 instead of 6. Even where the step survives, rounding error
$\\varepsilon/h \\approx 1$ is as large as the derivative itself. The sweep above shows it for
$\\sin$ at 1: at $h = 10^{-7}$ the float32 error is about 0.1 (10 %), the float64 error below
$10^{-9}$.""",
        """### Por qué float32 no puede usar un paso de 1e-7

El épsilon de máquina en float32 es $2^{-23} \\approx 1.19\\cdot10^{-7}$: entre 2 y 4, dos
números float32 vecinos distan $2.4\\cdot10^{-7}$. Así que $3 + 10^{-7}$ *es* 3 en float32: el
paso desaparece antes incluso de evaluar la función, los dos lados de la diferencia son el mismo
número y el cociente vale 0 en vez de 6. Incluso donde el paso sobrevive, el error de redondeo
$\\varepsilon/h \\approx 1$ es tan grande como la propia derivada. El barrido de arriba lo
muestra para $\\sin$ en 1: con $h = 10^{-7}$ el error en float32 es de 0.1 (un 10 %), y el de
float64 queda por debajo de $10^{-9}$.""",
    ),
)

FLOAT32 = """h = 1e-7
for dtype in (torch.float32, torch.float64):
    x = torch.tensor(3.0, dtype=dtype)
    spacing = torch.nextafter(x, torch.tensor(4.0, dtype=dtype)) - x
    quotient = ((x + h) ** 2 - (x - h) ** 2) / (2 * h)
    print(f"{{str(dtype):<14}} {spacing_word} 3: {{spacing.item():.2e}} · 3 + 1e-7 == 3: {{bool(x + h == x)}} · "
          f"{quotient_word} {{quotient.item():.6g}} (shape {{list(quotient.shape)}}, {{quotient.dtype}}, {{quotient.device}})")"""

cell(
    "s3-float32",
    code(
        FLOAT32.format(spacing_word="spacing at", quotient_word="central quotient"),
        FLOAT32.format(spacing_word="separación en", quotient_word="cociente central"),
    ),
)

cell(
    "s3-float32-check-intro",
    md(
        """The checker says the same. A float32 check of the square that insists on $h = 10^{-7}$
fails, and the diagnosis blames the step, not the derivative (`precision_limited`). This is a
deliberate failure and it stays in the ledger. With the float32 default step,
$\\varepsilon^{1/3} \\approx 4.9\\cdot10^{-3}$, the same check passes.

**No exact equality is demanded.** The float32 finite difference is not 6 to the last bit; it
agrees with autograd within the tolerance written next to it (`rtol`, `atol`), and the error
is recorded, not rounded away.""",
        """El comprobador dice lo mismo. Una comprobación del cuadrado en float32 que se empeña en
$h = 10^{-7}$ falla, y el diagnóstico culpa al paso, no a la derivada (`precision_limited`).
Es un fallo deliberado y se queda en el registro. Con el paso por defecto de float32,
$\\varepsilon^{1/3} \\approx 4.9\\cdot10^{-3}$, la misma comprobación pasa.

**No se exige igualdad exacta.** La diferencia finita en float32 no es 6 hasta el último bit;
coincide con autograd dentro de la tolerancia escrita a su lado (`rtol`, `atol`), y el error
queda registrado, no se redondea.""",
    ),
)

cell(
    "s3-float32-check",
    code(
        """SQUARE_FLOAT32_TINY_STEP = {
    "id": "square_float32_step_1e-7", "function": "x*x", "x": 3.0, "dtype": "float32",
    "analytical_gradient": "2*x", "finite_difference": {"scheme": "central", "step": 1e-7},
    "origin": "output f = x*x in float32; by hand f'(x) = 2x = 6",
    "destination": "x.grad (shape [], float32)",
}
tiny_step = check_record(SQUARE_FLOAT32_TINY_STEP, notebook=NOTEBOOK)
show(tiny_step)

SQUARE_FLOAT32 = {
    "id": "square_float32", "function": "x*x", "x": 3.0, "dtype": "float32", "analytical_gradient": "2*x",
    "origin": "output f = x*x in float32; by hand f'(x) = 2x = 6",
    "destination": "x.grad (shape [], float32)",
}
square_float32 = check_record(SQUARE_FLOAT32, notebook=NOTEBOOK)
show(square_float32)
display(HTML(comparisons_table(square_float32.record)))""",
        """SQUARE_FLOAT32_TINY_STEP = {
    "id": "square_float32_step_1e-7", "function": "x*x", "x": 3.0, "dtype": "float32",
    "analytical_gradient": "2*x", "finite_difference": {"scheme": "central", "step": 1e-7},
    "origin": "salida f = x*x en float32; a mano f'(x) = 2x = 6",
    "destination": "x.grad (forma [], float32)",
}
tiny_step = check_record(SQUARE_FLOAT32_TINY_STEP, notebook=NOTEBOOK)
show(tiny_step)

SQUARE_FLOAT32 = {
    "id": "square_float32", "function": "x*x", "x": 3.0, "dtype": "float32", "analytical_gradient": "2*x",
    "origin": "salida f = x*x en float32; a mano f'(x) = 2x = 6",
    "destination": "x.grad (forma [], float32)",
}
square_float32 = check_record(SQUARE_FLOAT32, notebook=NOTEBOOK)
show(square_float32)
display(HTML(comparisons_table(square_float32.record)))""",
    ),
)
