/**
 * A verify report (`POST verify`, core/ledger/verify.py) as lines a person reads:
 * the verdict on the chain and the binding, then each error, warning and
 * flag. Pure, so it is tested without a browser.
 */
import { trans } from './i18n';
import { wordsFor } from './words';

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
    const line =
      typeof error.line === 'number' ? trans.__('line %1: ', error.line) : '';
    return `${line}${String(error.reason ?? error.message ?? JSON.stringify(error))}`;
  }
  return String(error);
}

function flagText(flag: unknown): string {
  if (isReport(flag)) {
    const seqs = Array.isArray(flag.seqs)
      ? trans.__(' (entries %1)', flag.seqs.join(', '))
      : '';
    return `${String(flag.check_id ?? '')}: ${wordsFor('verifyFlag', String(flag.flag ?? ''))}${seqs}`;
  }
  return String(flag);
}

function verdict(name: 'chain' | 'binding', value: unknown): string | null {
  if (value === true) {
    return name === 'chain' ? trans.__('chain OK') : trans.__('binding OK');
  }
  if (value === false) {
    return name === 'chain'
      ? trans.__('chain broken')
      : trans.__('binding broken');
  }
  return null;
}

function one(report: Report, lines: IVerifyLine[]): void {
  const parts = [
    verdict('chain', report.chain_ok),
    verdict('binding', report.binding_ok)
  ].filter((p): p is string => p !== null);
  if (typeof report.entries === 'number') {
    parts.push(trans._n('%1 entry', '%1 entries', report.entries));
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
  const witness = isReport(report.witness) ? report.witness : null;
  for (const flag of Array.isArray(witness?.flags) ? witness.flags : []) {
    lines.push({ level: 'flag', text: witnessFlagText(flag) });
  }
}

/** A witness flag (witness/verify.py): its words and how many it counts. */
function witnessFlagText(flag: unknown): string {
  if (!isReport(flag)) {
    return String(flag);
  }
  const words = wordsFor('verifyFlag', String(flag.flag ?? ''));
  return typeof flag.count === 'number'
    ? trans.__('witness: %1 (%2)', words, flag.count)
    : trans.__('witness: %1', words);
}

/** Summarise a single report or a `{"ok", "reports"}` answer. */
export function summariseVerify(report: Report): IVerifySummary {
  const lines: IVerifyLine[] = [];
  const reports = Array.isArray(report.reports)
    ? report.reports.filter(isReport)
    : [report];
  for (const item of reports) {
    one(item, lines);
  }
  return { ok: report.ok === true, lines };
}
