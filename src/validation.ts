/**
 * Client-side validation of the declare form and the edit dialogs, and the
 * mapping of a server error's `field` to the form field it concerns.
 *
 * The server validates everything again; checking here only lets the panel
 * put a one-line message next to the field before a request is made.
 */
import { trans } from './i18n';
import { ICheckRecord, IDevice, JSONRecord, JSONValue } from './types';

/** The field keys of the declare form; they use the record's field names. */
export const FORM_FIELDS = [
  'function',
  'inputs',
  'analytical_gradient',
  'dtype',
  'device',
  'finite_difference.scheme',
  'finite_difference.step',
  'tolerance.rtol',
  'tolerance.atol',
  'origin',
  'destination'
] as const;

export type FormField = (typeof FORM_FIELDS)[number];

/** The raw text of every field of the declare form. */
export type IFormValues = { [K in FormField]: string };

/** One message per field at fault; the key '' is for the form as a whole. */
export type FieldErrors = { [field: string]: string };

export const DTYPES = ['float64', 'float32', 'float16', 'bfloat16'];
export const FD_SCHEMES = ['central', 'forward', 'complex_step', 'richardson'];

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** The outcome of a validation: a value, or the errors that prevent one. */
export type Validated<T> =
  { ok: true; value: T } | { ok: false; errors: FieldErrors };

function fail<T>(field: string, message: string): Validated<T> {
  return { ok: false, errors: { [field]: message } };
}

/** Whether a value is a number or a rectangular nested list of numbers. */
function tensorProblem(value: unknown): string | null {
  if (typeof value === 'number') {
    return Number.isFinite(value) ? null : trans.__('must be a finite number');
  }
  if (!Array.isArray(value)) {
    return trans.__('must be a number or a nested list of numbers');
  }
  if (value.length === 0) {
    return trans.__('must not be an empty list');
  }
  const problems = value.map(tensorProblem).filter(p => p !== null);
  if (problems.length) {
    return problems[0];
  }
  const shapes = value.map(item => JSON.stringify(shapeKey(item)));
  return shapes.every(s => s === shapes[0])
    ? null
    : trans.__('is a ragged list: rows differ in shape');
}

function shapeKey(value: unknown): number[] {
  return Array.isArray(value) ? [value.length, ...shapeKey(value[0])] : [];
}

/** Parse the inputs field: a JSON object of name -> number or nested list. */
export function parseInputs(text: string): Validated<JSONRecord> {
  if (!text.trim()) {
    return fail(
      'inputs',
      trans.__('inputs are required, for example %1', '{"x": 3}')
    );
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    return fail(
      'inputs',
      trans.__('inputs are not valid JSON: %1', (error as Error).message)
    );
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) {
    return fail(
      'inputs',
      trans.__(
        'inputs must be a JSON object of name -> value, for example %1',
        '{"x": 3}'
      )
    );
  }
  const names = Object.keys(parsed);
  if (names.length === 0) {
    return fail('inputs', trans.__('inputs must name at least one input'));
  }
  for (const name of names) {
    if (!NAME.test(name)) {
      return fail(
        'inputs',
        trans.__('input name "%1" is not an identifier', name)
      );
    }
    const problem = tensorProblem((parsed as JSONRecord)[name]);
    if (problem) {
      return fail('inputs', trans.__('input %1 %2', name, problem));
    }
  }
  return { ok: true, value: parsed as JSONRecord };
}

/**
 * Parse an analytical gradient: JSON numbers, lists and mappings are taken
 * as values; anything else is an expression over the inputs, such as 2*x.
 */
export function parseAnalytical(
  text: string,
  field = 'analytical_gradient'
): Validated<JSONValue> {
  const trimmed = text.trim();
  if (!trimmed) {
    return fail(
      field,
      trans.__(
        'write the expected gradient before running: it is the expectation'
      )
    );
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(trimmed);
  } catch {
    return { ok: true, value: trimmed };
  }
  if (typeof parsed === 'boolean' || parsed === null) {
    return fail(
      field,
      trans.__(
        '%1 is not a gradient: write a number, a list or an expression',
        trimmed
      )
    );
  }
  return { ok: true, value: parsed as JSONValue };
}

/** Parse an optional non-negative number; empty text means "not given". */
export function parseOptionalNumber(
  text: string,
  field: string,
  label: string
): Validated<number | undefined> {
  const trimmed = text.trim();
  if (!trimmed) {
    return { ok: true, value: undefined };
  }
  const value = Number(trimmed);
  if (!Number.isFinite(value) || value < 0) {
    return fail(
      field,
      trans.__('%1 must be a non-negative number, not "%2"', label, trimmed)
    );
  }
  return { ok: true, value };
}

/** Parse the finite-difference step: empty (dtype default), a positive number, or "adaptive". */
export function parseStep(text: string): Validated<number | 'adaptive' | null> {
  const trimmed = text.trim();
  if (!trimmed) {
    return { ok: true, value: null };
  }
  if (trimmed === 'adaptive') {
    return { ok: true, value: 'adaptive' };
  }
  const value = Number(trimmed);
  if (!Number.isFinite(value) || value <= 0) {
    return fail(
      'finite_difference.step',
      trans.__(
        'step must be a positive number or "adaptive", not "%1"',
        trimmed
      )
    );
  }
  return { ok: true, value };
}

/** Check the device against the server's list; an absent device is refused with its reason. */
export function deviceProblem(
  device: string,
  devices: IDevice[]
): string | null {
  if (!device) {
    return trans.__('choose a device');
  }
  const known = devices.find(d => d.id === device);
  if (known && !known.available) {
    return trans.__(
      '%1 is not available: %2',
      device,
      known.reason ?? trans.__('the server reports it absent')
    );
  }
  return null;
}

/** Build the check record from the declare form, or say which fields are wrong. */
export function buildCheck(
  values: IFormValues,
  devices: IDevice[] = []
): Validated<ICheckRecord> {
  const errors: FieldErrors = {};
  const fn = values.function.trim();
  if (!fn) {
    errors['function'] = trans.__(
      'function is required, for example %1',
      'x*x'
    );
  }
  const inputs = parseInputs(values.inputs);
  const analytical = parseAnalytical(values.analytical_gradient);
  const rtol = parseOptionalNumber(
    values['tolerance.rtol'],
    'tolerance.rtol',
    'rtol'
  );
  const atol = parseOptionalNumber(
    values['tolerance.atol'],
    'tolerance.atol',
    'atol'
  );
  const step = parseStep(values['finite_difference.step']);
  for (const result of [inputs, analytical, rtol, atol, step]) {
    if (!result.ok) {
      Object.assign(errors, result.errors);
    }
  }
  if (!DTYPES.includes(values.dtype)) {
    errors['dtype'] = trans.__('dtype must be one of %1', DTYPES.join(', '));
  }
  if (!FD_SCHEMES.includes(values['finite_difference.scheme'])) {
    errors['finite_difference.scheme'] = trans.__(
      'scheme must be one of %1',
      FD_SCHEMES.join(', ')
    );
  }
  const device = deviceProblem(values.device, devices);
  if (device) {
    errors['device'] = device;
  }
  if (
    Object.keys(errors).length ||
    !inputs.ok ||
    !analytical.ok ||
    !rtol.ok ||
    !atol.ok ||
    !step.ok
  ) {
    return { ok: false, errors };
  }
  const check: ICheckRecord = {
    function: fn,
    inputs: inputs.value,
    analytical_gradient: analytical.value,
    dtype: values.dtype,
    device: values.device,
    finite_difference: {
      scheme: values['finite_difference.scheme'],
      step: step.value
    },
    origin: values.origin.trim(),
    destination: values.destination.trim()
  };
  if (rtol.value !== undefined || atol.value !== undefined) {
    check.tolerance = {};
    if (rtol.value !== undefined) {
      check.tolerance.rtol = rtol.value;
    }
    if (atol.value !== undefined) {
      check.tolerance.atol = atol.value;
    }
  }
  return { ok: true, value: check };
}

/**
 * The form field a server error belongs to: `inputs.x` -> `inputs`,
 * `tolerance` -> `tolerance.rtol`, a bare input name -> `inputs`;
 * '' (the whole form) when nothing matches.
 */
export function fieldForError(
  field: string | null | undefined,
  inputNames: string[] = []
): string {
  if (!field) {
    return '';
  }
  if ((FORM_FIELDS as readonly string[]).includes(field)) {
    return field;
  }
  const head = field.split('.')[0];
  if (head === 'inputs' || inputNames.includes(head)) {
    return 'inputs';
  }
  if (head === 'analytical_gradient') {
    return 'analytical_gradient';
  }
  if (head === 'tolerance') {
    return field.endsWith('atol') ? 'tolerance.atol' : 'tolerance.rtol';
  }
  if (head === 'finite_difference') {
    return field.endsWith('step')
      ? 'finite_difference.step'
      : 'finite_difference.scheme';
  }
  return (FORM_FIELDS as readonly string[]).includes(head) ? head : '';
}

/** What a tolerance edit sends, once valid. */
export interface IToleranceEdit {
  rtol?: number;
  atol?: number;
  target: 'tolerance' | 'finite_difference';
  justification: string;
}

/** Refuse a blank justification with a message that says why it matters. */
export function justificationProblem(text: string): string | null {
  return text.trim()
    ? null
    : trans.__(
        'a justification is required: say why the change is right, so the grader can judge it'
      );
}

/** Validate the tolerance dialog: at least one of rtol/atol, and a justification. */
export function validateToleranceEdit(values: {
  rtol: string;
  atol: string;
  target: string;
  justification: string;
}): Validated<IToleranceEdit> {
  const errors: FieldErrors = {};
  const rtol = parseOptionalNumber(values.rtol, 'rtol', 'rtol');
  const atol = parseOptionalNumber(values.atol, 'atol', 'atol');
  if (!rtol.ok) {
    Object.assign(errors, rtol.errors);
  }
  if (!atol.ok) {
    Object.assign(errors, atol.errors);
  }
  if (
    rtol.ok &&
    atol.ok &&
    rtol.value === undefined &&
    atol.value === undefined
  ) {
    errors['rtol'] = trans.__('give a new rtol, a new atol, or both');
  }
  const justification = justificationProblem(values.justification);
  if (justification) {
    errors['justification'] = justification;
  }
  if (Object.keys(errors).length || !rtol.ok || !atol.ok) {
    return { ok: false, errors };
  }
  const edit: IToleranceEdit = {
    target:
      values.target === 'finite_difference' ? 'finite_difference' : 'tolerance',
    justification: values.justification.trim()
  };
  if (rtol.value !== undefined) {
    edit.rtol = rtol.value;
  }
  if (atol.value !== undefined) {
    edit.atol = atol.value;
  }
  return { ok: true, value: edit };
}

/** Validate the expectation dialog: a new analytical gradient and a justification. */
export function validateExpectationEdit(values: {
  analytical_gradient: string;
  justification: string;
}): Validated<{ analytical_gradient: JSONValue; justification: string }> {
  const errors: FieldErrors = {};
  const analytical = parseAnalytical(values.analytical_gradient);
  if (!analytical.ok) {
    Object.assign(errors, analytical.errors);
  }
  const justification = justificationProblem(values.justification);
  if (justification) {
    errors['justification'] = justification;
  }
  if (!analytical.ok || Object.keys(errors).length) {
    return { ok: false, errors };
  }
  return {
    ok: true,
    value: {
      analytical_gradient: analytical.value,
      justification: values.justification.trim()
    }
  };
}
