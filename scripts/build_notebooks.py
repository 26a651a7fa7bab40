"""Build the gradient-check notebook, in English and in Spanish, from one structure.

Both editions come from the cell list below, so they cannot drift apart: each cell is written
once per language, in the same place. The code is the same in both editions except for
comments, printed words and the notebook's own file name.

    python scripts/build_notebooks.py            # write, execute with nbclient, export the report
    python scripts/build_notebooks.py --no-execute   # write the sources only (no outputs)

Executing runs each notebook on a copy in a temporary folder (so no ledger is left behind
from a half-finished run), then writes the executed notebook into examples/. The English
edition ships with the ledger it produced (bound to it in `metadata.gradcheck`), and its
HTML export and a headless-Chromium screenshot of that export go to docs/. The Spanish
edition ships executed, without a ledger: running it writes one beside it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
EDITIONS = {
    "en": ROOT / "examples" / "gradient-check-notebook.ipynb",
    "es": ROOT / "examples" / "es" / "cuaderno-comprobacion-gradientes.ipynb",
}
REPORT_HTML = ROOT / "docs" / "example-report.html"
REPORT_PNG = ROOT / "docs" / "example-report.png"
#: Seconds one cell may run under nbclient (the slowest, verify --replay, takes a few).
CELL_TIMEOUT = 120
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars")

#: The checks the notebook fails on purpose, each with the diagnosis the engine must give it.
DELIBERATE_FAILURES = {
    "square_float32_step_1e-7": "precision_limited",  # a float32 step of 1e-7 vanishes in rounding
    "square_wrong_derivative": "probable_bug",  # the 2 of 2x forgotten
    "relu_at_0": "kink",  # relu is not differentiable at 0
    "sin_step_1e-3": "precision_limited",  # a wide step under the default tolerance, before the change
}
#: The check whose tolerance is changed, with a written justification, after its failure.
TOLERANCE_CHANGED = "sin_step_1e-3"


def md(en: str, es: str) -> tuple:
    return ("markdown", en, es)


def code(en: str, es: str | None = None) -> tuple:
    return ("code", en, en if es is None else es)


SEED_TEXT = '{"function":"x*x","x":3,"analytical_gradient":6,"observed_gradient":null,"executed":false}'

# --------------------------------------------------------------------------------------------
# The cells. Each entry: (cell id, kind, English source, Spanish source).
# --------------------------------------------------------------------------------------------
CELLS: list[tuple[str, tuple]] = []


def cell(cell_id: str, content: tuple) -> None:
    CELLS.append((cell_id, content))


cell("title", md(
    """# A gradient-check notebook, executed

The course *Qué es PyTorch: tensores, diferenciación automática y modelos* asks the student to
build a notebook that compares derivatives worked out by hand with what PyTorch computes,
*without hiding the failures*, and says plainly that its notebook is a proposal that was never
executed. This is that notebook, executed.

Every check below runs through `jupyterlab_gradcheck` and lands in this notebook's **ledger**,
the file `gradient-check-notebook.gradcheck.jsonl` beside it: the expectation first, then
everything observed, failures included, each line chained to the one before by its hash.
Section 6 re-runs the whole ledger and exports it for grading.

| principle | where |
|---|---|
| 1. write the expectation first; expectation and observation in separate columns | §1, every table |
| 2. small functions, on the CPU first | §1 |
| 3. shape, dtype and device next to every result | every table |
| 4. the common confusion: `backward()` accumulates, `torch.autograd.grad` returns | §2 |
| 5. finite differences with a chosen step and tolerance; no exact equality | §3 |
| 6. keep the failures; justify every tolerance change | §4 |
| 7. proof of done is reproducibility; every derivative's origin and destination | §5, §6 |""",
    """# Un cuaderno de comprobación de gradientes, ejecutado

El curso *Qué es PyTorch: tensores, diferenciación automática y modelos* pide construir un
cuaderno que compare derivadas calculadas a mano con lo que calcula PyTorch, *sin ocultar los
fallos*, y advierte que su cuaderno es una propuesta que nunca se ejecutó. Este es ese
cuaderno, ejecutado.

Cada comprobación pasa por `jupyterlab_gradcheck` y queda en el **registro** (ledger) de este
cuaderno, el archivo `cuaderno-comprobacion-gradientes.gradcheck.jsonl` a su lado: primero la
expectativa, luego todo lo observado, fallos incluidos, y cada línea encadenada a la anterior
por su hash. La sección 6 vuelve a ejecutar todo el registro y lo exporta para la evaluación.

| principio | dónde |
|---|---|
| 1. escribir primero la expectativa; expectativa y observación en columnas separadas | §1, cada tabla |
| 2. funciones pequeñas, primero en CPU | §1 |
| 3. forma, tipo y dispositivo junto a cada resultado | cada tabla |
| 4. la confusión habitual: `backward()` acumula, `torch.autograd.grad` devuelve | §2 |
| 5. diferencias finitas con paso y tolerancia elegidos; sin igualdad exacta | §3 |
| 6. conservar los fallos; justificar cada cambio de tolerancia | §4 |
| 7. la prueba de que está terminado es la reproducibilidad; origen y destino de cada derivada | §5, §6 |""",
))

cell("setup-intro", md(
    """## Before you start

Python, basic calculus, and this package installed (`make lab` does it). No model, no data set,
no download, no GPU. The next cell names the notebook whose ledger we write: inside JupyterLab
the kernel is told (`JPY_SESSION_NAME`); a kernel started by `nbclient` or `nbconvert` is not,
so we fall back to this notebook's file name in the working folder.""",
    """## Antes de empezar

Python, cálculo básico y este paquete instalado (`make lab` lo hace). Ni modelos, ni conjuntos
de datos, ni descargas, ni GPU. La celda siguiente nombra el cuaderno cuyo registro escribimos:
dentro de JupyterLab el kernel lo sabe (`JPY_SESSION_NAME`); un kernel lanzado por `nbclient` o
`nbconvert` no, así que usamos el nombre de este cuaderno en la carpeta de trabajo.""",
))

SETUP = '''import json
import os
import subprocess
import sys
from html import escape
from pathlib import Path

import torch
from IPython.display import HTML, SVG, display

from jupyterlab_gradcheck.api import check_record
from jupyterlab_gradcheck.core.ledger import Ledger
from jupyterlab_gradcheck.core.record_html import (
    comparisons_table, diagnosis_block, expectation_observation_table, observations_table)
from jupyterlab_gradcheck.core.run import ledger_spec_dict
from jupyterlab_gradcheck.core.spec import parse_spec
from jupyterlab_gradcheck.core.sweep_svg import render as render_sweep
from jupyterlab_gradcheck.widget import GradcheckPanel

# {comment_session}
SESSION = os.environ.get("JPY_SESSION_NAME", "")
NOTEBOOK = Path(SESSION if SESSION.endswith(".ipynb") else "{notebook_name}")
LEDGER = Ledger.for_notebook(NOTEBOOK, bind=False)  # {comment_ledger}


def show(result):
    """{doc_show}"""
    display(HTML(expectation_observation_table(result.record) + diagnosis_block(result.record)))
    print(result.summary())


def show_ledger(*check_ids):
    """{doc_show_ledger}"""
    rows = []
    for entry in LEDGER.entries():
        if check_ids and entry["check_id"] not in check_ids:
            continue
        data = entry["data"]
        if entry["kind"] == "expectation":
            what = f"analytical_gradient = {{data['analytical_gradient']!r}}"
        elif entry["kind"] == "observation":
            what = f"passed = {{data['passed']}} (expectation at seq {{data['expectation_seq']}})"
        elif entry["kind"] == "tolerance_change":
            what = (f"{{data['target']}} {{data['old']}} -> {{data['new']}}; widened={{data['widened']}}, "
                    f"after_failure={{data['after_failure']}}; {justification_word}: {{data['justification']}}")
        else:
            what = json.dumps(data)
        rows.append(f"<tr><td>{{entry['seq']}}</td><td>{{entry['kind']}}</td><td><code>{{escape(str(entry['check_id']))}}</code></td>"
                    f"<td>{{escape(what)}}</td><td><code>{{entry['hash'][:12]}}</code></td></tr>")
    display(HTML("<table><tr><th>seq</th><th>kind</th><th>check</th><th>{what_word}</th><th>hash</th></tr>"
                 + "".join(rows) + "</table>"))


print(f"torch {{torch.__version__}} · python {{sys.version.split()[0]}} · {ledger_word} {{LEDGER.path.name}}")'''

cell("setup", code(
    SETUP.format(
        comment_session="Inside JupyterLab the kernel knows its notebook; under nbclient or nbconvert it does not.",
        notebook_name="gradient-check-notebook.ipynb",
        comment_ledger="read here to show the entries; checks write it",
        doc_show="The expectation beside the observation (value, shape, dtype, device), and any diagnosis.",
        doc_show_ledger="The ledger entries so far (of the given checks), one row each, in order.",
        justification_word="why", what_word="what", ledger_word="ledger"),
    SETUP.format(
        comment_session="Dentro de JupyterLab el kernel conoce su cuaderno; con nbclient o nbconvert no.",
        notebook_name="cuaderno-comprobacion-gradientes.ipynb",
        comment_ledger="se lee aquí para mostrar las entradas; las comprobaciones lo escriben",
        doc_show="La expectativa junto a la observación (valor, forma, tipo, dispositivo) y el diagnóstico si lo hay.",
        doc_show_ledger="Las entradas del registro hasta ahora (de las comprobaciones dadas), una por fila, en orden.",
        justification_word="por qué", what_word="qué", ledger_word="registro"),
))

# ------------------------------------------------------------------ 1. small functions
cell("s1-intro", md(
    """## 1. Choose small functions

Two functions small enough to differentiate by hand, on the CPU, in float64:

* the square, $f(x) = x \\cdot x$ at $x = 3$: by hand $f'(x) = 2x$, so **6**;
* a short vector sum, $g(v) = v_1 + v_2 + v_3$ at $v = (1, 2, 3)$: by hand
  $\\partial g / \\partial v_i = 1$, so **(1, 1, 1)**.

The derivatives are written down now, as ledger **expectations**, before any cell computes a
gradient. Each record also says where the derivative comes from (`origin`: which output, which
hand derivation) and where it lands (`destination`: which input's gradient).""",
    """## 1. Elegir funciones pequeñas

Dos funciones lo bastante pequeñas para derivarlas a mano, en CPU y en float64:

* el cuadrado, $f(x) = x \\cdot x$ en $x = 3$: a mano $f'(x) = 2x$, es decir **6**;
* una suma vectorial corta, $g(v) = v_1 + v_2 + v_3$ en $v = (1, 2, 3)$: a mano
  $\\partial g / \\partial v_i = 1$, es decir **(1, 1, 1)**.

Las derivadas se escriben ahora, como **expectativas** en el registro, antes de que ninguna
celda calcule un gradiente. Cada registro dice además de dónde viene la derivada (`origin`: qué
salida, qué derivación a mano) y adónde llega (`destination`: el gradiente de qué entrada).""",
))

cell("s1-expectations", code(
    '''SQUARE = {
    "id": "square", "function": "x*x", "x": 3.0, "dtype": "float64", "device": "cpu",
    "analytical_gradient": "2*x",
    "origin": "output f = x*x (a scalar); by hand f'(x) = 2x, so 6 at x = 3",
    "destination": "x.grad: the gradient of f with respect to the input x (shape [])",
}
VECTOR_SUM = {
    "id": "vector_sum", "function": "sum(v)", "v": [1.0, 2.0, 3.0], "dtype": "float64", "device": "cpu",
    "analytical_gradient": [1.0, 1.0, 1.0],
    "origin": "output g = v1 + v2 + v3 (a scalar); by hand dg/dvi = 1 for each i",
    "destination": "v.grad: the gradient of g with respect to the input v (shape [3])",
}
# The expectations go into the ledger now, before anything is computed.
for spec in (SQUARE, VECTOR_SUM):
    LEDGER.record_expectation(ledger_spec_dict(parse_spec(spec)))
show_ledger("square", "vector_sum")''',
    '''SQUARE = {
    "id": "square", "function": "x*x", "x": 3.0, "dtype": "float64", "device": "cpu",
    "analytical_gradient": "2*x",
    "origin": "salida f = x*x (un escalar); a mano f'(x) = 2x, es decir 6 en x = 3",
    "destination": "x.grad: el gradiente de f respecto de la entrada x (forma [])",
}
VECTOR_SUM = {
    "id": "vector_sum", "function": "sum(v)", "v": [1.0, 2.0, 3.0], "dtype": "float64", "device": "cpu",
    "analytical_gradient": [1.0, 1.0, 1.0],
    "origin": "salida g = v1 + v2 + v3 (un escalar); a mano dg/dvi = 1 para cada i",
    "destination": "v.grad: el gradiente de g respecto de la entrada v (forma [3])",
}
# Las expectativas entran en el registro ahora, antes de calcular nada.
for spec in (SQUARE, VECTOR_SUM):
    LEDGER.record_expectation(ledger_spec_dict(parse_spec(spec)))
show_ledger("square", "vector_sum")''',
))

cell("s1-run-intro", md(
    """Now the checks run. Running a check writes its expectation once more, immediately before the
run, and the observation points at that entry (`expectation at seq`): a check cannot be
observed without an expectation in front of it. The table keeps the two kinds of evidence in
separate columns, and every observed value carries its shape, dtype and device.""",
    """Ahora se ejecutan las comprobaciones. Ejecutar una comprobación vuelve a escribir su
expectativa justo antes de la ejecución, y la observación apunta a esa entrada (`expectation at
seq`): no se puede observar una comprobación sin una expectativa delante. La tabla mantiene los
dos tipos de evidencia en columnas separadas, y cada valor observado lleva su forma, su tipo y
su dispositivo.""",
))

cell("s1-run", code(
    '''square = check_record(SQUARE, notebook=NOTEBOOK)
show(square)
vector_sum = check_record(VECTOR_SUM, notebook=NOTEBOOK)
show(vector_sum)''',
))

cell("s1-ledger", code('show_ledger("square", "vector_sum")'))

cell("s1-seed-intro", md(
    """### The course's own record

The course gives one record to copy. It runs exactly as written: the text below is parsed as
JSON, nothing added. It comes back with `observed_gradient` filled in and `executed` true,
plus everything that was observed. The record names no `id`, so one is made from its function.""",
    """### El registro del propio curso

El curso da un registro para copiar. Se ejecuta tal cual está escrito: el texto de abajo se
interpreta como JSON, sin añadir nada. Vuelve con `observed_gradient` relleno y `executed` a
true, junto con todo lo observado. El registro no trae `id`, así que se genera uno a partir de
su función.""",
))

cell("s1-seed", code(
    f'''SEED = json.loads('{SEED_TEXT}')
seed = check_record(SEED, notebook=NOTEBOOK)
print("id:", seed.record["id"])
print("observed_gradient:", seed.record["observed_gradient"], "· executed:", seed.record["executed"],
      "· passed:", seed.record["passed"])
seed''',
))

# ------------------------------------------------------------------ 2. the common confusion
cell("s2-intro", md(
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
))

CONFUSION = '''# {comment_expect}
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
             "<th>device</th></tr>" + rows + "</table>"))'''

cell("s2-by-hand", code(
    CONFUSION.format(
        comment_expect="Expectations, written before any pass: f(x) = x*x at x = 3, f'(x) = 2x = 6.",
        k1="pass 1: x.grad", k2="pass 2, no clearing: x.grad", k3="x.grad = None, fresh pass: x.grad",
        k4="torch.autograd.grad: returned", k5="torch.autograd.grad: x.grad afterwards",
        comment_twice="backward() adds into .grad: 6 + 6",
        comment_none="autograd.grad returns the gradient; it does not write .grad",
        comment_rebuild="each pass rebuilds the graph from x",
        comment_no_clear="no clearing in between",
        comment_clear="the deliberate clearing",
        h_step="step", h_expect="expectation (written first)", h_observe="observation"),
    CONFUSION.format(
        comment_expect="Expectativas, escritas antes de cualquier pasada: f(x) = x*x en x = 3, f'(x) = 2x = 6.",
        k1="pasada 1: x.grad", k2="pasada 2, sin limpiar: x.grad", k3="x.grad = None, pasada nueva: x.grad",
        k4="torch.autograd.grad: devuelto", k5="torch.autograd.grad: x.grad después",
        comment_twice="backward() suma en .grad: 6 + 6",
        comment_none="autograd.grad devuelve el gradiente; no escribe .grad",
        comment_rebuild="cada pasada reconstruye el grafo desde x",
        comment_no_clear="sin limpiar entre medias",
        comment_clear="la limpieza deliberada",
        h_step="paso", h_expect="expectativa (escrita primero)", h_observe="observación"),
))

cell("s2-engine-intro", md(
    """The checker makes the same passes for every check, records each one (value, shape, dtype,
device) and compares them: the second pass must be twice the first, the pass after clearing
must equal the first, and `torch.autograd.grad` must leave `.grad` untouched. Here they are for
the `square` check of section 1, as its ledger entry holds them.""",
    """El comprobador hace las mismas pasadas en cada comprobación, registra cada una (valor, forma,
tipo, dispositivo) y las compara: la segunda pasada debe ser el doble de la primera, la pasada
tras limpiar debe igualar a la primera y `torch.autograd.grad` no debe tocar `.grad`. Aquí
están para la comprobación `square` de la sección 1, tal como las guarda su entrada del
registro.""",
))

cell("s2-engine", code(
    '''display(HTML(observations_table(square.record) + comparisons_table(square.record)))
print("autograd_grad left .grad untouched:",
      square.record["observations"]["autograd_grad"]["grad_attribute_untouched"])''',
    '''display(HTML(observations_table(square.record) + comparisons_table(square.record)))
print("autograd_grad no tocó .grad:",
      square.record["observations"]["autograd_grad"]["grad_attribute_untouched"])''',
))

# ------------------------------------------------------------------ 3. finite differences
cell("s3-intro", md(
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
))

cell("s3-chosen", code(
    '''SIN_CHOSEN_STEP = {
    "id": "sin_chosen_step", "function": "sin(x)", "x": 1.0, "dtype": "float64",
    "analytical_gradient": "cos(x)",
    "finite_difference": {"scheme": "central", "step": 1e-5, "rtol": 1e-8, "atol": 1e-10},
    "origin": "output sin(x) (a scalar); by hand d/dx sin x = cos x, 0.5403 at x = 1",
    "destination": "x.grad (shape [])",
}
sin_chosen = check_record(SIN_CHOSEN_STEP, notebook=NOTEBOOK)
show(sin_chosen)
fd = next(c for c in sin_chosen.record["comparisons"] if c["name"] == "autograd_vs_finite_difference")
print(f"finite difference vs autograd: max rel err {fd['max_rel_err']:.2e} within rtol {fd['rtol']:g}: {fd['passed']}")''',
    '''SIN_CHOSEN_STEP = {
    "id": "sin_chosen_step", "function": "sin(x)", "x": 1.0, "dtype": "float64",
    "analytical_gradient": "cos(x)",
    "finite_difference": {"scheme": "central", "step": 1e-5, "rtol": 1e-8, "atol": 1e-10},
    "origin": "salida sin(x) (un escalar); a mano d/dx sen x = cos x, 0.5403 en x = 1",
    "destination": "x.grad (forma [])",
}
sin_chosen = check_record(SIN_CHOSEN_STEP, notebook=NOTEBOOK)
show(sin_chosen)
fd = next(c for c in sin_chosen.record["comparisons"] if c["name"] == "autograd_vs_finite_difference")
print(f"diferencia finita frente a autograd: error relativo máx. {fd['max_rel_err']:.2e} dentro de rtol {fd['rtol']:g}: {fd['passed']}")''',
))

cell("s3-sweep-intro", md(
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
))

SWEEP = '''sweep = sin_chosen.record["step_sweep"]
display(SVG(render_sweep(sweep)))
for series in sweep["series"]:
    at_1e7 = series["errors"][series["steps"].index(1e-7)]
    print(f"{{series['dtype']}}: eps {{series['eps']:.2e}} · {best} {{series['best_step']:.0e}} "
          f"({err} {{series['best_error']:.1e}}) · {at} h = 1e-7: {err} {{at_1e7:.1e}}")'''

cell("s3-sweep", code(
    SWEEP.format(best="best step", err="error", at="at"),
    SWEEP.format(best="mejor paso", err="error", at="con"),
))

cell("s3-float32-intro", md(
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
))

FLOAT32 = '''h = 1e-7
for dtype in (torch.float32, torch.float64):
    x = torch.tensor(3.0, dtype=dtype)
    spacing = torch.nextafter(x, torch.tensor(4.0, dtype=dtype)) - x
    quotient = ((x + h) ** 2 - (x - h) ** 2) / (2 * h)
    print(f"{{str(dtype):<14}} {spacing_word} 3: {{spacing.item():.2e}} · 3 + 1e-7 == 3: {{bool(x + h == x)}} · "
          f"{quotient_word} {{quotient.item():.6g}} (shape {{list(quotient.shape)}}, {{quotient.dtype}}, {{quotient.device}})")'''

cell("s3-float32", code(
    FLOAT32.format(spacing_word="spacing at", quotient_word="central quotient"),
    FLOAT32.format(spacing_word="separación en", quotient_word="cociente central"),
))

cell("s3-float32-check-intro", md(
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
))

cell("s3-float32-check", code(
    '''SQUARE_FLOAT32_TINY_STEP = {
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
display(HTML(comparisons_table(square_float32.record)))''',
    '''SQUARE_FLOAT32_TINY_STEP = {
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
display(HTML(comparisons_table(square_float32.record)))''',
))

# ------------------------------------------------------------------ 4. exploit the failures
cell("s4-intro", md(
    """## 4. Exploit the failures

A failed check is a finding, not an error: it comes back as a record with `passed` false, it is
kept in the ledger with its code, environment and discrepancy, and the notebook goes on.

### A wrong derivative, kept

Here the 2 of $2x$ is forgotten on purpose. The diagnosis compares all three witnesses: autograd
and the finite difference agree with each other and not with the hand derivation, so the
expectation is what is wrong (`probable_bug`).""",
    """## 4. Aprovechar los fallos

Una comprobación que falla es un hallazgo, no un error: vuelve como un registro con `passed` a
false, se conserva en el registro con su código, su entorno y su discrepancia, y el cuaderno
sigue.

### Una derivada equivocada, conservada

Aquí se olvida a propósito el 2 de $2x$. El diagnóstico compara los tres testigos: autograd y
la diferencia finita coinciden entre sí y no con la derivación a mano, así que lo equivocado es
la expectativa (`probable_bug`).""",
))

cell("s4-wrong", code(
    '''SQUARE_WRONG = {
    "id": "square_wrong_derivative", "function": "x*x", "x": 3.0, "analytical_gradient": "x",
    "origin": "output f = x*x; a deliberate slip in the hand derivation: f'(x) written as x (the 2 forgotten)",
    "destination": "x.grad (shape [])",
}
wrong = check_record(SQUARE_WRONG, notebook=NOTEBOOK)
show(wrong)''',
    '''SQUARE_WRONG = {
    "id": "square_wrong_derivative", "function": "x*x", "x": 3.0, "analytical_gradient": "x",
    "origin": "salida f = x*x; un desliz deliberado en la derivación a mano: f'(x) escrita como x (olvidado el 2)",
    "destination": "x.grad (forma [])",
}
wrong = check_record(SQUARE_WRONG, notebook=NOTEBOOK)
show(wrong)''',
))

cell("s4-wrong-kept", code(
    '''# No exception was raised: the notebook goes on, and the failure is in the ledger.
print("passed:", wrong.passed)
show_ledger("square_wrong_derivative")''',
    '''# No se lanzó ninguna excepción: el cuaderno sigue, y el fallo está en el registro.
print("passed:", wrong.passed)
show_ledger("square_wrong_derivative")''',
))

cell("s4-kink-intro", md(
    """### A kink: relu at 0

$\\mathrm{relu}(x) = \\max(x, 0)$ has slope 0 on the left of 0 and 1 on the right; at 0 it has
no derivative, and PyTorch uses the convention 0. The central difference straddles the kink
and gives $(1 + 0)/2 = 0.5$. The diagnosis (`kink`) says why: the one-sided differences
disagree and do not converge as the step shrinks. No tolerance would be honest here; the
failure is kept as the record of where the function is not differentiable. Away from 0 the
same derivative checks cleanly.""",
    """### Un punto anguloso: relu en 0

$\\mathrm{relu}(x) = \\max(x, 0)$ tiene pendiente 0 a la izquierda de 0 y 1 a la derecha; en 0
no tiene derivada, y PyTorch usa el convenio 0. La diferencia central cae a ambos lados del
ángulo y da $(1 + 0)/2 = 0.5$. El diagnóstico (`kink`) explica por qué: las diferencias
laterales no coinciden y no convergen al reducir el paso. Aquí ninguna tolerancia sería
honesta; el fallo se conserva como constancia de dónde la función no es derivable. Lejos de 0,
la misma derivada se comprueba sin problemas.""",
))

cell("s4-kink", code(
    '''RELU_AT_0 = {
    "id": "relu_at_0", "function": "relu(x)", "x": 0.0, "analytical_gradient": 0,
    "origin": "output relu(x); by hand slope 0 for x < 0 and 1 for x > 0; at 0 PyTorch's convention 0",
    "destination": "x.grad (shape [])",
}
kink = check_record(RELU_AT_0, notebook=NOTEBOOK)
show(kink)

RELU_AWAY_FROM_0 = {
    "id": "relu_away_from_0", "function": "sum(relu(x))", "x": [-1.0, 0.5, 2.0], "analytical_gradient": [0, 1, 1],
    "origin": "output sum(relu(x)) (a scalar); by hand 0 where x < 0 and 1 where x > 0",
    "destination": "x.grad (shape [3])",
}
show(check_record(RELU_AWAY_FROM_0, notebook=NOTEBOOK))''',
    '''RELU_AT_0 = {
    "id": "relu_at_0", "function": "relu(x)", "x": 0.0, "analytical_gradient": 0,
    "origin": "salida relu(x); a mano pendiente 0 para x < 0 y 1 para x > 0; en 0 el convenio de PyTorch, 0",
    "destination": "x.grad (forma [])",
}
kink = check_record(RELU_AT_0, notebook=NOTEBOOK)
show(kink)

RELU_AWAY_FROM_0 = {
    "id": "relu_away_from_0", "function": "sum(relu(x))", "x": [-1.0, 0.5, 2.0], "analytical_gradient": [0, 1, 1],
    "origin": "salida sum(relu(x)) (un escalar); a mano 0 donde x < 0 y 1 donde x > 0",
    "destination": "x.grad (forma [3])",
}
show(check_record(RELU_AWAY_FROM_0, notebook=NOTEBOOK))''',
))

cell("s4-tolerance-intro", md(
    """### A tolerance change, justified

Take $\\sin x$ at $x = 1$ again, now with a wide step, $h = 10^{-3}$ (the kind of step float32
needs). Under the default float64 finite-difference tolerance, which assumes the optimal step,
the check fails; the diagnosis says the discrepancy is what this step can resolve
(`precision_limited`). That failure is kept.

The tolerance may then change, but only with a written justification, and the change lands in
the ledger beside the failure it follows (`after_failure`, `widened`), where whoever grades
sees it. Widening "until it passes" would erase the evidence; here the new tolerance is derived
from the error bound of the chosen step. (Run again later, the first cell takes the ledger's
current tolerance; the first failure stays in the history.)""",
    """### Un cambio de tolerancia, justificado

Volvamos a $\\sin x$ en $x = 1$, ahora con un paso ancho, $h = 10^{-3}$ (el tipo de paso que
necesita float32). Con la tolerancia por defecto de las diferencias finitas en float64, que
supone el paso óptimo, la comprobación falla; el diagnóstico dice que la discrepancia es la que
este paso puede resolver (`precision_limited`). Ese fallo se conserva.

La tolerancia puede cambiar entonces, pero solo con una justificación escrita, y el cambio queda
en el registro junto al fallo al que sigue (`after_failure`, `widened`), donde lo ve quien
evalúa. Ampliarla «hasta que pase» borraría la evidencia; aquí la nueva tolerancia se deduce de
la cota de error del paso elegido. (Si se ejecuta de nuevo más tarde, la primera celda toma la
tolerancia vigente del registro; el primer fallo sigue en el historial.)""",
))

cell("s4-tolerance-first", code(
    '''SIN_WIDE_STEP = {
    "id": "sin_step_1e-3", "function": "sin(x)", "x": 1.0, "analytical_gradient": "cos(x)",
    "finite_difference": {"scheme": "central", "step": 1e-3},
    "origin": "output sin(x) (a scalar); by hand d/dx sin x = cos x",
    "destination": "x.grad (shape [])",
}
first = check_record(SIN_WIDE_STEP, notebook=NOTEBOOK)
show(first)''',
    '''SIN_WIDE_STEP = {
    "id": "sin_step_1e-3", "function": "sin(x)", "x": 1.0, "analytical_gradient": "cos(x)",
    "finite_difference": {"scheme": "central", "step": 1e-3},
    "origin": "salida sin(x) (un escalar); a mano d/dx sen x = cos x",
    "destination": "x.grad (forma [])",
}
first = check_record(SIN_WIDE_STEP, notebook=NOTEBOOK)
show(first)''',
))

cell("s4-tolerance-change", code(
    '''JUSTIFICATION = (
    "The step h = 1e-3 is deliberate: it is the step a float32 function needs, kept here in float64 "
    "to size a tolerance from an error bound. At that step the central difference has truncation "
    "error h^2 |f\'\'\'(x)| / 6 = 1e-6 cos(1) / 6 = 9.0e-8, which is 1.7e-7 relative to cos(1); "
    "rounding adds about 2e-13. The default rtol 3.7e-9 assumes the optimal step 6e-6. "
    "rtol = atol = 1e-6 covers the bound with a margin of about 6 and still fails a derivative "
    "wrong by more than one part in a million."
)
second = check_record(
    {**SIN_WIDE_STEP, "finite_difference": {"scheme": "central", "step": 1e-3, "rtol": 1e-6, "atol": 1e-6}},
    justification=JUSTIFICATION, notebook=NOTEBOOK)
second  # the whole record, with the check's history: the failure kept, the change and why''',
    '''JUSTIFICATION = (
    "El paso h = 1e-3 es deliberado: es el paso que necesita una función en float32, mantenido aquí en "
    "float64 para dimensionar una tolerancia a partir de una cota de error. Con ese paso la diferencia "
    "central tiene un error de truncamiento h^2 |f\'\'\'(x)| / 6 = 1e-6 cos(1) / 6 = 9.0e-8, es decir "
    "1.7e-7 relativo a cos(1); el redondeo añade unos 2e-13. La rtol por defecto, 3.7e-9, supone el "
    "paso óptimo 6e-6. rtol = atol = 1e-6 cubre la cota con un margen de unas 6 veces y aun así "
    "rechaza una derivada que se equivoque en más de una parte por millón."
)
second = check_record(
    {**SIN_WIDE_STEP, "finite_difference": {"scheme": "central", "step": 1e-3, "rtol": 1e-6, "atol": 1e-6}},
    justification=JUSTIFICATION, notebook=NOTEBOOK)
second  # el registro completo, con el historial de la comprobación: el fallo conservado, el cambio y su porqué''',
))

cell("s4-tolerance-ledger", code('show_ledger("sin_step_1e-3")'))

# ------------------------------------------------------------------ 5. origin and destination
cell("s5-intro", md(
    """## 5. Origin and destination

For every derivative in this notebook: where it came from (which output, which hand derivation)
and where it lands (which input's gradient, with the shape, dtype and device it arrived with).
The table is read from the ledger, so it covers every check that ran, not a list typed by
hand. The course's seed record carries no origin or destination (it runs as written), so those
two are written here for it. The passes of section 2 are the `square` derivative again.""",
    """## 5. Origen y destino

Para cada derivada de este cuaderno: de dónde viene (qué salida, qué derivación a mano) y
adónde llega (el gradiente de qué entrada, con la forma, el tipo y el dispositivo con que
llegó). La tabla se lee del registro, así que cubre todas las comprobaciones que se ejecutaron,
no una lista escrita a mano. El registro semilla del curso no trae origen ni destino (se ejecuta
tal cual), así que se escriben aquí. Las pasadas de la sección 2 son otra vez la derivada de
`square`.""",
))

ORIGINS = '''WRITTEN_HERE = {{
    seed.record["id"]: ("{seed_origin}", "{seed_destination}"),
}}
rows, missing = [], []
for check_id, history in LEDGER.checks().items():
    record = history["latest_observation"]["data"]["record"]
    origin, destination = WRITTEN_HERE.get(check_id, (record["origin"], record["destination"]))
    if not origin or not destination:
        missing.append(check_id)
    output = record["grad_output_used"]
    landed = "<br>".join(
        f"{{name}}: {{g['value']}} · shape {{g['shape']}} · {{g['dtype']}} · {{g['device']}}"
        for name, g in record["observations"]["backward_pass_1"]["gradients"].items())
    rows.append(f"<tr><td><code>{{escape(check_id)}}</code></td><td><code>{{escape(record['function'])}}</code> "
                f"({out_word} {{output['shape']}})</td><td>{{escape(origin)}}</td>"
                f"<td><code>{{escape(str(record['analytical_gradient']))}}</code></td><td>{{escape(destination)}}</td>"
                f"<td>{{landed}}</td><td>{{'passed' if record['passed'] else 'failed'}}</td></tr>")
display(HTML("<table><tr><th>{h_check}</th><th>{h_output}</th><th>{h_origin}</th><th>{h_expect}</th>"
             "<th>{h_dest}</th><th>{h_landed}</th><th>{h_verdict}</th></tr>" + "".join(rows) + "</table>"))
assert not missing, f"{missing_word}: {{missing}}"'''

cell("s5-table", code(
    ORIGINS.format(
        seed_origin="output f = x*x (the course's seed record); by hand f'(x) = 2x = 6 at x = 3",
        seed_destination="x.grad (shape [])", out_word="output shape",
        h_check="check", h_output="output", h_origin="origin: hand derivation", h_expect="expectation",
        h_dest="destination", h_landed="landed (backward_pass_1)", h_verdict="verdict",
        missing_word="checks without an origin or destination"),
    ORIGINS.format(
        seed_origin="salida f = x*x (el registro semilla del curso); a mano f'(x) = 2x = 6 en x = 3",
        seed_destination="x.grad (forma [])", out_word="forma de la salida",
        h_check="comprobación", h_output="salida", h_origin="origen: derivación a mano", h_expect="expectativa",
        h_dest="destino", h_landed="llegó (backward_pass_1)", h_verdict="veredicto",
        missing_word="comprobaciones sin origen o destino"),
))

# ------------------------------------------------------------------ 6. the proof
cell("s6-intro", md(
    """## 6. The proof

Proof of done is reproducibility. `jupyter gradcheck verify --replay` is what an instructor
runs on a submission: it checks the hash chain of this notebook's ledger (nothing removed,
inserted, reordered or edited), that every observation follows its expectation, that every
tolerance change carries its justification, and then **re-runs every recorded observation**
and confirms each value within the tolerance the record itself used. The widening of section 4
is reported as a flag for the grader, not hidden. The deliberate failures replay as failures:
reproducing a failure is a success.""",
    """## 6. La prueba

La prueba de que está terminado es la reproducibilidad. `jupyter gradcheck verify --replay` es
lo que ejecuta un profesor sobre una entrega: comprueba la cadena de hashes del registro de este
cuaderno (nada quitado, insertado, reordenado ni editado), que cada observación sigue a su
expectativa, que cada cambio de tolerancia lleva su justificación, y después **vuelve a ejecutar
cada observación registrada** y confirma cada valor dentro de la tolerancia que usó el propio
registro. La ampliación de la sección 4 aparece como una marca para quien evalúa, no se oculta.
Los fallos deliberados se reproducen como fallos: reproducir un fallo es un éxito.""",
))

PROOF = '''def jupyter_gradcheck(*args):
    """{doc}"""
    done = subprocess.run([sys.executable, "-m", "jupyter", "gradcheck", *args],
                          cwd=NOTEBOOK.parent, capture_output=True, text=True)
    print((done.stdout + done.stderr).strip())
    print("exit code", done.returncode)
    return done


assert jupyter_gradcheck("verify", NOTEBOOK.name, "--replay").returncode == 0'''

cell("s6-verify", code(
    PROOF.format(doc="`jupyter gradcheck ARGS`, run beside the notebook as a grader would run it."),
    PROOF.format(doc="`jupyter gradcheck ARGS`, ejecutado junto al cuaderno como lo haría quien evalúa."),
))

cell("s6-export-intro", md(
    """The export for grading: one self-contained HTML page (no scripts, nothing loaded from the
network) with the chain status, the flags, each check with its expectation beside its
observation, every failure kept with its diagnosis, and every tolerance change with its
justification. It is written beside the notebook. The JSON export carries the same content for a
grading script; the cell reads it to list what a grader must see.""",
    """La exportación para la evaluación: una página HTML autocontenida (sin scripts, sin nada
cargado de la red) con el estado de la cadena, las marcas, cada comprobación con su expectativa
junto a su observación, cada fallo conservado con su diagnóstico y cada cambio de tolerancia con
su justificación. Se escribe junto al cuaderno. La exportación JSON lleva lo mismo para un
script de evaluación; la celda la lee para listar lo que quien evalúa debe ver.""",
))

EXPORT = '''REPORT = NOTEBOOK.with_name(NOTEBOOK.stem + ".report.html")
assert jupyter_gradcheck("export", NOTEBOOK.name, "--format", "html", "-o", REPORT.name).returncode == 0

exported = subprocess.run([sys.executable, "-m", "jupyter", "gradcheck", "export", NOTEBOOK.name, "--format", "json"],
                          cwd=NOTEBOOK.parent, capture_output=True, text=True, check=True)
submission = json.loads(exported.stdout)["submissions"][0]
for check_id, history in submission["checks"].items():
    for kept in history["failures_kept"]:
        worst = kept["failures"][0]
        print(f"{kept_word} · {{check_id}} · seq {{kept['seq']}} · {{worst['comparison']}} · {{worst['diagnosis']}}")
    for change in history["tolerance_history"]:
        print(f"{change_word} · {{check_id}} · seq {{change['seq']}} · {{change['old']}} -> {{change['new']}} · "
              f"widened={{change['widened']}} after_failure={{change['after_failure']}}\\n    {why_word}: {{change['justification']}}")
display(HTML(f'<a href="{{escape(REPORT.name)}}" target="_blank">{{escape(REPORT.name)}}</a>'))'''

cell("s6-export", code(
    EXPORT.format(kept_word="failure kept", change_word="tolerance change", why_word="why"),
    EXPORT.format(kept_word="fallo conservado", change_word="cambio de tolerancia", why_word="por qué"),
))

cell("panel-intro", md(
    """## Your turn: the inline panel

The panel below declares and runs a check right here, in this kernel, into the same ledger. It
starts from the course's seed record. Write your derivative in *analytical gradient* first,
then run; change the function, the inputs, the dtype or the device (the GPU is an option when
there is one, never a need). A tolerance changed after a run asks for a justification before the
next run. The side panel (the nabla-and-tick icon in the right sidebar) shows the whole ledger.""",
    """## Tu turno: el panel en línea

El panel de abajo declara y ejecuta una comprobación aquí mismo, en este kernel, en el mismo
registro. Parte del registro semilla del curso. Escribe primero tu derivada en *analytical
gradient* y luego ejecuta; cambia la función, las entradas, el tipo o el dispositivo (la GPU es
una opción cuando la hay, nunca una necesidad). Una tolerancia cambiada tras una ejecución pide
una justificación antes de la siguiente. El panel lateral (el icono de nabla con una marca, en la barra
lateral derecha) muestra el registro completo.""",
))

cell("panel", code("GradcheckPanel(SEED, notebook=NOTEBOOK)"))


# --------------------------------------------------------------------------------------------
# Building, executing, exporting
# --------------------------------------------------------------------------------------------
def build(lang: str) -> nbformat.NotebookNode:
    """The notebook of one edition, without outputs."""
    cells = []
    for cell_id, (kind, en, es) in CELLS:
        source = en if lang == "en" else es
        if kind == "markdown":
            cells.append(nbformat.v4.new_markdown_cell(source, id=cell_id))
        else:
            cells.append(nbformat.v4.new_code_cell(source, id=cell_id))
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata.update({
        "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    })
    return notebook


def sources_of(notebook) -> list[tuple[str, str, str]]:
    """(id, type, source) of every cell: what must match between the generator and a committed file."""
    return [(c.get("id"), c.cell_type, c.source) for c in notebook.cells]


def execute(notebook, workdir: Path, name: str):
    """Execute `notebook` as `workdir/name` with nbclient; return (executed notebook, its path)."""
    from nbclient import NotebookClient

    path = workdir / name
    nbformat.write(notebook, path)
    client = NotebookClient(notebook, timeout=CELL_TIMEOUT, kernel_name="python3",
                            resources={"metadata": {"path": str(workdir)}})
    client.execute()
    return notebook, path


def leaked_paths(notebook, forbidden: tuple[str, ...]) -> list[str]:
    """Outputs that mention a machine path (they must not be committed)."""
    found = []
    for c in notebook.cells:
        text = nbformat.writes(nbformat.v4.new_notebook(cells=[c]))
        found += [f"{c.get('id')}: {word}" for word in forbidden if word in text]
    return found


def screenshot(html: Path, png: Path) -> None:
    """A PNG of the report, rendered by headless Chromium."""
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--screenshot={png}",
                        "--window-size=1200,1600", html.resolve().as_uri()],
                       check=True, capture_output=True, timeout=120)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-execute", action="store_true", help="write the sources only, without outputs")
    args = parser.parse_args(argv)
    from jupyterlab_gradcheck.core.binding import METADATA_KEY, binding_for
    from jupyterlab_gradcheck.core.ledger import Ledger

    for lang, target in EDITIONS.items():
        target.parent.mkdir(parents=True, exist_ok=True)
        notebook = build(lang)
        if args.no_execute:
            nbformat.write(notebook, target)
            print(f"wrote {target.relative_to(ROOT)} (not executed)")
            continue
        with tempfile.TemporaryDirectory() as tmp:
            workdir = Path(tmp)
            notebook, path = execute(notebook, workdir, target.name)
            leaks = leaked_paths(notebook, (tmp, str(ROOT), os.path.expanduser("~") + "/"))
            if leaks:
                raise SystemExit(f"machine paths in the outputs: {leaks}")
            ledger = Ledger.for_notebook(path)
            if lang == "en":
                notebook.metadata[METADATA_KEY] = binding_for(ledger, path)
                shutil.copyfile(ledger.path, target.parent / ledger.path.name)
                nbformat.write(notebook, target)
                _export_report(target)
            else:
                nbformat.write(notebook, target)
        print(f"wrote {target.relative_to(ROOT)} (executed)")
    return 0


def _export_report(notebook: Path) -> None:
    """docs/example-report.html from the committed notebook's ledger, and its screenshot."""
    subprocess.run([sys.executable, "-m", "jupyter", "gradcheck", "export", notebook.name, "--format", "html",
                    "-o", str(REPORT_HTML)], cwd=notebook.parent, check=True)
    screenshot(REPORT_HTML, REPORT_PNG)
    print(f"wrote {REPORT_HTML.relative_to(ROOT)} and {REPORT_PNG.relative_to(ROOT)}")


if __name__ == "__main__":
    sys.exit(main())
