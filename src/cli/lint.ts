import { formatFault, InjectorError } from '../errors.js';
import { lintTemplates, type LintFinding } from '../lint/lint.js';
import { PodSecurityLevel } from '../lint/pod.js';
import { processIO, templatesDir, type IO } from './args.js';

/** `lint`'s arguments and flags, as the command line gave them. */
export interface LintOptions {
  /** The templates directory; absent: the one `serve` would use. */
  readonly dir?: string;
  readonly output: 'text' | 'json';
  /**
   * The Pod Security Standard injected sample pods must meet. `privileged`, the Standards' own name
   * for the level without restrictions, and its older alias `none` check only that they are valid pods.
   */
  readonly podSecurity: PodSecurityLevel | typeof PRIVILEGED;
  /** Exit 1 on warnings too. */
  readonly strict: boolean;
}

/** The Pod Security Standards' name for their level without restrictions (lint's `none`). */
export const PRIVILEGED = 'privileged';

/**
 * `sidecar-injector lint [DIR] [--pod-security privileged|baseline|restricted] [--strict]`: every finding
 * as `file:line:column: error|warning: template "x": /path: message`. Errors are what the server
 * refuses to load; warnings come from sample pods. Exit 1 on any error (for pre-commit hooks and
 * CI), and on any warning with --strict; 0 otherwise.
 */
export async function lintCommand(values: LintOptions, io: IO = processIO): Promise<number> {
  const format = values.output;
  const level = values.podSecurity === PRIVILEGED ? PodSecurityLevel.None : values.podSecurity;
  const dir = values.dir ?? templatesDir(undefined);
  const report = await lintTemplates(dir, level).catch((err: unknown) => {
    throw missingDir(err, dir);
  });
  if (format === 'json') io.stdout(`${JSON.stringify(report, null, 2)}\n`);
  else io.stdout(textReport(report, dir, level === PodSecurityLevel.None ? PRIVILEGED : level));
  return report.errors > 0 || (values.strict && report.warnings > 0) ? 1 : 0;
}

/** A DIR that is not there, or not a directory, as one line that says what to fix instead of scandir's error; any other error unchanged. */
function missingDir(err: unknown, dir: string): unknown {
  const code = ((err as Error | null)?.cause as { code?: unknown } | undefined)?.code;
  if (code === 'ENOENT') return new InjectorError('INPUT_INVALID', [dir, 'no such directory; give lint the directory of SidecarTemplate YAML files (lint DIR)'], { cause: err });
  if (code === 'ENOTDIR') return new InjectorError('INPUT_INVALID', [dir, 'not a directory; give lint the directory of SidecarTemplate YAML files (lint DIR)'], { cause: err });
  return err;
}

function textReport(report: Awaited<ReturnType<typeof lintTemplates>>, dir: string, level: string): string {
  const line = (f: LintFinding): string => formatFault(f).replace(/^([^ ]*:) /, `$1 ${f.severity}: `);
  const findings = report.faults.map((f) => `${line(f)}\n`).join('');
  if (report.errors > 0) return `${findings}${report.errors} error(s), ${report.warnings} warning(s) in ${dir}\n`;
  const ok = `${dir}: ${report.templates.length} template(s) OK (${report.templates.join(', ')}; Pod Security ${level})`;
  return report.warnings === 0 ? `${ok}\n` : `${findings}${ok}, ${report.warnings} warning(s)\n`;
}
