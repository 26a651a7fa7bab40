/**
 * The outputs of a check as its card's main table shows them. A Python
 * function that returns several tensors is checked output by output: its
 * expectation is written `{"outputs": [e_0, e_1, ...]}` and its record keeps
 * each output's observations under `outputs` (core/check/autograd/several_outputs.py), so the
 * card shows one group of rows per output. A one-output check is one group
 * with no output index, read from the record's top level as before. Pure, so
 * it is tested without a browser.
 */
import { ICheckRecord, IOutputPart, JSONValue } from './types';

/** One output's expectation and observations (the whole check's, for a one-output check). */
export interface IOutputView {
  /** The output's index; null for a one-output check. */
  index: number | null;
  /** The expectation written for this output (a value, an expression or a mapping input -> one of those). */
  analytical: JSONValue | undefined;
  /** What was observed for this output; undefined before a run. */
  observations: ICheckRecord['observations'];
  /** false for an output the record lists but did not check (not a float tensor requiring grad). */
  differentiable: boolean;
}

/** The per-output expectations, when the expectation is in the per-output form (an input named `outputs` keeps the mapping's reading). */
export function perOutputExpectations(
  analytical: JSONValue | undefined,
  names: string[]
): (JSONValue | undefined)[] | null {
  if (
    !analytical ||
    typeof analytical !== 'object' ||
    Array.isArray(analytical) ||
    names.includes('outputs')
  ) {
    return null;
  }
  const keys = Object.keys(analytical);
  const entries = (analytical as { [key: string]: JSONValue }).outputs;
  return keys.length === 1 && Array.isArray(entries) ? entries : null;
}

/** The output groups of a check: its expectation now in force, its latest record, its input names. */
export function outputViews(
  analytical: JSONValue | undefined,
  record: ICheckRecord | undefined,
  names: string[]
): IOutputView[] {
  const written = perOutputExpectations(analytical, names);
  const observed: IOutputPart[] | null = Array.isArray(record?.outputs)
    ? (record!.outputs as IOutputPart[])
    : null;
  if (!written && !observed) {
    return [
      {
        index: null,
        analytical,
        observations: record?.observations,
        differentiable: true
      }
    ];
  }
  const count = Math.max(written?.length ?? 0, observed?.length ?? 0);
  return Array.from({ length: count }, (_, k) => {
    const part = observed?.find(o => o.index === k) ?? observed?.[k];
    return {
      index: k,
      analytical: written?.[k] ?? undefined,
      observations: part?.observations,
      differentiable: part?.differentiable !== false
    };
  });
}
