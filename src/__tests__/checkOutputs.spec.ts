/**
 * The output groups of a check's main table: one per output for a function
 * with several, read from the per-output expectation and the record's
 * `outputs`; one with no index for every other check.
 */
import { outputViews, perOutputExpectations } from '../checkOutputs';
import { ICheckRecord } from '../types';

describe('perOutputExpectations', () => {
  it('reads {"outputs": [...]} as one expectation per output', () => {
    expect(perOutputExpectations({ outputs: ['2*x', null] }, ['x'])).toEqual([
      '2*x',
      null
    ]);
  });

  it('leaves a mapping alone when an input is named outputs, or when the mapping has other keys', () => {
    // Given a check whose input is itself called "outputs": its mapping names that input, as in Python
    expect(perOutputExpectations({ outputs: [1, 2] }, ['outputs'])).toBeNull();
    expect(perOutputExpectations({ outputs: [1, 2], x: 3 }, ['x'])).toBeNull();
    expect(perOutputExpectations('2*x', ['x'])).toBeNull();
  });
});

describe('outputViews', () => {
  it('is one group with no index, the record top level, for a one-output check', () => {
    const record: ICheckRecord = {
      executed: true,
      observations: { backward_pass_1: { gradients: {} } }
    };
    expect(outputViews('2*x', record, ['x'])).toEqual([
      {
        index: null,
        analytical: '2*x',
        observations: record.observations,
        differentiable: true
      }
    ]);
  });

  it('lists the declared outputs before any run, and marks the outputs a run could not check', () => {
    // Given a declaration of two outputs, not run yet
    const declared = outputViews({ outputs: ['2*x', '3*x**2'] }, undefined, [
      'x'
    ]);
    expect(declared.map(o => [o.index, o.analytical, o.observations])).toEqual([
      [0, '2*x', undefined],
      [1, '3*x**2', undefined]
    ]);
    // When its run found a third, integer output
    const record: ICheckRecord = {
      executed: true,
      outputs: [
        { index: 0, observations: {} },
        { index: 1, observations: {} },
        { index: 2, differentiable: false }
      ]
    };
    // Then the third is a group of its own, with no expectation, marked not differentiable
    expect(
      outputViews({ outputs: ['2*x', '3*x**2'] }, record, ['x']).map(o => [
        o.index,
        o.analytical ?? null,
        o.differentiable
      ])
    ).toEqual([
      [0, '2*x', true],
      [1, '3*x**2', true],
      [2, null, false]
    ]);
  });
});
