import { Options } from '../config/config.js';
import { ErrorCodes } from '../errors.js';
import { Keys } from '../inject/keys.js';
import { celString } from './cel.js';

/**
 * Size bounds on what the compiled policies' CEL iterates over: the templates and app-containers
 * annotations (split into names), the pod's containers of every kind, each container's env and
 * volumeMounts, its volumes, pull secrets and owner references. Every policy checks them first in
 * its matchConditions, so a pod over a bound costs each policy a few size() calls and nothing it
 * iterates; the bounds policy (boundsPolicy) refuses such a pod with one line. The pod's limits
 * are the webhook's (--max-containers, --max-volumes, --max-env-per-container,
 * --max-mounts-per-container), with its words; the annotations have no webhook limit (it refuses
 * an unknown name at once, TEMPLATE_UNKNOWN), so theirs are the policies' own, far above any
 * selection of real templates. test/policy/cost.test.ts holds the cost O(1) on the pods over them,
 * test/policy/parity-bounds.test.ts the refusal through the apiserver's plugins.
 */

/** The webhook's --max-* limits the policies mirror (the webhook's PodLimits has these fields). */
export interface PodLimits {
  readonly containers: number;
  readonly envPerContainer: number;
  readonly mountsPerContainer: number;
  readonly volumes: number;
}

/** The flags' defaults. */
export const DefaultPodLimits: PodLimits = Object.freeze({
  containers: Options.maxContainers.schema.default,
  envPerContainer: Options.maxEnvPerContainer.schema.default,
  mountsPerContainer: Options.maxMountsPerContainer.schema.default,
  volumes: Options.maxVolumes.schema.default,
});

/** The policies' own bounds, where the webhook has none. */
export const PolicyBounds = {
  /** Characters of the templates and app-containers annotations: 64 names of 63 characters with their commas. */
  annotationChars: 4096,
  /** Comma-separated names in either annotation. */
  names: 64,
  /** imagePullSecrets of the pod (Kubernetes sets none). */
  pullSecrets: 1000,
  /** ownerReferences of the pod (a controller's pod has one). */
  ownerReferences: 100,
} as const;

const ANNOTATIONS = [Keys.templates, Keys.appContainers] as const;
const annotation = (key: string): string => `object.metadata.?annotations[?${celString(key)}].orValue("")`;
const INIT = 'object.spec.?initContainers.orValue([])';
const EPHEMERAL = 'object.spec.?ephemeralContainers.orValue([])';
const CONTAINER_COUNT = `(size(object.spec.containers) + size(${INIT}) + size(${EPHEMERAL}))`;
const LISTS = ['containers', 'initContainers', 'ephemeralContainers'] as const;
const listOf = (field: (typeof LISTS)[number]): string => (field === 'containers' ? 'object.spec.containers' : `object.spec.?${field}.orValue([])`);

/** One bound: CEL that holds within it (O(1), or O(a bound checked before it)), and the message when it does not. */
interface Bound {
  readonly ok: string;
  readonly message: string;
}

/** The webhook's POD_OVER_LIMIT message with CEL for what the pod has. */
function overLimit(what: string, limit: number, flag: string): string {
  const [head, mid, tail, rest] = ErrorCodes.POD_OVER_LIMIT.message.split('%s') as [string, string, string, string];
  return `${celString(head)} + ${what} + ${celString(`${mid}${limit}${tail}${flag}${rest}`)}`;
}

/** The bounds, in the order the webhook checks them (podObject), each assuming those before it hold. */
export function bounds(limits: PodLimits = DefaultPodLimits): Bound[] {
  const perContainer = (field: 'env' | 'volumeMounts', limit: number, flag: string, what: string): Bound[] =>
    LISTS.map((list) => {
      const over = `lists.range(size(${listOf(list)})).filter(i, size(${listOf(list)}[i].?${field}.orValue([])) > ${limit})[0]`;
      return {
        ok: `${listOf(list)}.all(c, size(c.?${field}.orValue([])) <= ${limit})`,
        message: overLimit(
          `string(size(${listOf(list)}[${over}].?${field}.orValue([]))) + ${celString(` ${what} in spec.${list}[`)} + string(${over}) + "]"`,
          limit,
          flag,
        ),
      };
    });
  return [
    ...ANNOTATIONS.flatMap((key) => [
      {
        ok: `size(${annotation(key)}) <= ${PolicyBounds.annotationChars}`,
        message: `${celString(`annotation ${key} has `)} + string(size(${annotation(key)})) + ${celString(` characters, over the policies' limit of ${PolicyBounds.annotationChars}; name each template or container once`)}`,
      },
      {
        ok: `size(${annotation(key)}.split(",")) <= ${PolicyBounds.names}`,
        message: `${celString(`annotation ${key} names `)} + string(size(${annotation(key)}.split(","))) + ${celString(` items, over the policies' limit of ${PolicyBounds.names}; name each template or container once`)}`,
      },
    ]),
    {
      ok: `size(object.spec.?volumes.orValue([])) <= ${limits.volumes}`,
      message: overLimit(`string(size(object.spec.?volumes.orValue([]))) + " volumes"`, limits.volumes, Options.maxVolumes.flag),
    },
    {
      ok: `${CONTAINER_COUNT} <= ${limits.containers}`,
      message: overLimit(
        `string(${CONTAINER_COUNT}) + " containers (containers, initContainers and ephemeralContainers together)"`,
        limits.containers,
        Options.maxContainers.flag,
      ),
    },
    ...perContainer('env', limits.envPerContainer, Options.maxEnvPerContainer.flag, 'env vars'),
    ...perContainer('volumeMounts', limits.mountsPerContainer, Options.maxMountsPerContainer.flag, 'volumeMounts'),
    {
      ok: `size(object.spec.?imagePullSecrets.orValue([])) <= ${PolicyBounds.pullSecrets}`,
      message: `"the pod has " + string(size(object.spec.?imagePullSecrets.orValue([]))) + ${celString(` imagePullSecrets, over the policies' limit of ${PolicyBounds.pullSecrets}`)}`,
    },
    {
      ok: `size(object.metadata.?ownerReferences.orValue([])) <= ${PolicyBounds.ownerReferences}`,
      message: `"the pod has " + string(size(object.metadata.?ownerReferences.orValue([]))) + ${celString(` ownerReferences, over the policies' limit of ${PolicyBounds.ownerReferences}`)}`,
    },
  ];
}

/**
 * All bounds as one CEL condition. The apiserver evaluates every matchCondition of a policy
 * (plugin/cel/condition.go ForInput) before it looks at their results, so a condition that
 * iterates must carry this guard itself: `&&` stops at the first false operand, and the cost
 * charged is that of what ran.
 */
export function withinBounds(limits?: PodLimits): string {
  return bounds(limits)
    .map((b) => `(${b.ok})`)
    .join(' && ');
}

/**
 * The bounds policy's validations: each refuses with its bound's message, and holds when a bound
 * checked before it fails (that one refuses), so no validation iterates past a bound.
 */
export function boundsValidations(limits?: PodLimits): Record<string, unknown>[] {
  const all = bounds(limits);
  return all.map((b, i) => {
    const before = all.slice(0, i).map((p) => `(${p.ok})`);
    return {
      expression: before.length === 0 ? b.ok : `!(${before.join(' && ')}) || (${b.ok})`,
      messageExpression: b.message,
      reason: 'Invalid',
    };
  });
}
