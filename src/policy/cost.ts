import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { InjectorError } from '../errors.js';
import { Keys } from '../inject/keys.js';

/**
 * The kube-apiserver's CEL cost of compiled policies, measured by celcost (tools/celcost/, Go,
 * linked against the apiserver's own CEL libraries): per expression the compile error the
 * apiserver would refuse the policy with, cel-go's estimated cost over the Pod's schema, and on
 * each pod given the runtime cost the policy plugins charge against their limits.
 * test/policy/cost.test.ts holds that an expression over the limits is reported.
 */
export const CELCOST_CACHE = join(homedir(), '.cache', 'kubeadmit', 'celcost');

/** The binary (CELCOST, else the build script's output), or why there is none and how to build it. */
export function findCelcost(env: NodeJS.ProcessEnv = process.env): { readonly binary: string } | { readonly absent: string } {
  const named = env['CELCOST'];
  if (named !== undefined && named !== '')
    return existsSync(named) ? { binary: named } : { absent: `CELCOST=${named} does not exist; point it at the binary tools/celcost/build.sh prints` };
  if (existsSync(CELCOST_CACHE)) return { binary: CELCOST_CACHE };
  return { absent: `celcost is not built (CELCOST unset, no ${CELCOST_CACHE}); run tools/celcost/build.sh once (it needs kubeadmit's Go cache)` };
}

/** The apiserver's limits (k8s.io/apiserver/pkg/apis/cel/config.go). */
export interface CostLimits {
  /** One evaluation of one expression. */
  readonly perCall: number;
  /** One mutation of a MutatingAdmissionPolicy, or all validations of a ValidatingAdmissionPolicy. */
  readonly perPolicy: number;
  /** A policy's matchConditions together. */
  readonly matchConditions: number;
}

/** cel-go's estimate; `max` null (with `unbounded`) where cel-go finds no bound. */
export interface CostRange {
  readonly min: number | null;
  readonly max: number | null;
  readonly unbounded?: boolean;
}

export interface ExpressionCost {
  /** Where the expression is, e.g. `spec.mutations[0].jsonPatch.expression`. */
  readonly field: string;
  /** The compile error the apiserver refuses the policy with. */
  readonly error?: string;
  readonly typeError?: string;
  readonly estimated?: CostRange;
  /** Per pod: the cost of evaluating this expression alone, the variables it reads included. */
  readonly runtime?: readonly { readonly index: number; readonly pod: string; readonly cost: number; readonly error?: string }[];
}

export interface PolicyCost {
  readonly kind: 'MutatingAdmissionPolicy' | 'ValidatingAdmissionPolicy';
  readonly name: string;
  readonly estimated: CostRange;
  readonly expressions: readonly ExpressionCost[];
  /** Per pod (index: its place in the pods given): whether the matchConditions let it through, and what the plugin charged in all. */
  readonly pods: readonly {
    readonly index: number;
    readonly pod: string;
    readonly matched: boolean;
    readonly cost: number;
    /** The evaluation's time on the machine that ran celcost (compiling excluded). */
    readonly ms: number;
    readonly error?: string;
    /** The messages of the validations that are false (a validating policy's denial). */
    readonly denials?: readonly string[];
  }[];
  /** What the apiserver would refuse: the policy when written, or a given pod's admission. */
  readonly problems: readonly string[];
  /** Estimates over a limit, or without a bound. */
  readonly warnings: readonly string[];
}

export interface CostReport {
  readonly limits: CostLimits;
  readonly policies: readonly PolicyCost[];
}

/** Where the pods' CREATE happens; with `oldPod`, each pod is an UPDATE of it. */
export interface CostScene {
  readonly namespace: string;
  readonly namespaceLabels?: Readonly<Record<string, string>>;
  readonly oldPod?: object;
}

/** Runs celcost on the policies (other objects are skipped) and pods; its exit status 1 (problems found) is a report too. */
export async function measureCost(binary: string, objects: readonly object[], pods: readonly object[], scene: CostScene): Promise<CostReport> {
  const dir = await mkdtemp(join(tmpdir(), 'celcost-'));
  try {
    await writeFile(join(dir, 'policies.json'), JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects }));
    const args = ['--policies', join(dir, 'policies.json'), '--namespace', scene.namespace];
    for (const [k, v] of Object.entries(scene.namespaceLabels ?? {})) args.push('--namespace-label', `${k}=${v}`);
    if (scene.oldPod !== undefined) {
      await writeFile(join(dir, 'old-pod.json'), JSON.stringify(scene.oldPod));
      args.push('--old-pod', join(dir, 'old-pod.json'));
    }
    for (const [i, pod] of pods.entries()) {
      await writeFile(join(dir, `pod-${i}.json`), JSON.stringify(pod));
      args.push('--pod', join(dir, `pod-${i}.json`));
    }
    const stdout = await new Promise<string>((resolve, reject) =>
      execFile(binary, args, { maxBuffer: 1 << 28 }, (err, out, errText) =>
        err !== null && err.code !== 1 ? reject(new InjectorError('CELCOST_FAILED', [errText.trim() || err.message], { cause: err })) : resolve(out),
      ),
    );
    return JSON.parse(stdout) as CostReport;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * A pod that opts in and selects `template` by annotation: the pod `policies` and `lint --policies`
 * evaluate each template's policy on (a small one; the figures for the typical and a large pod are
 * in BENCHMARKS.md).
 */
export function samplePod(template: string): object {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { generateName: `sample-${template}-`, labels: { app: 'sample', [Keys.inject]: 'true' }, annotations: { [Keys.templates]: template } },
    spec: { containers: [{ name: 'app', image: 'registry.example/app:1.0', ports: [{ containerPort: 8080 }] }] },
  };
}

/** One line per problem: `MutatingAdmissionPolicy sidecar-injector-x: spec.mutations[0]...: why`. */
export function problemLines(report: CostReport): string[] {
  return report.policies.flatMap((p) => p.problems.map((problem) => `${p.kind} ${p.name}: ${problem}`));
}

/** The largest runtime cost of one expression on the pods (or on the pod of that index), with the field: the figure to set beside perCall. */
export function worstExpression(p: PolicyCost, index?: number): { readonly field: string; readonly cost: number } | undefined {
  let worst: { field: string; cost: number } | undefined;
  for (const e of p.expressions)
    for (const r of e.runtime ?? [])
      if ((index === undefined || r.index === index) && (worst === undefined || r.cost > worst.cost)) worst = { field: e.field, cost: r.cost };
  return worst;
}
