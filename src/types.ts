/**
 * Shapes of the JSON that travels between the side panel and the server
 * extension (docs/contracts.md). Only the fields the panel reads are typed;
 * everything else is carried through untouched.
 */

/** A JSON value as the REST API sends it. */
export type JSONValue =
  null | boolean | number | string | JSONValue[] | { [key: string]: JSONValue };

/** A JSON object. */
export type JSONRecord = { [key: string]: JSONValue };

/**
 * A complex value as the record writes it: the real and the imaginary parts,
 * each a number or a nested list of the same shape.
 */
export interface IComplexValue {
  real: JSONValue;
  imag: JSONValue;
}

/**
 * A tensor of more than 256 elements as a record keeps it: by the SHA-256 of
 * its safetensors file beside the ledger, with its shape, dtype and a summary.
 * Its elements are read a page at a time (`GET ledger/blob`), only when asked.
 */
export interface IStoredValue {
  stored: { sha256: string; shape: number[]; dtype: string; bytes: number };
  summary?: {
    min?: number | null;
    max?: number | null;
    mean?: number | null;
    norm?: number | null;
    nonfinite?: number;
    head?: JSONValue[];
  };
}

/** Answer of `GET ledger/blob`: elements `offset ..` of a stored value, flat, row-major. */
export interface IBlobPage {
  sha256: string;
  shape: number[];
  dtype: string;
  /** Numbers, or `[re, im]` pairs for a complex dtype. */
  values: JSONValue[];
  offset: number;
  total: number;
}

/** One observed tensor: its value with the shape, dtype and device it had. */
export interface ITensorObservation {
  value: JSONValue;
  shape?: number[];
  dtype?: string;
  device?: string;
}

/** The first (or any) failed comparison of a run. */
export interface IFailure {
  comparison?: string;
  input?: string;
  /** Which output of a multi-output check (absent for a single output). */
  output?: number | string;
  index?: number[];
  left?: JSONValue;
  right?: JSONValue;
  abs_err?: number;
  rel_err?: number;
  diagnosis?: string;
  reason?: string;
}

/** One comparison between two observations. */
export interface IComparison {
  name: string;
  input?: string;
  /** Which output of a multi-output check (absent for a single output). */
  output?: number | string;
  /** Which grad_outputs an undefined-gradient comparison left undefined (`all`, or the output's index). */
  undefined?: string | number | number[];
  max_abs_err?: number;
  max_rel_err?: number;
  rtol?: number;
  atol?: number;
  passed: boolean;
}

/** A tolerance pair. */
export interface ITolerance {
  rtol?: number | null;
  atol?: number | null;
}

/** The check record, declared or completed. */
export interface ICheckRecord {
  id?: string;
  function?: string;
  inputs?: JSONRecord;
  dtype?: string;
  device?: string;
  analytical_gradient?: JSONValue;
  tolerance?: ITolerance;
  finite_difference?: ITolerance & { scheme?: string; step?: JSONValue };
  origin?: string;
  destination?: string;
  executed?: boolean;
  observed_gradient?: JSONValue;
  passed?: boolean;
  observations?: {
    [name: string]: {
      gradients?: { [input: string]: ITensorObservation };
      [key: string]:
        JSONValue | undefined | { [input: string]: ITensorObservation };
    };
  };
  comparisons?: IComparison[];
  /** In a low precision: the smallest relative one-element error the check could have caught (core/check/first_order.py). */
  detection_floor?: {
    relative: number;
    input: string;
    index: number[];
    reason?: string;
  };
  /** In a low precision: the same check in float64 where the code runs there (core/check/engine.py). */
  float64_shadow?: {
    status: 'observed' | 'not_run';
    dtype: string;
    passed?: boolean;
    reason?: string;
  };
  failure?: IFailure | null;
  failures?: IFailure[];
  /** Each output of a function that returns several (core/check/autograd/several_outputs.py); absent for one output. */
  outputs?: IOutputPart[];
  /** A custom Function's Hessian check (core/check/autograd/second_order.py), when `hessian` was given. */
  second_order?: ISecondOrder | null;
  /** A custom Function's forward mode and batched gradients (core/check/autograd/forward_and_batched.py). */
  function_modes?: IFunctionModes | null;
  [key: string]: unknown;
}

/**
 * One observation of a second-order or function-mode block: a tensor under
 * `hessian`, `tangent` or `gradients`, or a verdict (`status`, `reason`) such
 * as gradgradcheck's, or a skip with its reason.
 */
export interface IBlockObservation {
  name?: string;
  status?: string;
  reason?: string;
  hessian?: ITensorObservation;
  tangent?: ITensorObservation;
  gradients?: ITensorObservation;
  [key: string]: unknown;
}

/** The `second_order` block: the expected Hessian and what autograd, finite differences and gradgradcheck saw. */
export interface ISecondOrder {
  input?: string;
  /** The declared Hessian (nested list), or `double_backward` when autograd's is the reference. */
  expectation?: JSONValue;
  observations?: { [key: string]: IBlockObservation };
  comparisons?: IComparison[];
  passed?: boolean;
}

/**
 * One case of a mode that runs several (`undefined_grad`: every grad_output
 * undefined, then each in turn): the gradients it returned per input (null:
 * None), or the crash with its reason.
 */
export interface IModeCase {
  undefined?: string | number | number[];
  status?: string;
  reason?: string;
  gradients?: { [input: string]: ITensorObservation | null };
}

/** One mode of the `function_modes` block (`forward_ad`, `batched_grad`, `undefined_grad`). */
export interface IFunctionMode extends IBlockObservation {
  direction?: string;
  grad_outputs?: number;
  cases?: IModeCase[];
  comparisons?: IComparison[];
}

/** The `function_modes` block: the modes by name, with the input and the Functions it checked. */
export interface IFunctionModes {
  input?: string;
  functions?: string[];
  forward_ad?: IFunctionMode;
  batched_grad?: IFunctionMode;
  batched_forward_grad?: IFunctionMode;
  undefined_grad?: IFunctionMode;
  [mode: string]: IFunctionMode | string | string[] | undefined;
}

/** One output of a multi-output check: what it is, and (when it was checked) its observations. */
export interface IOutputPart {
  index: number;
  shape?: number[];
  dtype?: string;
  device?: string;
  /** false for an output that is not a float tensor requiring grad: listed, not checked. */
  differentiable?: boolean;
  observations?: ICheckRecord['observations'];
  comparisons?: IComparison[];
}

/** One line of the ledger. */
export interface ILedgerEntry {
  seq: number;
  time?: string;
  kind: string;
  check_id: string | null;
  data: { [key: string]: unknown };
  prev?: string | null;
  hash?: string;
}

/** The ledger's summary: where it is, how long it is, and its head hash. */
export interface ILedgerSummary {
  path: string;
  /** The ledger's name relative to its notebook, as the binding records it. */
  ledger?: string;
  entries: number;
  head: string | null;
}

/** Answer of `GET ledger`. */
export interface ILedgerAnswer {
  ledger: ILedgerSummary | string;
  entries: ILedgerEntry[] | number;
  checks?: unknown;
  /** The verify report of the ledger and the saved notebook's binding. */
  chain?: {
    ok?: boolean;
    chain_ok?: boolean;
    binding_ok?: boolean | null;
    [key: string]: unknown;
  } | null;
  /** The binding saved in the notebook file, and the one the ledger implies now. */
  binding?: { recorded?: unknown; current?: unknown } | null;
  head?: string | null;
}

/** One compute device the server can run checks on. */
export interface IDevice {
  id: string;
  name?: string;
  available: boolean;
  reason?: string | null;
}

/** Answer of `GET status`: the version handshake. */
export interface IServerStatus {
  version: string;
  torch?: string | null;
  devices: IDevice[];
  default_device?: string;
  /** Why no worker answered, when none did. */
  error?: string | null;
  pool?: unknown;
}

/** Answer of `POST checks`. */
export interface IRunAnswer {
  record: ICheckRecord;
  ledger: ILedgerSummary;
}

/** The error body of every failed request. */
export interface IErrorBody {
  code: string;
  message: string;
  field: string | null;
}
