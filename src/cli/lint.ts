import { formatFault } from '../errors.js';
import { lintTemplates } from '../lint/lint.js';
import { PodSecurityLevel } from '../lint/pod.js';
import { outputFormat, parseFlags, processIO, templatesDir, type IO } from './args.js';

const LEVELS = Object.values(PodSecurityLevel);

/**
 * `sidecar-injector lint [DIR]`: every template fault as `file:line:column: template "x": /path:
 * message`, exit status 1 when there is any (for pre-commit hooks and CI), 0 otherwise.
 */
export async function lintCommand(args: readonly string[], io: IO = processIO): Promise<number> {
  const { values, positionals } = parseFlags('lint', args, { 'pod-security': { type: 'string' }, output: { type: 'string', short: 'o' } }, true);
  const format = outputFormat('lint', values.output, ['text', 'json'] as const);
  const level = outputFormat('lint --pod-security', values['pod-security'] ?? 'restricted', LEVELS);
  const dir = positionals[0] ?? templatesDir(undefined);
  const report = await lintTemplates(dir, level);
  if (format === 'json') io.stdout(`${JSON.stringify(report, null, 2)}\n`);
  else if (report.faults.length === 0) io.stdout(`${dir}: ${report.templates.length} template(s) OK (${report.templates.join(', ')}; Pod Security ${level})\n`);
  else io.stdout(`${report.faults.map(formatFault).join('\n')}\n${report.faults.length} problem(s) in ${dir}\n`);
  return report.faults.length === 0 ? 0 : 1;
}
