import { formatFault } from '../errors.js';
import { lintTemplates, type LintFinding } from '../lint/lint.js';
import { PodSecurityLevel } from '../lint/pod.js';
import { outputFormat, parseFlags, processIO, templatesDir, type IO } from './args.js';

const LEVELS = Object.values(PodSecurityLevel);

/**
 * `sidecar-injector lint [DIR] [--pod-security none|baseline|restricted] [--strict]`: every finding
 * as `file:line:column: error|warning: template "x": /path: message`. Errors are what the server
 * refuses to load; warnings come from sample pods. Exit 1 on any error (for pre-commit hooks and
 * CI), and on any warning with --strict; 0 otherwise.
 */
export async function lintCommand(args: readonly string[], io: IO = processIO): Promise<number> {
  const options = { 'pod-security': { type: 'string' }, strict: { type: 'boolean' }, output: { type: 'string', short: 'o' } } as const;
  const { values, positionals } = parseFlags('lint', args, options, true);
  const format = outputFormat('lint', values.output, ['text', 'json'] as const);
  const level = outputFormat('lint --pod-security', values['pod-security'] ?? PodSecurityLevel.None, LEVELS);
  const dir = positionals[0] ?? templatesDir(undefined);
  const report = await lintTemplates(dir, level);
  if (format === 'json') io.stdout(`${JSON.stringify(report, null, 2)}\n`);
  else io.stdout(textReport(report, dir, level));
  return report.errors > 0 || (values.strict === true && report.warnings > 0) ? 1 : 0;
}

function textReport(report: Awaited<ReturnType<typeof lintTemplates>>, dir: string, level: string): string {
  const line = (f: LintFinding): string => formatFault(f).replace(/^([^ ]*:) /, `$1 ${f.severity}: `);
  const findings = report.faults.map((f) => `${line(f)}\n`).join('');
  if (report.errors > 0) return `${findings}${report.errors} error(s), ${report.warnings} warning(s) in ${dir}\n`;
  const ok = `${dir}: ${report.templates.length} template(s) OK (${report.templates.join(', ')}; Pod Security ${level})`;
  return report.warnings === 0 ? `${ok}\n` : `${findings}${ok}, ${report.warnings} warning(s)\n`;
}
