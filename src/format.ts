/**
 * Text for values shown in the panel. Pure functions, so they are tested
 * without a browser.
 *
 * Observed values are printed the way Python prints the float they were
 * (6.0, not 6), because JSON loses that distinction and the panel must not
 * make an observed float look like a declared integer.
 */
import { trans } from './i18n';
import {
  IStoredValue,
  ITensorObservation,
  ITolerance,
  JSONValue
} from './types';
import { wordsFor } from './words';

const FLOAT_DTYPES = new Set([
  'float64',
  'float32',
  'float16',
  'bfloat16',
  'double',
  'float',
  'half',
  'complex64',
  'complex128'
]);

/** Whether values of this dtype are floating point (the default is float64). */
export function isFloatDtype(dtype: string | undefined | null): boolean {
  if (!dtype) {
    return true;
  }
  return FLOAT_DTYPES.has(dtype.replace(/^torch\./, ''));
}

/** Significant digits of a value the panel shows (full precision is in its title and every export). */
export const VALUE_DIGITS = 6;
/** Significant digits of an error or a tolerance the panel shows. */
export const ERROR_DIGITS = 3;

/**
 * A float as Python's repr writes it: 6.0, 0.5, 1e-07, 1.5e+20; rounded to
 * `digits` significant digits first when given (0.51251476 -> 0.512515).
 */
export function formatFloat(value: number, digits?: number): string {
  if (digits !== undefined && Number.isFinite(value)) {
    value = Number(value.toPrecision(digits));
  }
  if (Number.isNaN(value)) {
    return 'nan';
  }
  if (!Number.isFinite(value)) {
    return value > 0 ? 'inf' : '-inf';
  }
  const magnitude = Math.abs(value);
  if (value !== 0 && (magnitude < 1e-4 || magnitude >= 1e16)) {
    const [mantissa, exponent] = value.toExponential().split('e');
    const sign = exponent.startsWith('-') ? '-' : '+';
    const digits = exponent.replace(/^[+-]/, '').padStart(2, '0');
    return `${mantissa}e${sign}${digits}`;
  }
  if (Number.isInteger(value)) {
    return value.toFixed(1);
  }
  return String(value);
}

/** A number in the style of its dtype: floats as Python floats (to `digits` when given), integers bare. */
export function formatNumber(
  value: number,
  dtype?: string | null,
  digits?: number
): string {
  return isFloatDtype(dtype) ? formatFloat(value, digits) : String(value);
}

/**
 * Whether `value` is a complex value as the record writes it: an object whose
 * keys are exactly `real` and `imag`. (A mapping of two inputs named `real`
 * and `imag` reads the same; no check names its inputs so.)
 */
export function isComplexValue(
  value: JSONValue | undefined
): value is { real: JSONValue; imag: JSONValue } {
  if (!value || typeof value !== 'object' || Array.isArray(value)) {
    return false;
  }
  const keys = Object.keys(value).sort();
  return keys.length === 2 && keys[0] === 'imag' && keys[1] === 'real';
}

/** Whether `value` is a stored value `{stored: {sha256, shape, dtype, bytes}, summary}`. */
export function isStoredValue(
  value: JSONValue | undefined | unknown
): value is IStoredValue {
  if (!value || typeof value !== 'object' || Array.isArray(value)) {
    return false;
  }
  const stored = (value as { stored?: unknown }).stored;
  return (
    !!stored &&
    typeof stored === 'object' &&
    Object.keys(value).every(key => key === 'stored' || key === 'summary')
  );
}

/** One element of a stored value's summary or page: a float, or an `[re, im]` pair. */
export function formatElement(
  value: JSONValue | undefined,
  digits?: number
): string {
  if (typeof value === 'number') {
    return formatFloat(value, digits);
  }
  if (Array.isArray(value) && value.length === 2) {
    return formatComplex(value[0], value[1], part => formatFloat(part, digits));
  }
  return value === undefined || value === null ? '—' : String(value);
}

/** `float64 [100000], stored`: what a stored value is, without its elements. */
export function formatStoredKind(value: IStoredValue): string {
  return trans.__(
    '%1 %2, stored',
    value.stored.dtype,
    formatShape(value.stored.shape)
  );
}

/** `min -1.0 · max 1.0 · mean 0.0 · norm 182.576 · non-finite 0`, to `digits` when given. */
export function formatStoredSummary(
  value: IStoredValue,
  digits?: number
): string {
  const summary = value.summary ?? {};
  const number = (item: number | null | undefined) =>
    typeof item === 'number' ? formatFloat(item, digits) : '—';
  return trans.__(
    'min %1 · max %2 · mean %3 · norm %4 · non-finite %5',
    number(summary.min),
    number(summary.max),
    number(summary.mean),
    number(summary.norm),
    String(summary.nonfinite ?? '—')
  );
}

/** `first 8: -1.0, -0.99998, ...`: the summary's head, the first elements flattened. */
export function formatStoredHead(value: IStoredValue, digits?: number): string {
  const head = value.summary?.head ?? [];
  return trans.__(
    'first %1: %2',
    head.length,
    head.map(item => formatElement(item, digits)).join(', ')
  );
}

/** A stored value on one line: what it is and its summary (never its elements beyond the head). */
export function formatStoredValue(
  value: IStoredValue,
  digits?: number
): string {
  return `${formatStoredKind(value)} · ${formatStoredSummary(value, digits)}`;
}

/**
 * A complex value as `a+bi`, element by element through nested lists:
 * `{real: [1, 2], imag: [0.5, -1]}` -> `[1.0+0.5i, 2.0-1.0i]`. `part` writes
 * each real number (observed: as a Python float; declared: as written).
 */
export function formatComplex(
  real: JSONValue,
  imag: JSONValue,
  part: (value: number) => string
): string {
  if (Array.isArray(real)) {
    const imaginary = Array.isArray(imag) ? imag : [];
    return `[${real.map((item, i) => formatComplex(item, imaginary[i] ?? null, part)).join(', ')}]`;
  }
  if (typeof real !== 'number' || typeof imag !== 'number') {
    return `${String(real)}+${String(imag)}i`;
  }
  const negative = imag < 0 || Object.is(imag, -0);
  return `${part(real)}${negative ? '-' : '+'}${part(Math.abs(imag))}i`;
}

/**
 * An observed value (number, nested list, complex value, or mapping input ->
 * value), each float to `digits` significant digits when given (full
 * precision otherwise: the title a shown value carries).
 */
export function formatObserved(
  value: JSONValue | undefined,
  dtype?: string | null,
  digits?: number
): string {
  if (value === undefined || value === null) {
    return '—';
  }
  if (typeof value === 'number') {
    return formatNumber(value, dtype, digits);
  }
  if (isStoredValue(value)) {
    return formatStoredValue(value, digits);
  }
  if (isComplexValue(value)) {
    return formatComplex(value.real, value.imag, part =>
      formatFloat(part, digits)
    );
  }
  if (Array.isArray(value)) {
    return `[${value.map(item => formatObserved(item, dtype, digits)).join(', ')}]`;
  }
  if (typeof value === 'object') {
    return Object.entries(value)
      .map(([name, item]) => `${name}: ${formatObserved(item, dtype, digits)}`)
      .join('; ');
  }
  return String(value);
}

/**
 * A declared expectation exactly as it was written: 6 stays 6, an expression
 * stays its text, a mapping shows one line per input.
 */
export function formatDeclared(value: JSONValue | undefined): string {
  if (value === undefined || value === null) {
    return '—';
  }
  if (typeof value === 'string') {
    return value;
  }
  if (isStoredValue(value)) {
    return formatStoredValue(value);
  }
  if (isComplexValue(value)) {
    return formatComplex(value.real, value.imag, String);
  }
  if (Array.isArray(value) || typeof value !== 'object') {
    return JSON.stringify(value);
  }
  return Object.entries(value)
    .map(([name, item]) => `${name}: ${formatDeclared(item)}`)
    .join('; ');
}

/** The shape of a number, nested list or complex value: [] for a scalar, [2, 3] for a matrix. */
export function shapeOf(value: JSONValue | undefined): number[] {
  if (isStoredValue(value)) {
    return value.stored.shape;
  }
  const shape: number[] = [];
  let level: JSONValue | undefined = isComplexValue(value) ? value.real : value;
  while (Array.isArray(level)) {
    shape.push(level.length);
    level = level[0];
  }
  return shape;
}

/** A shape as `[2, 3]`, with the empty shape of a scalar spelled out. */
export function formatShape(shape: number[] | undefined | null): string {
  if (!shape || shape.length === 0) {
    return trans.__('[] scalar');
  }
  return `[${shape.join(', ')}]`;
}

/** The line under an observed value: `shape [] scalar · float64 · cpu`. */
export function formatTensorMeta(observation: ITensorObservation): string {
  const shape = observation.shape ?? shapeOf(observation.value);
  const parts = [trans.__('shape %1', formatShape(shape))];
  parts.push(observation.dtype ?? trans.__('dtype unknown'));
  parts.push(observation.device ?? trans.__('device unknown'));
  return parts.join(' · ');
}

/**
 * Where a comparison or failure applies: the input, and for a multi-output
 * check the output (`x, output 1`); empty when the record names neither.
 */
export function formatWhere(
  input?: string | null,
  output?: number | string | null
): string {
  const parts: string[] = [];
  if (input) {
    parts.push(input);
  }
  if (output !== undefined && output !== null) {
    parts.push(trans.__('output %1', output));
  }
  return parts.join(', ');
}

/** Which grad_outputs an undefined-gradient case left undefined, in words (core/check/autograd/forward_and_batched.py). */
export function formatUndefinedCase(
  which: string | number | number[] | null | undefined
): string {
  if (which === 'all' || which === undefined || which === null) {
    return trans.__('every grad_output undefined');
  }
  return trans.__(
    'grad_output %1 undefined, the others zero',
    Array.isArray(which) ? which.join(', ') : which
  );
}

/** An error size: three significant digits, exponent form. */
export function formatError(value: number | undefined | null): string {
  if (value === undefined || value === null) {
    return '—';
  }
  if (value === 0) {
    return '0';
  }
  return formatFloat(value, ERROR_DIGITS);
}

/**
 * A tolerance pair: `rtol 1e-07, atol 1e-10`, or `dtype default`; each to
 * `digits` significant digits (3.67e-09, not 3.666852862501036e-09), or in
 * full when `digits` is null.
 */
export function formatTolerance(
  tolerance: ITolerance | undefined | null,
  digits: number | null = ERROR_DIGITS
): string {
  if (!tolerance) {
    return trans.__('dtype default');
  }
  const parts: string[] = [];
  if (tolerance.rtol !== undefined && tolerance.rtol !== null) {
    parts.push(`rtol ${formatFloat(tolerance.rtol, digits ?? undefined)}`);
  }
  if (tolerance.atol !== undefined && tolerance.atol !== null) {
    parts.push(`atol ${formatFloat(tolerance.atol, digits ?? undefined)}`);
  }
  return parts.length ? parts.join(', ') : trans.__('dtype default');
}

/** A diagnosis code as words: `probable_bug` -> `probable bug` (translated; words.ts). */
export function formatDiagnosis(diagnosis: string | undefined | null): string {
  return diagnosis
    ? wordsFor('diagnosis', diagnosis)
    : trans.__('no diagnosis');
}

/** A UTC timestamp shortened to minutes for the history list. */
export function formatTime(time: string | undefined): string {
  if (!time) {
    return '';
  }
  const match = /^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2})/.exec(time);
  return match ? trans.__('%1 %2 UTC', match[1], match[2]) : time;
}
