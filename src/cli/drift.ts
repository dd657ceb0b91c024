import { processIO, type IO } from './args.js';

/** `drift`'s flags, as the command line gave them. */
export interface DriftOptions {
  readonly templatesDir?: string;
  /** `NAMESPACE/NAME` of the installed templates ConfigMap; used when templatesDir is absent. */
  readonly templatesConfigmap: string;
  /** Absent: the kubeconfig context's namespace. */
  readonly namespace?: string;
  readonly allNamespaces: boolean;
  /** List every injected pod, not only the stale ones. */
  readonly all: boolean;
  readonly output: 'text' | 'json';
  readonly kubeconfig?: string;
}

/** `sidecar-injector drift`: the running pods whose sidecars are out of date with the templates. */
export async function driftCommand(_values: DriftOptions, io: IO = processIO): Promise<number> {
  io.stderr('sidecar-injector drift: not implemented yet\n');
  return 1;
}
