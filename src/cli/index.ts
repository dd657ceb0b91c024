#!/usr/bin/env node
import { optionsHelp } from '../config/config.js';
import { InjectorError, TemplateSetError } from '../errors.js';
import { explainCommand } from './explain.js';
import { injectCommand } from './inject.js';
import { lintCommand } from './lint.js';
import { serveCommand } from './serve.js';

/** A subcommand: takes its arguments, resolves to the process exit code. */
export type Command = (args: readonly string[]) => Promise<number>;

/** The subcommands, in the order `--help` lists them. */
const Commands: Readonly<Record<string, { readonly run: Command; readonly summary: string }>> = {
  serve: { run: serveCommand, summary: 'run the admission webhook server' },
  inject: { run: injectCommand, summary: 'print manifests (-f FILE|-) with the sidecars injected, or --patch' },
  lint: { run: lintCommand, summary: 'check every template in DIR (file:line:column faults, sample pods, conflicts); exit 1 on any' },
  explain: { run: explainCommand, summary: 'say for each pod (-f FILE|-) whether it would be injected, with what, and why' },
};

function usage(): string {
  const list = Object.entries(Commands).map(([name, c]) => `  ${name.padEnd(9)} ${c.summary}`).join('\n');
  return `Usage: sidecar-injector <command> [flags]\n\nCommands:\n${list}\n\nFlags for serve:\n${optionsHelp()}\n`;
}

/** Runs one CLI invocation; resolves to the process exit code. */
export async function run(argv: readonly string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === 'help' || name === '--help' || name === '-h' || rest.includes('--help')) {
    process.stdout.write(usage());
    return name === undefined ? 2 : 0;
  }
  const command = Commands[name];
  if (command === undefined) {
    process.stderr.write(`sidecar-injector: unknown command "${name}"\n\n${usage()}`);
    return 2;
  }
  return command.run(rest);
}

run(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    const known = err instanceof TemplateSetError || err instanceof InjectorError;
    process.stderr.write(`sidecar-injector: ${known ? err.message : ((err as Error).stack ?? String(err))}\n`);
    process.exitCode = 1;
  },
);
