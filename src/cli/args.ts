import { readFile } from 'node:fs/promises';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { Options } from '../config/config.js';
import { InjectorError } from '../errors.js';
import { loadTemplateSet, type TemplateSet } from '../templates/load.js';

/** Flags shared by the authoring commands (inject, explain). */
export const InputFlags = {
  filename: { type: 'string', short: 'f' },
  'templates-dir': { type: 'string' },
  namespace: { type: 'string', short: 'n' },
  output: { type: 'string', short: 'o' },
} as const satisfies ParseArgsConfig['options'];

/** Parses a command's flags; a mistake is a USAGE error naming the command. */
export function parseFlags<O extends NonNullable<ParseArgsConfig['options']>>(command: string, args: readonly string[], options: O, positionals = false): ReturnType<typeof parseArgs<{ options: O; allowPositionals: boolean; args: string[] }>> {
  try {
    return parseArgs({ args: [...args], options, strict: true, allowPositionals: positionals });
  } catch (err) {
    throw new InjectorError('USAGE', [`${command}: ${(err as Error).message}`], { cause: err });
  }
}

/** The output format flag: one of `allowed`, the first being the default. */
export function outputFormat<F extends string>(command: string, value: string | undefined, allowed: readonly F[]): F {
  if (value === undefined) return allowed[0]!;
  if ((allowed as readonly string[]).includes(value)) return value as F;
  throw new InjectorError('USAGE', [`${command}: -o must be ${allowed.join(' or ')}, got "${value}"`]);
}

/** Reads `-f FILE`, or standard input for `-f -`. */
export async function readInput(command: string, file: string | undefined, stdin: NodeJS.ReadableStream = process.stdin): Promise<string> {
  if (file === undefined) throw new InjectorError('USAGE', [`${command}: -f FILE is required (use -f - for standard input)`]);
  if (file !== '-') {
    try {
      return await readFile(file, 'utf8');
    } catch (err) {
      throw new InjectorError('INPUT_INVALID', [file, (err as Error).message], { cause: err });
    }
  }
  const chunks: Buffer[] = [];
  for await (const chunk of stdin) chunks.push(Buffer.from(chunk as Buffer));
  return Buffer.concat(chunks).toString('utf8');
}

/** The templates directory as `serve` resolves it: the flag, else the environment variable, else the default. */
export function templatesDir(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  return flag || env[Options.templatesDir.env] || Options.templatesDir.schema.default;
}

/** Loads the template set the server would load from that directory. */
export function loadTemplates(flag: string | undefined): Promise<TemplateSet> {
  return loadTemplateSet(templatesDir(flag));
}

/** Where a command writes; tests pass their own. */
export interface IO {
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
  readonly stdin: NodeJS.ReadableStream;
}

/** The process's own streams. */
export const processIO: IO = {
  stdout: (text) => void process.stdout.write(text),
  stderr: (text) => void process.stderr.write(text),
  stdin: process.stdin,
};
