"""Notebook cells: the set-up and section 1, small functions with their expectations first."""

from __future__ import annotations

from notebook_cells import SEED_TEXT, cell, code, md  # noqa: F401  (registers cells in order)

cell(
    "title",
    md(
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
    ),
)

cell(
    "setup-intro",
    md(
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
    ),
)

SETUP = '''import json
import os
import subprocess
import sys
from html import escape
from pathlib import Path

import torch
from IPython.display import HTML, SVG, display

from jupyterlab_gradcheck.api import check_record
from jupyterlab_gradcheck.core.ledger.store import Ledger
from jupyterlab_gradcheck.core.report.html_export import (
    comparisons_table, diagnosis_block, expectation_observation_table, observations_table)
from jupyterlab_gradcheck.core.run import ledger_spec_dict
from jupyterlab_gradcheck.core.check.record.spec import parse_spec
from jupyterlab_gradcheck.core.report.html_export import render as render_sweep
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

cell(
    "setup",
    code(
        SETUP.format(
            comment_session="Inside JupyterLab the kernel knows its notebook; under nbclient or nbconvert it does not.",
            notebook_name="gradient-check-notebook.ipynb",
            comment_ledger="read here to show the entries; checks write it",
            doc_show="The expectation beside the observation (value, shape, dtype, device), and any diagnosis.",
            doc_show_ledger="The ledger entries so far (of the given checks), one row each, in order.",
            justification_word="why",
            what_word="what",
            ledger_word="ledger",
        ),
        SETUP.format(
            comment_session="Dentro de JupyterLab el kernel conoce su cuaderno; con nbclient o nbconvert no.",
            notebook_name="cuaderno-comprobacion-gradientes.ipynb",
            comment_ledger="se lee aquí para mostrar las entradas; las comprobaciones lo escriben",
            doc_show="La expectativa junto a la observación (valor, forma, tipo, dispositivo) y el diagnóstico si lo hay.",
            doc_show_ledger="Las entradas del registro hasta ahora (de las comprobaciones dadas), una por fila, en orden.",
            justification_word="por qué",
            what_word="qué",
            ledger_word="registro",
        ).replace(
            "from jupyterlab_gradcheck.widget import GradcheckPanel\n",
            "from jupyterlab_gradcheck.widget import GradcheckPanel\nfrom jupyterlab_gradcheck import set_language\n\n"
            'set_language("es")  # mensajes, tablas y panel en español; los registros siguen en inglés\n'
            'os.environ["LANGUAGE"] = "es"  # y los comandos `jupyter gradcheck` que lanza este cuaderno\n',
        ),
    ),
)

# ------------------------------------------------------------------ 1. small functions
cell(
    "s1-intro",
    md(
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
    ),
)

cell(
    "s1-expectations",
    code(
        """SQUARE = {
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
show_ledger("square", "vector_sum")""",
        """SQUARE = {
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
show_ledger("square", "vector_sum")""",
    ),
)

cell(
    "s1-run-intro",
    md(
        """Now the checks run. Running a check writes its expectation once more, immediately before the
run, and the observation points at that entry (`expectation at seq`): a check cannot be
observed without an expectation in front of it. The table keeps the two kinds of evidence in
separate columns, and every observed value carries its shape, dtype and device.""",
        """Ahora se ejecutan las comprobaciones. Ejecutar una comprobación vuelve a escribir su
expectativa justo antes de la ejecución, y la observación apunta a esa entrada (`expectation at
seq`): no se puede observar una comprobación sin una expectativa delante. La tabla mantiene los
dos tipos de evidencia en columnas separadas, y cada valor observado lleva su forma, su tipo y
su dispositivo.""",
    ),
)

cell(
    "s1-run",
    code(
        """square = check_record(SQUARE, notebook=NOTEBOOK)
show(square)
vector_sum = check_record(VECTOR_SUM, notebook=NOTEBOOK)
show(vector_sum)""",
    ),
)

cell("s1-ledger", code('show_ledger("square", "vector_sum")'))

cell(
    "s1-seed-intro",
    md(
        """### The course's own record

The course gives one record to copy. It runs exactly as written: the text below is parsed as
JSON, nothing added. It comes back with `observed_gradient` filled in and `executed` true,
plus everything that was observed. The record names no `id`, so one is made from its function.""",
        """### El registro del propio curso

El curso da un registro para copiar. Se ejecuta tal cual está escrito: el texto de abajo se
interpreta como JSON, sin añadir nada. Vuelve con `observed_gradient` relleno y `executed` a
true, junto con todo lo observado. El registro no trae `id`, así que se genera uno a partir de
su función.""",
    ),
)

cell(
    "s1-seed",
    code(
        f"""SEED = json.loads('{SEED_TEXT}')
seed = check_record(SEED, notebook=NOTEBOOK)
print("id:", seed.record["id"])
print("observed_gradient:", seed.record["observed_gradient"], "· executed:", seed.record["executed"],
      "· passed:", seed.record["passed"])
seed""",
    ),
)
