/**
 * Defaults for new checks, read from the settings schema
 * (schema/plugin.json, shown in the Settings Editor).
 */

/** The defaults the declare form starts from. */
export interface IDefaults {
  dtype: string;
  device: string;
  rtol: number | null;
  atol: number | null;
  scheme: string;
  step: number | 'adaptive' | null;
}

/** What the form uses before settings load, and where a setting is absent. */
export const FALLBACK_DEFAULTS: IDefaults = {
  dtype: 'float64',
  device: 'cpu',
  rtol: null,
  atol: null,
  scheme: 'central',
  step: null
};

function numberOrNull(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

/** Defaults from the composite settings object, each falling back on its own. */
export function defaultsFrom(
  composite: { [key: string]: unknown } | null | undefined
): IDefaults {
  const settings = composite ?? {};
  const step = settings.step;
  return {
    dtype:
      typeof settings.dtype === 'string'
        ? settings.dtype
        : FALLBACK_DEFAULTS.dtype,
    device:
      typeof settings.device === 'string'
        ? settings.device
        : FALLBACK_DEFAULTS.device,
    rtol: numberOrNull(settings.rtol),
    atol: numberOrNull(settings.atol),
    scheme:
      typeof settings.scheme === 'string'
        ? settings.scheme
        : FALLBACK_DEFAULTS.scheme,
    step: step === 'adaptive' ? 'adaptive' : numberOrNull(step)
  };
}
