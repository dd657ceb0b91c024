import { buildInfo, type BuildInfo } from '../build/info.js';
import { processIO, type IO } from './args.js';

/** `version`'s flags, as the command line gave them. */
export interface VersionOptions {
  readonly output: 'text' | 'json';
}

/** `sidecar-injector version`: the version, the git commit it was built from and the Node.js version. */
export async function versionCommand(values: VersionOptions, io: IO = processIO, info: BuildInfo = buildInfo()): Promise<number> {
  if (values.output === 'json') io.stdout(`${JSON.stringify(info, null, 2)}\n`);
  else io.stdout(`${versionLine(info)}\n`);
  return 0;
}

/** The line `version` and `--version` print. */
export function versionLine(info: BuildInfo = buildInfo()): string {
  return `sidecar-injector ${info.version} (commit ${info.commit ?? 'unknown'}, node ${info.node})`;
}
