/**
 * Formatting of values with their shape, dtype and device.
 */
import {
  formatDeclared,
  formatError,
  formatFloat,
  formatNumber,
  formatObserved,
  formatShape,
  formatTensorMeta,
  formatTolerance,
  formatWhere,
  shapeOf
} from '../format';

describe('formatObserved', () => {
  it('shows an observed float64 six as 6.0, as Python prints it', () => {
    // Given the observed gradient of x*x at 3, which JSON delivers as the number 6
    // When it is formatted as a float64 value
    // Then it reads 6.0, never the declared-looking 6
    expect(formatObserved(6, 'float64')).toBe('6.0');
  });

  it('keeps integer dtypes bare', () => {
    // Given an int64 value, When formatted, Then no ".0" is invented
    expect(formatNumber(6, 'int64')).toBe('6');
  });

  it('formats nested lists element by element', () => {
    // Given a 2x2 observed gradient, When formatted, Then each float keeps its float form
    expect(
      formatObserved(
        [
          [1, 2.5],
          [3, 4]
        ],
        'float32'
      )
    ).toBe('[[1.0, 2.5], [3.0, 4.0]]');
  });

  it('formats a mapping of input -> value with each name', () => {
    // Given two inputs' gradients, When formatted, Then each is named
    expect(formatObserved({ x: 2, w: [1, 0.5] }, 'float64')).toBe(
      'x: 2.0; w: [1.0, 0.5]'
    );
  });

  it('shows a missing observation as a dash', () => {
    // Given a check that has not run, When formatted, Then it is a dash, not "null"
    expect(formatObserved(null, 'float64')).toBe('—');
  });
});

describe('formatFloat', () => {
  it('uses exponent form below 1e-4 with two exponent digits, like Python', () => {
    // Given small and large magnitudes, When formatted, Then they match Python's repr
    expect(formatFloat(1e-7)).toBe('1e-07');
    expect(formatFloat(6.05e-6)).toBe('6.05e-06');
    expect(formatFloat(1.5e20)).toBe('1.5e+20');
    expect(formatFloat(0.001)).toBe('0.001');
    expect(formatFloat(-0.5)).toBe('-0.5');
  });

  it('names non-finite values as Python does', () => {
    expect(formatFloat(NaN)).toBe('nan');
    expect(formatFloat(-Infinity)).toBe('-inf');
  });
});

describe('formatDeclared', () => {
  it('keeps the expectation exactly as written', () => {
    // Given the seed expectation 6, an expression and a list
    // When formatted, Then 6 stays 6 and the expression stays text
    expect(formatDeclared(6)).toBe('6');
    expect(formatDeclared('2*x')).toBe('2*x');
    expect(formatDeclared([1, 2])).toBe('[1,2]');
    expect(formatDeclared({ x: '2*x', w: 1 })).toBe('x: 2*x; w: 1');
  });
});

describe('shape, dtype and device', () => {
  it('infers the shape of scalars and nested lists', () => {
    expect(shapeOf(3)).toEqual([]);
    expect(shapeOf([1, 2, 3])).toEqual([3]);
    expect(
      shapeOf([
        [1, 2, 3],
        [4, 5, 6]
      ])
    ).toEqual([2, 3]);
  });

  it('spells out the scalar shape', () => {
    expect(formatShape([])).toBe('[] scalar');
    expect(formatShape([2, 3])).toBe('[2, 3]');
  });

  it('puts shape, dtype and device on one line', () => {
    // Given an observation as the engine reports it
    // When its metadata is formatted
    // Then all three facts are shown
    expect(
      formatTensorMeta({ value: 6, shape: [], dtype: 'float64', device: 'cpu' })
    ).toBe('shape [] scalar · float64 · cpu');
  });

  it('infers the shape when the observation lacks it, and says what is unknown', () => {
    expect(formatTensorMeta({ value: [[1, 2]] })).toBe(
      'shape [1, 2] · dtype unknown · device unknown'
    );
  });
});

describe('errors and tolerances', () => {
  it('rounds error sizes to three significant digits', () => {
    expect(formatError(0.000123456)).toBe('0.000123');
    expect(formatError(2)).toBe('2.0');
    expect(formatError(0)).toBe('0');
    expect(formatError(undefined)).toBe('—');
  });

  it('formats a tolerance pair, or says the dtype default applies', () => {
    expect(formatTolerance({ rtol: 1e-7, atol: 1e-10 })).toBe(
      'rtol 1e-07, atol 1e-10'
    );
    expect(formatTolerance({ rtol: 0.5 })).toBe('rtol 0.5');
    expect(formatTolerance(undefined)).toBe('dtype default');
  });
});

describe('complex values', () => {
  it('shows an observed complex gradient as a+bi, element by element, each part a Python float', () => {
    // Given the record's complex form: the real and the imaginary parts as parallel nested lists
    const value = {
      real: [
        [1, -0.5],
        [0, 2]
      ],
      imag: [
        [0.5, -1],
        [-0, 3e-7]
      ]
    };
    // When formatted as a complex128 observation
    // Then each element reads a+bi, a negative (or negative-zero) imaginary part with a minus
    expect(formatObserved(value, 'complex128')).toBe(
      '[[1.0+0.5i, -0.5-1.0i], [0.0-0.0i, 2.0+3e-07i]]'
    );
    expect(formatObserved({ real: 3, imag: -4 }, 'complex64')).toBe('3.0-4.0i');
  });

  it('keeps a declared complex expectation as written, and takes its shape from the parts', () => {
    expect(formatDeclared({ real: [6, 1], imag: [0, -2] })).toBe(
      '[6+0i, 1-2i]'
    );
    expect(shapeOf({ real: [[1, 2, 3]], imag: [[0, 0, 0]] })).toEqual([1, 3]);
    expect(
      formatTensorMeta({
        value: { real: [1, 2], imag: [0, 1] },
        dtype: 'complex128',
        device: 'cpu'
      })
    ).toBe('shape [2] · complex128 · cpu');
  });

  it('still reads a mapping of other names as input -> value', () => {
    expect(formatObserved({ real: 1, w: 2 }, 'float64')).toBe(
      'real: 1.0; w: 2.0'
    );
  });
});

describe('formatWhere', () => {
  it('names the input, and the output of a multi-output check after it', () => {
    expect(formatWhere('x')).toBe('x');
    expect(formatWhere('x', 0)).toBe('x, output 0');
    expect(formatWhere(undefined, 2)).toBe('output 2');
    expect(formatWhere(undefined, null)).toBe('');
  });
});

describe('numbers for people', () => {
  it('shows a value to six significant digits and its error and tolerance to three, full precision kept apart', () => {
    // Given a relative error and a finite-difference tolerance as the record keeps them
    const value = 0.5125147650330922;
    const tolerance = {
      rtol: 3.666852862501036e-9,
      atol: 3.666852862501036e-9
    };
    // Then the shown value has six digits, the tolerance three, and neither breaks mid-number
    expect(formatObserved(value, 'float64', 6)).toBe('0.512515');
    expect(formatObserved([value, 1e-12 / 3], 'float64', 6)).toBe(
      '[0.512515, 3.33333e-13]'
    );
    expect(formatTolerance(tolerance)).toBe('rtol 3.67e-09, atol 3.67e-09');
    // And the full value is what a title (hover) shows
    expect(formatObserved(value, 'float64')).toBe('0.5125147650330922');
    expect(formatTolerance(tolerance, null)).toBe(
      'rtol 3.666852862501036e-09, atol 3.666852862501036e-09'
    );
    // And rounding keeps Python's float look: 6 is 6.0, integers stay bare
    expect(formatFloat(5.999999999981665, 6)).toBe('6.0');
    expect(formatNumber(7, 'int64', 6)).toBe('7');
  });
});
