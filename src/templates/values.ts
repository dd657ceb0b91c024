import { parseImage } from '../kube-values/image.js';
import { labelValueProblem } from '../kube-values/label.js';
import { parseQuantity } from '../kube-values/quantity.js';
import { escapeToken } from '../patch/pointer.js';
import { compileValue, keysRead, materialize, placeholdersOf, type RenderValues } from './placeholders.js';
import { Formats, FormatMessages } from './schema.js';

/**
 * The rule Kubernetes applies to a value where a template puts it: a template's string
 * may land in a label value, a container name, an image... and a placeholder may expand to text the
 * apiserver refuses there (`{{ pod.name }}` is a controller's generateName, `web-7d9f8b6c5-`, which
 * no label value may end with). The rules are those of pkg/apis/core/validation and apimachinery's
 * validation.go, as the template schema words them (schema.ts Formats), plus the runtime's image
 * grammar (kube-values/image.ts): a pod with an image it cannot parse never starts (InvalidImageName).
 *
 * Checked three times: at load, every static value, and every placeholder with the values every
 * cluster meets (a Deployment's pod); in lint, with the keys the placeholders read absent; at
 * admission, every rendered value that holds a placeholder (static ones passed at load).
 */

/** What a value is where it lands, and why Kubernetes refuses a given one there. */
export interface ValueRule {
  /** The field in words: `a label value`. */
  readonly what: string;
  /** Why Kubernetes refuses `value` here, or undefined when it takes it. */
  readonly problem: (value: string) => string | undefined;
}

const format = (what: string, name: keyof typeof Formats): ValueRule => ({ what, problem: (v) => (Formats[name].test(v) ? undefined : FormatMessages[name]) });

const Rules = {
  labelValue: { what: 'a label value', problem: labelValueProblem },
  containerName: format('a container name', 'dns1123-label'),
  volumeName: format('a volume name', 'dns1123-label'),
  portName: format('a port name', 'iana-svc-name'),
  envName: format('an env var name', 'env-var-name'),
  quantity: { what: 'a resource quantity', problem: (v: string) => (parseQuantity(v) === undefined || v.trim().startsWith('-') ? FormatMessages.quantity : undefined) },
  mountPath: { what: 'a mount path', problem: (v: string) => (v === '' ? 'must not be empty' : undefined) },
  image: {
    what: 'an image',
    problem: (v: string) => {
      // validateContainerCommon refuses surrounding spaces; the runtime refuses what it cannot parse.
      if (v !== v.trim()) return 'must not have leading or trailing whitespace';
      const ref = parseImage(v);
      return 'problem' in ref ? `is not an image reference the container runtime can pull (InvalidImageName): ${ref.problem}` : undefined;
    },
  },
} as const satisfies Record<string, ValueRule>;

const CONTAINER_LISTS = new Set(['containers', 'initContainers']);

/**
 * The rule for a path inside a template's spec (tokens after `/spec`), or undefined for a field
 * that takes any string (annotation values, args, env values...).
 */
export function ruleAt(tokens: readonly string[]): ValueRule | undefined {
  const [list, , field, , leaf] = tokens;
  if (tokens.length === 2 && list === 'labels') return Rules.labelValue;
  if (tokens.length === 3 && list === 'volumes' && field === 'name') return Rules.volumeName;
  if (tokens.length === 3 && list === 'env' && field === 'name') return Rules.envName;
  if (tokens.length === 3 && list === 'volumeMounts') return mountRule(field);
  if (!CONTAINER_LISTS.has(list ?? '')) return undefined;
  if (tokens.length === 3 && field === 'name') return Rules.containerName;
  if (tokens.length === 3 && field === 'image') return Rules.image;
  if (tokens.length === 5 && field === 'env' && leaf === 'name') return Rules.envName;
  if (tokens.length === 5 && field === 'ports' && leaf === 'name') return Rules.portName;
  if (tokens.length === 5 && field === 'volumeMounts') return mountRule(leaf);
  if (tokens.length === 5 && field === 'resources' && (tokens[3] === 'requests' || tokens[3] === 'limits')) return Rules.quantity;
  return undefined;
}

function mountRule(field: string | undefined): ValueRule | undefined {
  if (field === 'name') return Rules.volumeName;
  return field === 'mountPath' ? Rules.mountPath : undefined;
}

/** A string of a template at a field with a rule. */
export interface PlacedValue {
  /** JSON pointer in the template document: `/spec/labels/owner-pod`. */
  readonly path: string;
  /** The same path below `spec`, unescaped: where the value is in a RenderedTemplate. */
  readonly tokens: readonly string[];
  /** The value as the template writes it. */
  readonly text: string;
  readonly rule: ValueRule;
}

/** Every string of a template spec that lands in a field with a rule, in document order. */
export function placedValues(spec: unknown): PlacedValue[] {
  const out: PlacedValue[] = [];
  const walk = (value: unknown, tokens: string[]): void => {
    if (typeof value === 'string') {
      const rule = ruleAt(tokens);
      if (rule !== undefined) out.push({ path: `/spec/${tokens.map(escapeToken).join('/')}`, tokens, text: value, rule });
      return;
    }
    if (typeof value !== 'object' || value === null) return;
    for (const [key, child] of Object.entries(value)) walk(child, [...tokens, key]);
  };
  walk(spec, []);
  return out;
}

/** The placed values that hold a placeholder: what admission checks once they are rendered. */
export function renderedChecks(spec: unknown): PlacedValue[] {
  return placedValues(spec).filter((p) => placeholdersOf(p.text).length > 0);
}

/** A rendered value Kubernetes would refuse: where, what it rendered to, and why. */
export interface RenderedFault {
  readonly check: PlacedValue;
  readonly value: string;
  readonly problem: string;
}

/**
 * The first rendered value of `rendered` (a RenderedTemplate) that breaks its rule, or undefined.
 * A label for which `labelKept` holds is left out: another value wins (the pod's, or an earlier
 * template's), so the template's never reaches the pod.
 */
export function renderedFault(checks: readonly PlacedValue[], rendered: object, labelKept: (key: string) => boolean = () => false): RenderedFault | undefined {
  for (const check of checks) {
    const value = valueAt(rendered, check.tokens);
    if (typeof value !== 'string') continue;
    const problem = check.rule.problem(value);
    if (problem === undefined || (check.tokens[0] === 'labels' && labelKept(check.tokens[1] ?? ''))) continue;
    return { check, value, problem };
  }
  return undefined;
}

function valueAt(root: object, tokens: readonly string[]): unknown {
  let at: unknown = root;
  for (const token of tokens) {
    if (typeof at !== 'object' || at === null || !Object.hasOwn(at, token)) return undefined;
    at = (at as Record<string, unknown>)[token];
  }
  return at;
}

/** The words of a refusal: `template "x" renders /spec/labels/k as "v" (from "{{ pod.name }}"), which Kubernetes refuses as a label value: ...`. */
export function describeFault(template: string, f: RenderedFault): string {
  return `template "${template}" renders ${f.check.path} as ${shown(f.value)} (from ${shown(f.check.text)}), which Kubernetes refuses as ${f.check.rule.what}: ${f.problem}${podNameHint(f.check.text)}`;
}

/** A value in a message: quoted, and cut to a readable length (an annotation may hold 256 KiB). */
export function shown(value: string): string {
  return value.length <= 80 ? JSON.stringify(value) : `${JSON.stringify(value.slice(0, 80))}... (${value.length} characters)`;
}

function podNameHint(text: string): string {
  return placeholdersOf(text).includes('pod.name') ? `; {{ pod.name }} is the generateName (e.g. "${DeploymentPod.podName}") for a controller's pods, which the apiserver names only after admission` : '';
}

/**
 * A pod every cluster has: made by a Deployment (only a generateName until the apiserver names it
 * after admission), in namespace default, with the default service account.
 */
export const DeploymentPod = { namespace: 'default', podName: 'web-7d9f8b6c5-', serviceAccountName: 'default' } as const;

/** What a placeholder reads from the pod, in the sample a fault is found with. */
export const KeysRead = { Present: 'present', Absent: 'absent' } as const;
export type KeysRead = (typeof KeysRead)[keyof typeof KeysRead];

/** A static value Kubernetes refuses, or a placeholder that renders one for the sample pod. */
export interface ValueFault {
  readonly path: string;
  readonly message: string;
}

/**
 * The faults of a template spec's values for the sample pod, with the labels and annotations its
 * placeholders read set to a value that is valid anywhere (`present`) or missing (`absent`: the
 * placeholder's default, or nothing). Load reports `present` as errors: every pod of a Deployment
 * would be refused. Lint reports what only `absent` finds as warnings: the pods without the key.
 */
export function valueFaults(spec: unknown, keys: KeysRead): ValueFault[] {
  const out: ValueFault[] = [];
  for (const placed of placedValues(spec)) {
    const dynamic = placeholdersOf(placed.text).length > 0;
    if (!dynamic) {
      const problem = keys === KeysRead.Present ? placed.rule.problem(placed.text) : undefined;
      if (problem !== undefined) out.push({ path: placed.path, message: `${shown(placed.text)} is not valid as ${placed.rule.what}: ${problem}` });
      continue;
    }
    const compiled = compileValue(placed.text, placed.path);
    const values = sampleValues(keysRead(compiled), keys);
    const value = String(materialize(compiled, values));
    const problem = placed.rule.problem(value);
    if (problem !== undefined) out.push({ path: placed.path, message: sampleMessage(placed, value, problem, compiled, keys) });
  }
  return out;
}

function sampleValues(reads: ReturnType<typeof keysRead>, keys: KeysRead): RenderValues {
  // "web" is a valid label value, image tag, name and path component: the fault is the template's.
  const present = (read: ReadonlySet<string>): Record<string, string> => Object.fromEntries([...read].map((k) => [k, 'web']));
  if (keys === KeysRead.Absent) return { ...DeploymentPod, labels: {}, annotations: {} };
  return { ...DeploymentPod, labels: present(reads.labels), annotations: present(reads.annotations) };
}

function sampleMessage(placed: PlacedValue, value: string, problem: string, compiled: ReturnType<typeof compileValue>, keys: KeysRead): string {
  const reads = keysRead(compiled);
  const missing = [...[...reads.labels].map((k) => `label "${k}"`), ...[...reads.annotations].map((k) => `annotation "${k}"`)];
  const pod = keys === KeysRead.Absent ? `a pod without ${missing.join(' or ')}` : `a Deployment's pod in namespace "${DeploymentPod.namespace}" (at admission its only name is the generateName "${DeploymentPod.podName}")`;
  const fix = keys === KeysRead.Absent ? "; give the placeholder a valid default (| default '...')" : '';
  return `for ${pod}, ${shown(placed.text)} renders ${shown(value)}, which Kubernetes refuses as ${placed.rule.what}: ${problem}${fix}`;
}
