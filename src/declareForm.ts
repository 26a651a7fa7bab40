/**
 * The declare form: a new check's function, inputs and expectation, written
 * before it runs. Errors, from the client-side validation or from the
 * server, are shown next to the field they name.
 */
import { el, replaceChildren } from './dom';
import { shownText, trans } from './i18n';
import { IDefaults } from './settings';
import { IDevice } from './types';
import {
  DTYPES,
  FD_SCHEMES,
  FORM_FIELDS,
  FieldErrors,
  FormField,
  IFormValues
} from './validation';

type Control = HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement;

interface IFieldSpec {
  label: string;
  hint?: string;
  make: () => Control;
}

function input(placeholder: string): HTMLInputElement {
  return el('input', {
    type: 'text',
    placeholder,
    spellcheck: 'false',
    class: 'jp-mod-styled'
  });
}

function select(options: string[]): HTMLSelectElement {
  return el(
    'select',
    { class: 'jp-mod-styled' },
    options.map(o => el('option', { value: o }, o))
  );
}

function note(placeholder: string): HTMLTextAreaElement {
  return el('textarea', { rows: 2, placeholder, class: 'jp-mod-styled' });
}

/** The form's fields: their labels and hints in the user's language, made when the form is. */
function fields(): { [K in FormField]: IFieldSpec } {
  return {
    function: {
      label: trans.__('Function'),
      hint: trans.__('an expression over the inputs'),
      make: () => input('x*x')
    },
    inputs: {
      label: trans.__('Inputs (JSON)'),
      hint: trans.__('name -> number or nested list'),
      make: () => input('{"x": 3}')
    },
    analytical_gradient: {
      label: trans.__('Analytical gradient (expectation)'),
      hint: trans.__(
        'written before running: a number, a list or an expression such as 2*x'
      ),
      make: () => input('6')
    },
    // eslint-disable-next-line jupyter/no-untranslated-string -- a field name of the record, the same in every language
    dtype: { label: 'dtype', make: () => select(DTYPES) },
    device: { label: trans.__('Device'), make: () => select(['cpu']) },
    'finite_difference.scheme': {
      label: trans.__('FD scheme'),
      make: () => select(FD_SCHEMES)
    },
    'finite_difference.step': {
      label: trans.__('FD step'),
      hint: trans.__('empty: dtype default; or "adaptive"'),
      make: () => input(trans.__('dtype default'))
    },
    'tolerance.rtol': {
      // eslint-disable-next-line jupyter/no-untranslated-string -- a field name of the record, the same in every language
      label: 'rtol',
      make: () => input(trans.__('dtype default'))
    },
    'tolerance.atol': {
      // eslint-disable-next-line jupyter/no-untranslated-string -- a field name of the record, the same in every language
      label: 'atol',
      make: () => input(trans.__('dtype default'))
    },
    origin: {
      label: trans.__('Origin'),
      hint: trans.__('which output, which hand derivation'),
      make: () => note(trans.__('d(x*x)/dx = 2x, by the power rule'))
    },
    destination: {
      label: trans.__('Destination'),
      hint: trans.__("which input's gradient"),
      make: () => note('x.grad')
    }
  };
}

function slug(field: string): string {
  return field.replace(/[._]/g, '-');
}

/** The declare form's DOM and state. */
export class DeclareForm {
  readonly node: HTMLFormElement;
  private readonly controls = new Map<string, Control>();
  private readonly errors = new Map<string, HTMLElement>();
  private readonly deviceNotes: HTMLElement;
  private readonly formError: HTMLElement;
  private readonly runButton: HTMLButtonElement;

  constructor(onRun: () => void) {
    this.deviceNotes = el('ul', {
      class: 'jp-gradcheck-device-notes',
      testid: 'gradcheck-device-notes'
    });
    this.formError = el('div', {
      class: 'jp-gradcheck-field-error',
      testid: 'gradcheck-error-form',
      role: 'alert'
    });
    this.runButton = el(
      'button',
      {
        type: 'submit',
        class: 'jp-mod-styled jp-mod-accept',
        testid: 'gradcheck-run'
      },
      trans.__('Run')
    );
    const specs = fields();
    const rows = FORM_FIELDS.map(field => this.row(field, specs[field]));
    this.node = el(
      'form',
      {
        class: 'jp-gradcheck-form',
        testid: 'gradcheck-declare-form',
        novalidate: true
      },
      rows.slice(0, 5),
      this.deviceNotes,
      el('div', { class: 'jp-gradcheck-form-pair' }, rows[5], rows[6]),
      el('div', { class: 'jp-gradcheck-form-pair' }, rows[7], rows[8]),
      rows.slice(9),
      el(
        'div',
        { class: 'jp-gradcheck-form-actions' },
        this.runButton,
        this.formError
      )
    );
    this.node.addEventListener('submit', event => {
      event.preventDefault();
      onRun();
    });
  }

  private row(field: FormField, spec: IFieldSpec): HTMLElement {
    const control = spec.make();
    control.name = field;
    control.dataset.testid = `gradcheck-field-${slug(field)}`;
    control.id = `jp-gradcheck-field-${slug(field)}`;
    const error = el('div', {
      class: 'jp-gradcheck-field-error',
      testid: `gradcheck-error-${slug(field)}`,
      role: 'alert'
    });
    this.controls.set(field, control);
    this.errors.set(field, error);
    return el(
      'div',
      { class: 'jp-gradcheck-form-row', 'data-field': field },
      el('label', { for: control.id }, spec.label),
      control,
      spec.hint ? el('div', { class: 'jp-gradcheck-hint' }, spec.hint) : null,
      error
    );
  }

  /** The current text of every field. */
  values(): IFormValues {
    const values = {} as IFormValues;
    for (const field of FORM_FIELDS) {
      values[field] = this.controls.get(field)!.value;
    }
    return values;
  }

  /**
   * Start new checks from the user's defaults, without overwriting typed text. A choice the
   * server disables (an absent device) is not selected: the usable one stays.
   */
  applyDefaults(defaults: IDefaults): void {
    const set = (field: FormField, value: string | number | null) => {
      const control = this.controls.get(field)!;
      if (value === null) {
        return;
      }
      if (control instanceof HTMLSelectElement) {
        const option = Array.from(control.options).find(
          o => o.value === String(value)
        );
        if (!option?.disabled) {
          control.value = String(value);
        }
      } else if (control.value === '') {
        control.value = String(value);
      }
    };
    set('dtype', defaults.dtype);
    set('device', defaults.device);
    set('finite_difference.scheme', defaults.scheme);
    set('finite_difference.step', defaults.step);
    set('tolerance.rtol', defaults.rtol);
    set('tolerance.atol', defaults.atol);
  }

  /**
   * List the server's devices; an absent one is disabled, with its reason as the option's title.
   * The reason is shown as a note only for the device asked for (the current choice, else the
   * settings' default): a student on a CPU-only machine who never asked for cuda sees none.
   */
  setDevices(
    devices: IDevice[],
    preferred: string,
    workerError: string | null = null
  ): void {
    const control = this.controls.get('device') as HTMLSelectElement;
    const current = control.value || preferred;
    replaceChildren(
      control,
      devices.map(device =>
        el(
          'option',
          {
            value: device.id,
            disabled: !device.available,
            title: device.reason ? shownText(device.reason) : undefined
          },
          device.available
            ? device.name && device.name !== device.id
              ? `${device.id} (${device.name})`
              : device.id
            : trans.__('%1 (absent)', device.id)
        )
      )
    );
    const usable = devices.filter(d => d.available).map(d => d.id);
    control.value = usable.includes(current)
      ? current
      : usable.includes(preferred)
        ? preferred
        : (usable[0] ?? '');
    replaceChildren(
      this.deviceNotes,
      devices
        .filter(
          device =>
            !device.available &&
            (device.id === current || device.id === preferred)
        )
        .map(device =>
          el(
            'li',
            { 'data-device': device.id },
            trans.__(
              '%1 is disabled: %2',
              device.id,
              device.reason
                ? shownText(device.reason)
                : trans.__('the server reports it absent')
            )
          )
        ),
      workerError
        ? el(
            'li',
            { 'data-device': '' },
            trans.__('no device list: %1', workerError)
          )
        : null
    );
  }

  /** Show errors beside their fields; '' goes under the Run button. */
  showErrors(errors: FieldErrors): void {
    this.clearErrors();
    for (const [field, message] of Object.entries(errors)) {
      const slot = this.errors.get(field) ?? this.formError;
      slot.textContent = slot.textContent
        ? `${slot.textContent} ${message}`
        : message;
      this.controls.get(field)?.classList.add('jp-mod-error-field');
    }
  }

  /** Remove every shown error. */
  clearErrors(): void {
    for (const slot of [...this.errors.values(), this.formError]) {
      slot.textContent = '';
    }
    for (const control of this.controls.values()) {
      control.classList.remove('jp-mod-error-field');
    }
  }

  /** Disable Run while a check is running, so it is not sent twice. */
  setBusy(busy: boolean): void {
    this.runButton.disabled = busy;
    this.runButton.textContent = busy ? trans.__('Running…') : trans.__('Run');
  }
}
