/**
 * A verify report (`POST verify`, core/verify.py) as lines a person reads:
 * the verdict on the chain and the binding, then each error, warning and
 * flag. Pure, so it is tested without a browser.
 */

/** One line of the summary. */
export interface IVerifyLine {
  level: 'error' | 'warning' | 'flag' | 'info';
  text: string;
}

/** The verdict and its lines. */
export interface IVerifySummary {
  ok: boolean;
  lines: IVerifyLine[];
}

type Report = { [key: string]: unknown };

function isReport(value: unknown): value is Report {
  return !!value && typeof value === 'object' && !Array.isArray(value);
}

function errorText(error: unknown): string {
  if (isReport(error)) {
    const line = typeof error.line === 'number' ? `line ${error.line}: ` : '';
    return `${line}${String(error.reason ?? error.message ?? JSON.stringify(error))}`;
  }
  return String(error);
}

function flagText(flag: unknown): string {
  if (isReport(flag)) {
    const seqs = Array.isArray(flag.seqs) ? ` (entries ${flag.seqs.join(', ')})` : '';
    return `${String(flag.check_id ?? '')}: ${String(flag.flag ?? '').replace(/_/g, ' ')}${seqs}`;
  }
  return String(flag);
}

function verdict(name: string, value: unknown): string | null {
  if (value === true) {
    return `${name} OK`;
  }
  if (value === false) {
    return `${name} broken`;
  }
  return null;
}

function one(report: Report, lines: IVerifyLine[]): void {
  const parts = [verdict('chain', report.chain_ok), verdict('binding', report.binding_ok)].filter(
    (p): p is string => p !== null
  );
  if (typeof report.entries === 'number') {
    parts.push(`${report.entries} entries`);
  }
  if (parts.length) {
    lines.push({ level: 'info', text: parts.join(' · ') });
  }
  for (const error of Array.isArray(report.errors) ? report.errors : []) {
    lines.push({ level: 'error', text: errorText(error) });
  }
  for (const warning of Array.isArray(report.warnings) ? report.warnings : []) {
    lines.push({ level: 'warning', text: errorText(warning) });
  }
  for (const flag of Array.isArray(report.flags) ? report.flags : []) {
    lines.push({ level: 'flag', text: flagText(flag) });
  }
}

/** Summarise a single report or a `{"ok", "reports"}` answer. */
export function summariseVerify(report: Report): IVerifySummary {
  const lines: IVerifyLine[] = [];
  const reports = Array.isArray(report.reports) ? report.reports.filter(isReport) : [report];
  for (const item of reports) {
    one(item, lines);
  }
  return { ok: report.ok === true, lines };
}
