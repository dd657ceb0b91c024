#!/usr/bin/env node
import { loadConfig, optionsHelp } from '../config/config.js';
import { InjectorError, TemplateSetError } from '../errors.js';
import { serve } from '../main.js';

const USAGE = `Usage: sidecar-injector <command> [flags]

Commands:
  serve     run the admission webhook server

Flags for serve:
${optionsHelp()}
`;

/** Runs one CLI command; resolves to the process exit code. */
export async function run(argv: readonly string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === 'help' || command === '--help' || command === '-h') {
    process.stdout.write(USAGE);
    return command === undefined ? 2 : 0;
  }
  if (command === 'serve') {
    if (rest.includes('--help') || rest.includes('-h')) {
      process.stdout.write(USAGE);
      return 0;
    }
    const config = loadConfig(rest);
    const running = await serve(config);
    const stop = (signal: string): void => {
      running.logger.info({ signal }, 'shutting down');
      void running.close().then(() => process.exit(0));
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
    return -1; // keep running
  }
  process.stderr.write(`unknown command "${command}"\n\n${USAGE}`);
  return 2;
}

run(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exitCode = code;
  },
  (err: unknown) => {
    const message = err instanceof TemplateSetError || err instanceof InjectorError ? err.message : (err as Error).stack ?? String(err);
    process.stderr.write(`sidecar-injector: ${message}\n`);
    process.exitCode = 1;
  },
);
