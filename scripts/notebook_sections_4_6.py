"""Notebook cells: sections 4 to 6, the failures kept, origin and destination, the proof."""

from __future__ import annotations

from notebook_cells import SEED_TEXT, cell, code, md  # noqa: F401  (registers cells in order)

# ------------------------------------------------------------------ 4. exploit the failures
cell(
    "s4-intro",
    md(
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
    ),
)

cell(
    "s4-wrong",
    code(
        """SQUARE_WRONG = {
    "id": "square_wrong_derivative", "function": "x*x", "x": 3.0, "analytical_gradient": "x",
    "origin": "output f = x*x; a deliberate slip in the hand derivation: f'(x) written as x (the 2 forgotten)",
    "destination": "x.grad (shape [])",
}
wrong = check_record(SQUARE_WRONG, notebook=NOTEBOOK)
show(wrong)""",
        """SQUARE_WRONG = {
    "id": "square_wrong_derivative", "function": "x*x", "x": 3.0, "analytical_gradient": "x",
    "origin": "salida f = x*x; un desliz deliberado en la derivación a mano: f'(x) escrita como x (olvidado el 2)",
    "destination": "x.grad (forma [])",
}
wrong = check_record(SQUARE_WRONG, notebook=NOTEBOOK)
show(wrong)""",
    ),
)

cell(
    "s4-wrong-kept",
    code(
        """# No exception was raised: the notebook goes on, and the failure is in the ledger.
print("passed:", wrong.passed)
show_ledger("square_wrong_derivative")""",
        """# No se lanzó ninguna excepción: el cuaderno sigue, y el fallo está en el registro.
print("passed:", wrong.passed)
show_ledger("square_wrong_derivative")""",
    ),
)

cell(
    "s4-kink-intro",
    md(
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
    ),
)

cell(
    "s4-kink",
    code(
        """RELU_AT_0 = {
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
show(check_record(RELU_AWAY_FROM_0, notebook=NOTEBOOK))""",
        """RELU_AT_0 = {
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
show(check_record(RELU_AWAY_FROM_0, notebook=NOTEBOOK))""",
    ),
)

cell(
    "s4-tolerance-intro",
    md(
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
    ),
)

cell(
    "s4-tolerance-first",
    code(
        """SIN_WIDE_STEP = {
    "id": "sin_step_1e-3", "function": "sin(x)", "x": 1.0, "analytical_gradient": "cos(x)",
    "finite_difference": {"scheme": "central", "step": 1e-3},
    "origin": "output sin(x) (a scalar); by hand d/dx sin x = cos x",
    "destination": "x.grad (shape [])",
}
first = check_record(SIN_WIDE_STEP, notebook=NOTEBOOK)
show(first)""",
        """SIN_WIDE_STEP = {
    "id": "sin_step_1e-3", "function": "sin(x)", "x": 1.0, "analytical_gradient": "cos(x)",
    "finite_difference": {"scheme": "central", "step": 1e-3},
    "origin": "salida sin(x) (un escalar); a mano d/dx sen x = cos x",
    "destination": "x.grad (forma [])",
}
first = check_record(SIN_WIDE_STEP, notebook=NOTEBOOK)
show(first)""",
    ),
)

cell(
    "s4-tolerance-change",
    code(
        """JUSTIFICATION = (
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
second  # the whole record, with the check's history: the failure kept, the change and why""",
        """JUSTIFICATION = (
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
second  # el registro completo, con el historial de la comprobación: el fallo conservado, el cambio y su porqué""",
    ),
)

cell("s4-tolerance-ledger", code('show_ledger("sin_step_1e-3")'))

# ------------------------------------------------------------------ 5. origin and destination
cell(
    "s5-intro",
    md(
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
    ),
)

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

cell(
    "s5-table",
    code(
        ORIGINS.format(
            seed_origin="output f = x*x (the course's seed record); by hand f'(x) = 2x = 6 at x = 3",
            seed_destination="x.grad (shape [])",
            out_word="output shape",
            h_check="check",
            h_output="output",
            h_origin="origin: hand derivation",
            h_expect="expectation",
            h_dest="destination",
            h_landed="landed (backward_pass_1)",
            h_verdict="verdict",
            missing_word="checks without an origin or destination",
        ),
        ORIGINS.format(
            seed_origin="salida f = x*x (el registro semilla del curso); a mano f'(x) = 2x = 6 en x = 3",
            seed_destination="x.grad (forma [])",
            out_word="forma de la salida",
            h_check="comprobación",
            h_output="salida",
            h_origin="origen: derivación a mano",
            h_expect="expectativa",
            h_dest="destino",
            h_landed="llegó (backward_pass_1)",
            h_verdict="veredicto",
            missing_word="comprobaciones sin origen o destino",
        ),
    ),
)

# ------------------------------------------------------------------ 6. the proof
cell(
    "s6-intro",
    md(
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
    ),
)

PROOF = '''def jupyter_gradcheck(*args):
    """{doc}"""
    done = subprocess.run([sys.executable, "-m", "jupyter", "gradcheck", *args],
                          cwd=NOTEBOOK.parent, capture_output=True, text=True)
    print((done.stdout + done.stderr).strip())
    print("exit code", done.returncode)
    return done


# {comment}
assert jupyter_gradcheck("verify", LEDGER.path.name, "--replay", "--ledger-only").returncode == 0'''

cell(
    "s6-verify",
    code(
        PROOF.format(
            doc="`jupyter gradcheck ARGS`, run beside the notebook as a grader would run it.",
            comment="From inside the running notebook its saved copy is older than this kernel, so the "
            "ledger is verified alone; a grader verifies the saved notebook.",
        ),
        PROOF.format(
            doc="`jupyter gradcheck ARGS`, ejecutado junto al cuaderno como lo haría quien evalúa.",
            comment="Desde dentro del cuaderno en ejecución su copia guardada es anterior a este núcleo, "
            "así que se verifica solo el registro; quien evalúa verifica el cuaderno guardado.",
        ),
    ),
)

cell(
    "s6-export-intro",
    md(
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
    ),
)

EXPORT = """REPORT = NOTEBOOK.with_name(NOTEBOOK.stem + ".report.html")
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
display(HTML(f'<a href="{{escape(REPORT.name)}}" target="_blank">{{escape(REPORT.name)}}</a>'))"""

cell(
    "s6-export",
    code(
        EXPORT.format(kept_word="failure kept", change_word="tolerance change", why_word="why"),
        EXPORT.format(kept_word="fallo conservado", change_word="cambio de tolerancia", why_word="por qué"),
    ),
)

cell(
    "panel-intro",
    md(
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
    ),
)

cell("panel", code("GradcheckPanel(SEED, notebook=NOTEBOOK)"))
