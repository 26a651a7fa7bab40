/**
 * Dialogs that change a check after it was declared: its tolerance, or its
 * expectation. Both need a written justification. The dialog refuses to
 * close on OK while the justification is blank, and a refusal from the
 * server (which checks again) is shown in the reopened dialog.
 */
import { Dialog } from '@jupyterlab/apputils';
import { Widget } from '@lumino/widgets';

import { GradcheckRequestError } from './requester';
import { el } from './dom';
import { formatDeclared, formatTolerance } from './format';
import { ICheckView } from './grouping';
import { trans } from './i18n';
import {
  FieldErrors,
  IToleranceEdit,
  Validated,
  validateExpectationEdit,
  validateToleranceEdit
} from './validation';
import { JSONValue } from './types';

interface IFieldSpec {
  name: string;
  label: string;
  kind: 'input' | 'textarea' | 'select';
  /** A select's options: the value sent, and the words shown. */
  options?: { value: string; label: string }[];
  placeholder?: string;
}

type Raw = { [name: string]: string };

/** The body of an edit dialog: labelled fields, each with its error slot. */
class EditBody<V> extends Widget {
  private readonly controls = new Map<
    string,
    HTMLInputElement | HTMLTextAreaElement | HTMLSelectElement
  >();
  private readonly slots = new Map<string, HTMLElement>();

  constructor(
    intro: string,
    fields: IFieldSpec[],
    raw: Raw,
    private readonly validate: (raw: Raw) => Validated<V>
  ) {
    super();
    this.addClass('jp-gradcheck-dialog');
    this.node.appendChild(el('p', { class: 'jp-gradcheck-hint' }, intro));
    for (const spec of fields.concat({ name: '', label: '', kind: 'input' })) {
      const slot = el('div', {
        class: 'jp-gradcheck-field-error',
        testid: `gradcheck-dialog-error-${spec.name || 'form'}`,
        role: 'alert'
      });
      this.slots.set(spec.name, slot);
      if (!spec.name) {
        this.node.appendChild(slot);
        continue;
      }
      const control =
        spec.kind === 'select'
          ? el(
              'select',
              { class: 'jp-mod-styled' },
              (spec.options ?? []).map(o =>
                el('option', { value: o.value }, o.label)
              )
            )
          : spec.kind === 'textarea'
            ? el('textarea', {
                class: 'jp-mod-styled',
                rows: 3,
                placeholder: spec.placeholder
              })
            : el('input', {
                class: 'jp-mod-styled',
                type: 'text',
                placeholder: spec.placeholder
              });
      control.name = spec.name;
      control.dataset.testid = `gradcheck-dialog-${spec.name}`;
      control.value = raw[spec.name] ?? control.value;
      this.controls.set(spec.name, control);
      this.node.appendChild(
        el(
          'label',
          { class: 'jp-gradcheck-form-row' },
          el('span', {}, spec.label),
          control,
          slot
        )
      );
    }
  }

  /** The raw text of every field, kept when the dialog reopens. */
  raw(): Raw {
    const raw: Raw = {};
    for (const [name, control] of this.controls) {
      raw[name] = control.value;
    }
    return raw;
  }

  /** Show errors by field name; unknown names go to the dialog-wide slot. */
  showErrors(errors: FieldErrors): void {
    for (const slot of this.slots.values()) {
      slot.textContent = '';
    }
    for (const [field, message] of Object.entries(errors)) {
      const slot = this.slots.get(field) ?? this.slots.get('')!;
      slot.textContent = message;
    }
  }

  /** Validate and show the problems; the value when there are none. */
  check(): V | null {
    const result = this.validate(this.raw());
    if (result.ok) {
      this.showErrors({});
      return result.value;
    }
    this.showErrors(result.errors);
    return null;
  }

  /** The dialog's value, read after it was accepted. */
  getValue(): V | null {
    return this.check();
  }
}

/** A dialog that will not close on its accept button while its body is invalid. */
class GuardedDialog<V> extends Dialog<V | null> {
  constructor(
    options: Partial<Dialog.IOptions<V | null>> & { body: EditBody<V> },
    private readonly acceptIndex: number
  ) {
    super(options);
    this.guardBody = options.body;
  }

  resolve(index?: number): void {
    const chosen = index ?? this.acceptIndex;
    if (chosen === this.acceptIndex && this.guardBody.check() === null) {
      return;
    }
    super.resolve(index);
  }

  private readonly guardBody: EditBody<V>;
}

/** Map a server error's field onto the dialog's fields. */
function dialogField(field: string | null): string {
  if (!field) {
    return '';
  }
  if (field.endsWith('rtol')) {
    return 'rtol';
  }
  if (field.endsWith('atol')) {
    return 'atol';
  }
  return field.split('.')[0];
}

/**
 * Show an edit dialog until it is cancelled or `submit` succeeds; a server
 * refusal reopens it with the text kept and the message beside its field.
 * Resolves true when a change was made.
 */
async function editLoop<V>(
  title: string,
  intro: string,
  fields: IFieldSpec[],
  raw: Raw,
  validate: (raw: Raw) => Validated<V>,
  submit: (value: V) => Promise<void>
): Promise<boolean> {
  let errors: FieldErrors = {};
  for (;;) {
    const body = new EditBody<V>(intro, fields, raw, validate);
    body.showErrors(errors);
    const dialog = new GuardedDialog<V>(
      {
        title,
        body,
        buttons: [
          Dialog.cancelButton({ label: trans.__('Cancel') }),
          Dialog.okButton({ label: trans.__('Record change') })
        ],
        defaultButton: 1
      },
      1
    );
    dialog.addClass('jp-gradcheck-edit-dialog');
    const result = await dialog.launch();
    if (!result.button.accept || result.value === null) {
      return false;
    }
    raw = body.raw();
    try {
      await submit(result.value);
      return true;
    } catch (error) {
      if (!(error instanceof GradcheckRequestError)) {
        throw error;
      }
      errors = { [dialogField(error.field)]: error.message };
    }
  }
}

/** The justification field both dialogs require. */
function justificationField(): IFieldSpec {
  return {
    name: 'justification',
    label: trans.__('Justification (required)'),
    kind: 'textarea',
    placeholder: trans.__(
      'why this change is right, in words a grader can judge'
    )
  };
}

/** Edit a check's tolerance; it is recorded with its justification. */
export function editToleranceDialog(
  view: ICheckView,
  submit: (edit: IToleranceEdit) => Promise<void>
): Promise<boolean> {
  const intro =
    trans.__(
      'Current tolerance: %1; finite differences: %2.',
      formatTolerance(view.tolerance),
      formatTolerance(view.fdTolerance)
    ) +
    (view.status === 'failed'
      ? ' ' +
        trans.__(
          'The latest run failed: widening now is flagged for the grader.'
        )
      : '');
  return editLoop<IToleranceEdit>(
    trans.__('Edit tolerance of %1', view.id),
    intro,
    [
      {
        name: 'target',
        label: trans.__('Which tolerance'),
        kind: 'select',
        options: [
          {
            value: 'tolerance',
            label: trans.__('analytical vs autograd (tolerance)')
          },
          {
            value: 'finite_difference',
            label: trans.__('finite differences (finite_difference)')
          }
        ]
      },
      {
        name: 'rtol',
        label: trans.__('New rtol'),
        kind: 'input',
        placeholder: trans.__('unchanged')
      },
      {
        name: 'atol',
        label: trans.__('New atol'),
        kind: 'input',
        placeholder: trans.__('unchanged')
      },
      justificationField()
    ],
    {},
    raw =>
      validateToleranceEdit({
        rtol: raw.rtol ?? '',
        atol: raw.atol ?? '',
        target: raw.target ?? 'tolerance',
        justification: raw.justification ?? ''
      }),
    submit
  );
}

/** Revise a check's expectation; a revision after a run is flagged. */
export function reviseExpectationDialog(
  view: ICheckView,
  submit: (edit: {
    analytical_gradient: JSONValue;
    justification: string;
  }) => Promise<void>
): Promise<boolean> {
  return editLoop(
    trans.__('Revise expectation of %1', view.id),
    trans.__(
      'Current expectation: %1. The original stays in the ledger.',
      formatDeclared(view.analytical)
    ),
    [
      {
        name: 'analytical_gradient',
        label: trans.__('New analytical gradient'),
        kind: 'input',
        // eslint-disable-next-line jupyter/no-untranslated-string -- an expression, the same in every language
        placeholder: '2*x'
      },
      justificationField()
    ],
    {},
    raw =>
      validateExpectationEdit({
        analytical_gradient: raw.analytical_gradient ?? '',
        justification: raw.justification ?? ''
      }),
    submit
  );
}
