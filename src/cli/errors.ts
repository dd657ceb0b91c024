import { InjectorError, TemplateSetError } from '../errors.js';

/**
 * A template directory that is not there, as the one line that says which flag to fix, instead of
 * readdir's ENOENT; any other error unchanged.
 */
export function templatesDirError(err: unknown, dir: string): unknown {
  const e = err as Partial<SystemError> | null;
  if (e?.code === 'ENOENT' && e.path === dir) return new InjectorError('TEMPLATES_DIR_MISSING', [JSON.stringify(dir)], { cause: err });
  return err;
}

/** Set to print the stack of an unexpected error (a bug), which users never need to see otherwise. */
const DEBUG_ENV = 'SIDECAR_INJECTOR_DEBUG';

/**
 * What the CLI prints for an error that ended a command: the product's own errors as they are
 * worded in src/errors.ts, an operating-system error as one line that says what to do, anything
 * else (a bug) as one line asking for a report, with the stack only when DEBUG_ENV is set.
 */
export function describeError(err: unknown, env: NodeJS.ProcessEnv = process.env): string {
  if (err instanceof InjectorError || err instanceof TemplateSetError) return err.message;
  const system = systemError(err);
  if (system !== undefined) return system;
  const message = err instanceof Error ? err.message : String(err);
  if (env[DEBUG_ENV] !== undefined && env[DEBUG_ENV] !== '' && err instanceof Error) return `internal error: ${err.stack ?? message}`;
  return `internal error: ${message}; please report it (set ${DEBUG_ENV}=1 for the stack)`;
}

interface SystemError {
  readonly code: string;
  readonly syscall?: string;
  readonly address?: string;
  readonly port?: number;
  readonly path?: string;
}

function systemError(err: unknown): string | undefined {
  const e = err as Partial<SystemError> | null;
  if (typeof e?.code !== 'string') return undefined;
  const where = e.port !== undefined ? `${e.address ?? ''}:${e.port}` : '';
  switch (e.code) {
    case 'EADDRINUSE':
      return `cannot listen on ${where}: the port is already in use; stop the process that holds it or choose another with --port or --health-port`;
    case 'EADDRNOTAVAIL':
      return `cannot listen on ${where}: no such address on this machine; choose another with --host`;
    case 'EACCES':
      if (e.syscall === 'listen')
        return `cannot listen on ${where}: permission denied; ports below 1024 need privileges, choose a higher --port or --health-port`;
      return e.path === undefined ? undefined : `${e.path}: permission denied; check the file's permissions`;
    case 'ENOENT':
      return e.path === undefined ? undefined : `${e.path}: no such file or directory`;
    default:
      return undefined;
  }
}
