/**
 * Validation of the declare form and the edit dialogs.
 */
import {
  IFormValues,
  buildCheck,
  fieldForError,
  parseAnalytical,
  parseInputs,
  validateExpectationEdit,
  validateToleranceEdit
} from '../validation';
import { builtSquare, formValues } from './fakes';

/** The declare form for x*x at 3 with the expectation 6, with no origin or destination. */
function form(overrides: Partial<IFormValues> = {}): IFormValues {
  return formValues({ origin: '', destination: '', ...overrides });
}

describe('parseInputs', () => {
  it('accepts a JSON object of numbers and nested lists', () => {
    const result = parseInputs('{"x": 3, "w": [[1, 2], [3, 4]]}');
    expect(result).toEqual({
      ok: true,
      value: {
        x: 3,
        w: [
          [1, 2],
          [3, 4]
        ]
      }
    });
  });

  it.each([
    ['', 'inputs are required'],
    ['{x: 3}', 'not valid JSON'],
    ['[3]', 'must be a JSON object'],
    ['{}', 'at least one input'],
    ['{"2x": 3}', 'not an identifier'],
    ['{"x": "three"}', 'input x must be a number or a nested list'],
    ['{"x": [[1, 2], [3]]}', 'ragged'],
    ['{"x": []}', 'empty list']
  ])('refuses %j with a message naming the problem', (text, message) => {
    // Given malformed inputs, When parsed, Then the error sits on the inputs field and names the problem
    const result = parseInputs(text);
    expect(result.ok).toBe(false);
    if (!result.ok) {
      expect(result.errors.inputs).toContain(message);
    }
  });
});

describe('parseAnalytical', () => {
  it('takes JSON values as values and anything else as an expression', () => {
    expect(parseAnalytical('6')).toEqual({ ok: true, value: 6 });
    expect(parseAnalytical('[1, 2]')).toEqual({ ok: true, value: [1, 2] });
    expect(parseAnalytical('{"x": "2*x"}')).toEqual({
      ok: true,
      value: { x: '2*x' }
    });
    expect(parseAnalytical(' 3*x ')).toEqual({ ok: true, value: '3*x' });
  });

  it('refuses a missing expectation: it must be written before the run', () => {
    const result = parseAnalytical('  ');
    expect(result.ok).toBe(false);
  });

  it('refuses booleans and null', () => {
    expect(parseAnalytical('true').ok).toBe(false);
    expect(parseAnalytical('null').ok).toBe(false);
  });
});

describe('buildCheck', () => {
  it('builds the seed check with no tolerance when none was written', () => {
    // Given the seed declaration typed into the form
    // When the check is built
    // Then it is the record the server expects, leaving the tolerance to the dtype default
    const result = buildCheck(form());
    expect(result).toEqual({
      ok: true,
      value: builtSquare({ origin: '', destination: '' })
    });
  });

  it('includes only the tolerances that were written, and the step', () => {
    const result = buildCheck(
      form({ 'tolerance.rtol': '1e-5', 'finite_difference.step': 'adaptive' })
    );
    expect(result.ok && result.value.tolerance).toEqual({ rtol: 1e-5 });
    expect(result.ok && result.value.finite_difference).toEqual({
      scheme: 'central',
      step: 'adaptive'
    });
  });

  it('collects every field error at once', () => {
    // Given three wrong fields, When built, Then each has its own message
    const result = buildCheck(
      form({
        function: ' ',
        'tolerance.atol': '-1',
        'finite_difference.step': '0'
      })
    );
    expect(result.ok).toBe(false);
    if (!result.ok) {
      expect(Object.keys(result.errors).sort()).toEqual([
        'finite_difference.step',
        'function',
        'tolerance.atol'
      ]);
    }
  });

  it('refuses an absent device with the server reason', () => {
    // Given the server reports cuda absent
    const devices = [
      { id: 'cpu', available: true },
      { id: 'cuda', available: false, reason: 'torch reports no CUDA device' }
    ];
    // When a check asks for cuda
    const result = buildCheck(form({ device: 'cuda' }), devices);
    // Then it is refused on the device field, with the reason
    expect(result.ok).toBe(false);
    if (!result.ok) {
      expect(result.errors.device).toBe(
        'cuda is not available: torch reports no CUDA device'
      );
    }
  });
});

describe('fieldForError', () => {
  it('maps server fields onto form fields', () => {
    expect(fieldForError('inputs.x')).toBe('inputs');
    expect(fieldForError('x', ['x'])).toBe('inputs');
    expect(fieldForError('function')).toBe('function');
    expect(fieldForError('tolerance.atol')).toBe('tolerance.atol');
    expect(fieldForError('tolerance')).toBe('tolerance.rtol');
    expect(fieldForError('finite_difference.step')).toBe(
      'finite_difference.step'
    );
    expect(fieldForError('finite_difference.rtol')).toBe(
      'finite_difference.scheme'
    );
    expect(fieldForError('analytical_gradient.x')).toBe('analytical_gradient');
    expect(fieldForError('grad_output')).toBe('');
    expect(fieldForError(null)).toBe('');
  });
});

describe('edit dialogs', () => {
  it('refuse a blank justification', () => {
    // Given a tolerance edit whose justification is only spaces
    const result = validateToleranceEdit({
      rtol: '0.5',
      atol: '',
      target: 'tolerance',
      justification: '   '
    });
    // Then it is refused on the justification field
    expect(result.ok).toBe(false);
    if (!result.ok) {
      expect(result.errors.justification).toContain(
        'justification is required'
      );
    }
  });

  it('accept a justified tolerance edit, trimmed', () => {
    const result = validateToleranceEdit({
      rtol: '0.5',
      atol: '',
      target: 'tolerance',
      justification: ' 3x is a typo for 2x '
    });
    expect(result).toEqual({
      ok: true,
      value: {
        rtol: 0.5,
        target: 'tolerance',
        justification: '3x is a typo for 2x'
      }
    });
  });

  it('need a new rtol or atol', () => {
    const result = validateToleranceEdit({
      rtol: '',
      atol: '',
      target: 'tolerance',
      justification: 'why'
    });
    expect(result.ok).toBe(false);
    if (!result.ok) {
      expect(result.errors.rtol).toContain('give a new rtol');
    }
  });

  it('refuse an expectation revision without justification', () => {
    const result = validateExpectationEdit({
      analytical_gradient: '2*x',
      justification: ''
    });
    expect(result.ok).toBe(false);
    const accepted = validateExpectationEdit({
      analytical_gradient: '2*x',
      justification: 'power rule'
    });
    expect(accepted).toEqual({
      ok: true,
      value: { analytical_gradient: '2*x', justification: 'power rule' }
    });
  });
});
