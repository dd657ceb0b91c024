import { InjectorError } from '../errors.js';
import { compileNamespacePolicies, compilePolicies, PolicyApi, type PolicyVerdict } from '../policy/compile.js';
import { findCelcost, measureCost, problemLines, samplePod } from '../policy/cost.js';
import type { TemplateSet } from '../templates/load.js';
import { stringifyKubectl } from '../yaml/kubectl.js';
import { clusterTemplates, loadTemplates, processIO, type IO } from './args.js';

/** `--verify`: check the policies with the apiserver's CEL (celcost) before writing them: when it is built, always, or never. */
export const Verify = { Auto: 'auto', Always: 'always', Never: 'never' } as const;
export type Verify = (typeof Verify)[keyof typeof Verify];

/** `policies`' arguments and flags, as the command line gave them. */
export interface PoliciesOptions {
  /** The templates directory; absent: the one `serve` would use. */
  readonly dir?: string;
  readonly output: 'yaml' | 'json';
  /** `cluster`: the cluster's SidecarTemplate objects instead of a directory. */
  readonly templatesSource?: string;
  /** The injector's namespace: never injected, and with the cluster the home of the cluster-wide templates. */
  readonly templatesNamespace: string;
  readonly kubeconfig?: string;
  /** With the cluster: only the policies of this namespace's own view (read with a team's rights). */
  readonly namespace?: string;
  /** The revision (`sidecar-injector.io/rev`) the policies belong to. */
  readonly revision?: string;
  /** `v1` or `v1beta1`: the MutatingAdmissionPolicies' API version. */
  readonly apiVersion?: 'v1' | 'v1beta1';
  /** `--verify`: check the policies with the apiserver's CEL before writing. */
  readonly verify?: Verify;
}

/**
 * `sidecar-injector policies [DIR]`: the MutatingAdmissionPolicies (and bindings) of the templates
 * that compile, and the ValidatingAdmissionPolicy of the set, for `kubectl apply -f -`. With
 * `--templates-source cluster`, those of every namespace's view (compilePolicies); with `-n`, of
 * that namespace's own view alone. A template that does not compile is named on standard error with
 * the reason, one line each, and exit status 1 tells a script that the policies alone do not
 * inject the whole set. Before writing, every policy goes through the apiserver's CEL (celcost):
 * what the apiserver would refuse (an expression that does not compile, or over its cost limits on
 * a sample pod) is named on standard error, one line each, nothing is written, and the exit status
 * is 1 (test/policy/cost.test.ts).
 */
export async function policiesCommand(values: PoliciesOptions, io: IO = processIO): Promise<number> {
  const set = await templateSet(values, io);
  const options = {
    namespace: values.templatesNamespace,
    ...(values.revision !== undefined && { revision: values.revision }),
    ...(values.apiVersion !== undefined && { apiVersion: PolicyApi[values.apiVersion] }),
  };
  const own = values.namespace === undefined ? undefined : set.namespaces?.get(values.namespace);
  if (values.namespace !== undefined && own === undefined) {
    io.stderr(
      `namespace ${values.namespace} has no SidecarTemplates of its own: its pods get the cluster-wide policies (policies --templates-source cluster, without -n)\n`,
    );
    return 0;
  }
  // With -n, the namespace's view alone: the cluster-wide set's policies bind where this command cannot see.
  const { objects, verdicts } = own === undefined ? compilePolicies(set, options) : compileNamespacePolicies(own, values.namespace!, options);
  const refused = await verify(objects, verdicts, values.verify ?? Verify.Auto, io);
  for (const line of refused) io.stderr(`${line}\n`);
  if (refused.length > 0) return 1;
  io.stdout(values.output === 'json' ? `${JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects }, null, 2)}\n` : stringifyKubectl(objects));
  const skipped = verdicts.filter((v) => !v.compiles);
  for (const v of skipped) io.stderr(`${templateOf(v)}: not compiled to a policy: ${v.detail}; the webhook injects it\n`);
  return skipped.length > 0 ? 1 : 0;
}

async function templateSet(values: PoliciesOptions, io: IO): Promise<TemplateSet> {
  if (values.templatesSource !== 'cluster') {
    if (values.namespace !== undefined)
      throw new InjectorError('USAGE', [
        "policies: -n chooses a namespace of the cluster's SidecarTemplates; add --templates-source cluster (the injector's namespace is --templates-namespace)",
      ]);
    return loadTemplates(values.dir);
  }
  if (values.dir !== undefined) throw new InjectorError('USAGE', [`policies: give DIR (${values.dir}) or --templates-source cluster, not both`]);
  return clusterTemplates(values, (line) => io.stderr(`${line}\n`), undefined, values.namespace === undefined ? undefined : [values.namespace]);
}

function templateOf(v: PolicyVerdict): string {
  return v.namespace === undefined ? `template "${v.template}"` : `template "${v.template}" of namespace ${v.namespace}`;
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
