import { InjectorError } from '../errors.js';
import { compilePolicies, type PolicyVerdict } from '../policy/compile.js';
import { findCelcost, measureCost, problemLines, samplePod } from '../policy/cost.js';
import { stringifyKubectl } from '../yaml/kubectl.js';
import { loadTemplates, processIO, type IO } from './args.js';

/** `--verify`: check the policies with the apiserver's CEL (celcost) before writing them: when it is built, always, or never. */
export const Verify = { Auto: 'auto', Always: 'always', Never: 'never' } as const;
export type Verify = (typeof Verify)[keyof typeof Verify];

/** `policies`' arguments and flags, as the command line gave them. */
export interface PoliciesOptions {
  /** The templates directory; absent: the one `serve` would use. */
  readonly dir?: string;
  readonly output: 'yaml' | 'json';
  /** The injector's namespace, never injected. */
  readonly namespace: string;
  readonly verify?: Verify;
}

/**
 * `sidecar-injector policies [DIR]`: the MutatingAdmissionPolicies (and bindings) of the templates
 * that compile, and the ValidatingAdmissionPolicy of the set, for `kubectl apply -f -`. A template
 * that does not compile is named on standard error with the reason, one line each, and exit status 1
 * tells a script that the policies alone do not inject the whole set. Before writing, every policy
 * goes through the apiserver's CEL (celcost): what the apiserver would refuse (an expression that
 * does not compile, or over its cost limits on a sample pod) is named on standard error, one line
 * each, nothing is written, and the exit status is 1 (test/cli/policies.test.ts, "verify").
 */
export async function policiesCommand(values: PoliciesOptions, io: IO = processIO): Promise<number> {
  const set = await loadTemplates(values.dir);
  const { objects, verdicts } = compilePolicies(set, { namespace: values.namespace });
  const refused = await verify(objects, verdicts, values.verify ?? Verify.Auto, io);
  for (const line of refused) io.stderr(`${line}\n`);
  if (refused.length > 0) return 1;
  io.stdout(values.output === 'json' ? `${JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects }, null, 2)}\n` : stringifyKubectl(objects));
  const skipped = verdicts.filter((v) => !v.compiles);
  for (const v of skipped) io.stderr(`template "${v.template}": not compiled to a policy: ${v.detail}; the webhook injects it\n`);
  return skipped.length > 0 ? 1 : 0;
}

/**
 * What the apiserver's CEL refuses, one POLICY_REFUSED message each; with --verify auto and no
 * celcost, one line on standard error instead.
 */
export async function verify(objects: readonly object[], verdicts: readonly PolicyVerdict[], mode: Verify, io: IO): Promise<string[]> {
  if (mode === Verify.Never) return [];
  const found = findCelcost();
  if ('absent' in found) {
    if (mode === Verify.Always) throw new InjectorError('CELCOST_MISSING', [found.absent]);
    io.stderr(`policies: not checked with the apiserver's CEL: ${found.absent}\n`);
    return [];
  }
  const pods = verdicts.filter((v) => v.compiles).map((v) => samplePod(v.template));
  const problems = problemLines(await measureCost(found.binary, objects, pods, { namespace: 'default' }));
  return problems.map((line) => new InjectorError('POLICY_REFUSED', [line]).message);
}
