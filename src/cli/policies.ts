import { compilePolicies } from '../policy/compile.js';
import { stringifyKubectl } from '../yaml/kubectl.js';
import { loadTemplates, processIO, type IO } from './args.js';

/** `policies`' arguments and flags, as the command line gave them. */
export interface PoliciesOptions {
  /** The templates directory; absent: the one `serve` would use. */
  readonly dir?: string;
  readonly output: 'yaml' | 'json';
  /** The injector's namespace, never injected. */
  readonly namespace: string;
}

/**
 * `sidecar-injector policies [DIR]`: the MutatingAdmissionPolicies (and bindings) of the templates
 * that compile, and the ValidatingAdmissionPolicy of the set, for `kubectl apply -f -`. A template
 * that does not compile is named on standard error with the reason, one line each, and exit status 1
 * tells a script that the policies alone do not inject the whole set.
 */
export async function policiesCommand(values: PoliciesOptions, io: IO = processIO): Promise<number> {
  const set = await loadTemplates(values.dir);
  const { objects, verdicts } = compilePolicies(set, { namespace: values.namespace });
  io.stdout(values.output === 'json' ? `${JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects }, null, 2)}\n` : stringifyKubectl(objects));
  const skipped = verdicts.filter((v) => !v.compiles);
  for (const v of skipped) io.stderr(`template "${v.template}": not compiled to a policy: ${v.detail}; the webhook injects it\n`);
  return skipped.length > 0 ? 1 : 0;
}
