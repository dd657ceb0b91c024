import { formatFault } from '../errors.js';
import { lintTemplates, type LintFinding } from '../lint/lint.js';
import type { PodSecurityLevel } from '../lint/pod.js';
import { processIO, templatesDir, type IO } from './args.js';

/** `lint`'s arguments and flags, as the command line gave them. */
export interface LintOptions {
  /** The templates directory; absent: the one `serve` would use. */
  readonly dir?: string;
  readonly output: 'text' | 'json';
  /** The Pod Security Standard injected sample pods must meet; `none` checks only that they are valid pods. */
  readonly podSecurity: PodSecurityLevel;
  /** Exit 1 on warnings too. */
  readonly strict: boolean;
}

/**
 * `sidecar-injector lint [DIR] [--pod-security none|baseline|restricted] [--strict]`: every finding
 * as `file:line:column: error|warning: template "x": /path: message`. Errors are what the server
 * refuses to load; warnings come from sample pods. Exit 1 on any error (for pre-commit hooks and
 * CI), and on any warning with --strict; 0 otherwise.
 */
export async function lintCommand(values: LintOptions, io: IO = processIO): Promise<number> {
  const format = values.output;
  const level = values.podSecurity;
  const dir = values.dir ?? templatesDir(undefined);
  const report = await lintTemplates(dir, level);
  if (format === 'json') io.stdout(`${JSON.stringify(report, null, 2)}\n`);
  else io.stdout(textReport(report, dir, level));
  return report.errors > 0 || (values.strict && report.warnings > 0) ? 1 : 0;
}

function textReport(report: Awaited<ReturnType<typeof lintTemplates>>, dir: string, level: string): string {
  const line = (f: LintFinding): string => formatFault(f).replace(/^([^ ]*:) /, `$1 ${f.severity}: `);
  const findings = report.faults.map((f) => `${line(f)}\n`).join('');
  if (report.errors > 0) return `${findings}${report.errors} error(s), ${report.warnings} warning(s) in ${dir}\n`;
  const ok = `${dir}: ${report.templates.length} template(s) OK (${report.templates.join(', ')}; Pod Security ${level})`;
  return report.warnings === 0 ? `${ok}\n` : `${findings}${ok}, ${report.warnings} warning(s)\n`;
}
