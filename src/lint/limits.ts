import { checkBody, DefaultBodyLimits, type BodyLimits } from '../admission/codec.js';
import { DefaultReviewLimits } from '../admission/handlers.js';
import { DefaultPodLimits, podObject, type PodLimits } from '../admission/pod.js';
import { apiserverReview } from '../kube/apiserver-review.js';
import { Options } from '../config/config.js';
import { attempt, InjectorError, type ErrorCode } from '../errors.js';
import { applyInjection, type Injection } from '../inject/mutate.js';
import type { Pod } from '../kube/types.js';
import { diff } from '../patch/diff.js';

/**
 * How far an injected pod goes over the limits of `serve` at their defaults, counted with the
 * server's own checks so that lint and serve never disagree on a count: the patch of the mutating
 * webhook's answer (--max-patch-kib), the pod as mutated (podObject: --max-containers,
 * --max-env-per-container, ...) and the review the validating webhook receives for it (checkBody:
 * --max-object-keys, --max-json-keys, --max-json-nodes). Lint runs it on
 * sample pods.
 */

/** What serve answers and receives for one injection into a pod. */
export interface Admitted {
  /** The JSON patch of the mutating webhook's answer (as the handler writes it). */
  readonly patch: string;
  /** The pod as mutated. */
  readonly pod: Pod;
  /** The review of the mutated pod the validating webhook receives, managedFields included. */
  readonly review: string;
}

/** What the mutating webhook answers and the validating webhook receives when `injection` is made into `pod`, the pod of a `kind`. */
export function admitted(pod: Pod, injection: Injection, kind: string): Admitted {
  const mutated = applyInjection(pod, injection);
  return { patch: JSON.stringify(diff(pod, mutated)), pod: mutated, review: apiserverReview({ kind, pod, namespace: 'default' }, mutated) };
}

/** The webhook whose answer a limit decides. */
export const Webhook = { Mutating: 'mutating', Validating: 'validating' } as const;
export type Webhook = (typeof Webhook)[keyof typeof Webhook];

/** One limit of serve: its flag, its default and what it counts. */
export interface Limit {
  readonly flag: string;
  /** What is counted, as a message says it after the number (`env vars in one container`). */
  readonly unit: string;
  /** The flag's default, in the unit counted. */
  readonly limit: number;
  /** The default as the flag is written, when that is another unit (`1024 KiB`). */
  readonly shown?: string;
}

/** A refusal by serve of an injected pod: the limit it goes over and by how much, or (no `limit`) a rule of Kubernetes' or the review's shape. */
export interface Excess {
  readonly webhook: Webhook;
  /** The server's refusal at the defaults, as the user would read it, and its code. */
  readonly refusal: string;
  readonly code: ErrorCode;
  readonly limit?: Limit;
  /** What the injection holds, in the limit's unit. */
  readonly count?: number;
}

/** One limit and how to count it in an injection. */
interface Meter extends Limit {
  readonly webhook: Webhook;
  /** The server's refusal at this limit's default, every other limit open; undefined when the injection is within it. */
  refusal(a: Admitted): InjectorError | undefined;
  count(a: Admitted): number;
}

/**
 * Every refusal by serve of `a`, one per limit it goes over. The whole checks run at the defaults
 * first, so an injection within every limit (any real template's) costs one podObject and one
 * checkBody; only an excess is counted.
 */
export function excesses(a: Admitted): Excess[] {
  const pod = attempt(() => podObject(a.pod));
  const body = attempt(() => checkBody(a.review));
  if (Buffer.byteLength(a.patch) <= DefaultReviewLimits.patchBytes && !(pod instanceof InjectorError) && !(body instanceof InjectorError)) return [];
  const out: Excess[] = [];
  for (const meter of Meters) {
    const refusal = meter.refusal(a);
    if (refusal !== undefined) out.push({ webhook: meter.webhook, refusal: refusal.message, code: refusal.code, limit: meter, count: meter.count(a) });
  }
  // Refused by no limit of serve's: by a rule of Kubernetes (a label value too long) or of the review's shape.
  const other = pod instanceof InjectorError ? pod : body instanceof InjectorError ? body : undefined;
  if (other !== undefined && !out.some((e) => e.webhook === Webhook.Validating))
    out.push({ webhook: Webhook.Validating, refusal: other.message, code: other.code });
  return out;
}

/** The count of what `limit` bounds in `a`, whether over it or not (to say what each template adds). */
export function countOf(a: Admitted, limit: Limit): number {
  return Meters.find((m) => m.flag === limit.flag)!.count(a);
}

/**
 * The least value `passes` holds at, between 0 and `open` (where it must hold): the count a check
 * with a limit of that value measures.
 */
function least(passes: (value: number) => boolean, open: number): number {
  let lo = 0;
  let hi = open;
  while (lo < hi) {
    const mid = Math.floor((lo + hi) / 2);
    if (passes(mid)) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/** Every limit at `value`. */
function all<L extends object>(defaults: L, value: number): L {
  return Object.fromEntries(Object.keys(defaults).map((k) => [k, value])) as L;
}

/**
 * A limit the check `check` (podObject or checkBody) applies to `subject`: counted by running the
 * check with that limit at a value and every other one open. The review's length bounds every
 * count (each thing counted takes a character of it at least), so it is open.
 */
function checked<L extends object>(
  webhook: Webhook,
  defaults: L,
  key: keyof L & string,
  flag: string,
  unit: string,
  check: (a: Admitted, limits: L) => unknown,
): Meter {
  const at = (a: Admitted, value: number): L => ({ ...all(defaults, open(a)), [key]: value });
  const passes = (a: Admitted, value: number): boolean => !(attempt(() => check(a, at(a, value))) instanceof InjectorError);
  const limit = defaults[key] as number;
  return {
    webhook,
    flag,
    unit,
    limit,
    refusal: (a) => {
      const refused = attempt(() => check(a, at(a, limit)));
      // Refused with this limit open too: by something else (nesting, a rule of Kubernetes).
      if (!(refused instanceof InjectorError) || !passes(a, open(a))) return undefined;
      return refused;
    },
    count: (a) => least((value) => passes(a, value), open(a)),
  };
}

const open = (a: Admitted): number => Math.max(a.review.length, Buffer.byteLength(a.patch));

const onPod = (key: keyof PodLimits, flag: string, unit: string): Meter =>
  checked(Webhook.Validating, DefaultPodLimits, key, flag, unit, (a, limits) => podObject(a.pod, limits));
const onBody = (key: keyof BodyLimits, flag: string, unit: string): Meter =>
  checked(Webhook.Validating, DefaultBodyLimits, key, flag, unit, (a, limits) => checkBody(a.review, limits));

const PatchMeter: Meter = {
  webhook: Webhook.Mutating,
  flag: Options.maxPatchKib.flag,
  unit: 'bytes of JSON patch',
  limit: DefaultReviewLimits.patchBytes,
  shown: `${Options.maxPatchKib.schema.default} KiB`,
  refusal: (a) => {
    const bytes = Buffer.byteLength(a.patch);
    if (bytes <= DefaultReviewLimits.patchBytes) return undefined;
    return new InjectorError('PATCH_TOO_LARGE', [bytes, DefaultReviewLimits.patchBytes, Options.maxPatchKib.flag]);
  },
  count: (a) => Buffer.byteLength(a.patch),
};

/** Every limit of serve an injection can go over, in the order serve checks them. */
const Meters: readonly Meter[] = [
  PatchMeter,
  onBody('objectKeys', Options.maxObjectKeys.flag, 'keys in one JSON object of the review'),
  onBody('keys', Options.maxJsonKeys.flag, 'keys in the review'),
  onBody('nodes', Options.maxJsonNodes.flag, 'JSON nodes in the review'),
  onPod('volumes', Options.maxVolumes.flag, 'volumes'),
  onPod('containers', Options.maxContainers.flag, 'containers'),
  onPod('envPerContainer', Options.maxEnvPerContainer.flag, 'env vars in one container'),
  onPod('mountsPerContainer', Options.maxMountsPerContainer.flag, 'volumeMounts in one container'),
  onPod('portsPerContainer', Options.maxPortsPerContainer.flag, 'ports in one container'),
];
