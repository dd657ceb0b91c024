import { formatFault } from '../errors.js';
import { lintTemplates } from '../lint/lint.js';
import { PodSecurityLevel } from '../lint/pod.js';
import { processIO, templatesDir, type IO } from './args.js';

/** `lint`'s arguments and flags, as the command line gave them. */
export interface LintOptions {
  /** The templates directory; absent: the one `serve` would use. */
  readonly dir?: string;
  readonly output: 'text' | 'json';
  /** The Pod Security Standard injected sample pods must meet; `none` checks only that they are valid pods. */
  readonly podSecurity: 'none' | 'baseline' | 'restricted';
  /** Treat warnings as faults. */
  readonly strict: boolean;
}

/**
 * `sidecar-injector lint [DIR]`: every template fault as `file:line:column: template "x": /path:
 * message`, exit status 1 when there is any (for pre-commit hooks and CI), 0 otherwise.
 */
export async function lintCommand(values: LintOptions, io: IO = processIO): Promise<number> {
  const format = values.output;
  // Privileged is the Pod Security level that restricts nothing.
  const level = values.podSecurity === 'none' ? PodSecurityLevel.Privileged : values.podSecurity;
  const dir = values.dir ?? templatesDir(undefined);
  const report = await lintTemplates(dir, level);
  if (format === 'json') io.stdout(`${JSON.stringify(report, null, 2)}\n`);
  else if (report.faults.length === 0) io.stdout(`${dir}: ${report.templates.length} template(s) OK (${report.templates.join(', ')}; Pod Security ${values.podSecurity})\n`);
  else io.stdout(`${report.faults.map(formatFault).join('\n')}\n${report.faults.length} problem(s) in ${dir}\n`);
  return report.faults.length === 0 ? 0 : 1;
}
