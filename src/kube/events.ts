import type { CoreV1Event } from '@kubernetes/client-node';

/** What became of a review's Event for its pod's owner; the label of sidecar_injector_owner_events_total. */
export const OwnerEventResult = {
  /** Created. */
  Sent: 'sent',
  /** The API refused it or could not be reached (RBAC, no cluster). */
  Failed: 'failed',
  /** Not made: the same owner was told of the same reason within the interval, or the global cap was reached. */
  Limited: 'limited',
  /** Not made: the queue was full. */
  Dropped: 'dropped',
} as const;
export type OwnerEventResult = (typeof OwnerEventResult)[keyof typeof OwnerEventResult];

/** The pod's controller, as its controller ownerReference names it, and the denial to tell it of (values clipped): what a review's record carries for its Event. */
export interface OwnerEvent {
  readonly apiVersion: string;
  readonly kind: string;
  readonly name: string;
  readonly uid: string;
  /** request.dryRun: no Event is made for a dry run. */
  readonly dryRun: boolean;
  /** The denial's one-line message, at most EVENT_MESSAGE_MAX characters. */
  readonly message: string;
}

/** The longest message of an owner Event. */
export const EVENT_MESSAGE_MAX = 1024;

/** An object's controller, as its controller ownerReference names it. */
export interface Controller {
  readonly apiVersion: string;
  readonly kind: string;
  readonly name: string;
  readonly uid: string;
}

/** What the observer reads of a review's record (admission/record.ts ReviewRecord). */
export interface ObservedReview {
  /** The pod's namespace, where its owner and the Event live. */
  readonly namespace: string;
  /** The denial's reason (a policy Reason). */
  readonly reason: string;
  readonly ownerEvent?: OwnerEvent;
}

/** The component Events name as their source (`kubectl describe` shows it in the From column). */
export const EVENT_COMPONENT = 'sidecar-injector';

export interface OwnerEventsOptions {
  /** Creates one Event in its namespace (CoreV1Api.createNamespacedEvent); a rejection counts as failed. */
  readonly create: (namespace: string, event: CoreV1Event) => Promise<unknown>;
  /**
   * The controller of a ReplicaSet (its Deployment), read when its Event is about to be created, so
   * the Event lands where `kubectl describe deployment` shows it; undefined, or a rejection, keeps
   * the Event on the ReplicaSet.
   */
  readonly parentOf?: (namespace: string, name: string) => Promise<Controller | undefined>;
  /** Called once per Event considered, with what became of it. */
  readonly count?: (result: OwnerEventResult) => void;
  /** Called with the error of an Event that failed. */
  readonly failed?: (err: unknown) => void;
  /** Events waiting to be created; one more is dropped (default 64). */
  readonly queueSize?: number;
  /** Milliseconds in which an owner gets at most one Event per reason (default 60 s). */
  readonly intervalMs?: number;
  /** Events created per second, over every owner (default 5). */
  readonly perSecond?: number;
  /** Events created per second for the owners of one namespace (default 2), so one namespace never takes every Event of a second. */
  readonly perNamespacePerSecond?: number;
  /** Owner and reason pairs remembered for the interval, least recently used forgotten first (default 4096). */
  readonly remembered?: number;
  /** The reporting instance (the pod's hostname). */
  readonly instance?: string;
  readonly now?: () => number;
}

/** The review observer that tells a pod's owner why the pod was refused, and how to stop it. */
export interface OwnerEvents {
  /** A review observer (main.ts hands it every record after the log's and the metrics'). */
  readonly observe: (record: ObservedReview) => void;
  /** Drops what is queued and resolves once the Event being created, if any, is done. */
  close(): Promise<void>;
}

/**
 * Events on the controller of a refused pod (the ReplicaSet, Job, StatefulSet...; a ReplicaSet's
 * Deployment when `parentOf` finds it), as `kubectl describe` shows them: core/v1 Events whose involvedObject is the owner, type Warning, the
 * reason in UpperCamelCase and the denial's message. Never in a review's path: the observer only
 * decides and queues; one Event at a time is created after the answer. Bounded: at most one Event
 * per owner and reason per interval (an LRU of `remembered` pairs), `perSecond` in all and
 * `perNamespacePerSecond` per namespace, a queue of `queueSize` of which one namespace holds at most
 * a quarter; whatever does not fit is counted, not kept. A namespace whose pods are refused without
 * pause so leaves the other namespaces most of every second and of the queue (test/kube/events.test.ts,
 * "namespace"). The per-namespace counts are kept for the namespaces of the current second and of
 * the queue alone, so they hold at most perSecond + queueSize entries. Dry runs never make one.
 */
export function ownerEvents(options: OwnerEventsOptions): OwnerEvents {
  const queueSize = options.queueSize ?? 64;
  const intervalMs = options.intervalMs ?? 60_000;
  const perSecond = options.perSecond ?? 5;
  const perNamespace = options.perNamespacePerSecond ?? 2;
  const remembered = options.remembered ?? 4096;
  const now = options.now ?? Date.now;
  const count = options.count ?? (() => undefined);
  const lastSent = new Map<string, number>();
  const queue: { namespace: string; event: CoreV1Event }[] = [];
  let second = 0;
  let inSecond = 0;
  /** Events of this second, and Events queued, per namespace. */
  let inSecondOf = new Map<string, number>();
  const queuedOf = new Map<string, number>();
  const queueShare = Math.max(1, Math.floor(queueSize / 4));
  let running: Promise<void> | undefined;
  let closed = false;
  let sequence = 0;

  const drain = async (): Promise<void> => {
    for (let next = queue.shift(); next !== undefined && !closed; next = queue.shift()) {
      const left = (queuedOf.get(next.namespace) ?? 1) - 1;
      if (left > 0) queuedOf.set(next.namespace, left);
      else queuedOf.delete(next.namespace);
      try {
        await onParent(next.namespace, next.event);
        await options.create(next.namespace, next.event);
        count(OwnerEventResult.Sent);
      } catch (err) {
        count(OwnerEventResult.Failed);
        options.failed?.(err);
      }
    }
    running = undefined;
  };

  // One GET of the ReplicaSet per Event, after the rate limits: at most perSecond a second.
  const onParent = async (namespace: string, event: CoreV1Event): Promise<void> => {
    const involved = event.involvedObject;
    if (options.parentOf === undefined || involved.kind !== 'ReplicaSet' || involved.apiVersion !== 'apps/v1' || involved.name === undefined) return;
    const parent = await options.parentOf(namespace, involved.name).catch(() => undefined);
    if (parent === undefined) return;
    event.involvedObject = { apiVersion: parent.apiVersion, kind: parent.kind, name: parent.name, namespace, ...(parent.uid !== '' && { uid: parent.uid }) };
    event.message = `${event.message ?? ''} (pods of ReplicaSet ${involved.name})`.slice(0, EVENT_MESSAGE_MAX);
  };

  const observe = (record: ObservedReview): void => {
    const owner = record.ownerEvent;
    if (owner === undefined || owner.dryRun || closed) return;
    const at = now();
    const key = `${record.namespace}\u0000${owner.kind}\u0000${owner.name}\u0000${record.reason}`;
    const last = lastSent.get(key);
    if (last !== undefined && at - last < intervalMs) return count(OwnerEventResult.Limited);
    const thisSecond = Math.floor(at / 1000);
    if (thisSecond !== second) {
      second = thisSecond;
      inSecond = 0;
      inSecondOf = new Map();
    }
    const ofNamespace = inSecondOf.get(record.namespace) ?? 0;
    if (inSecond >= perSecond || ofNamespace >= perNamespace) return count(OwnerEventResult.Limited);
    const queued = queuedOf.get(record.namespace) ?? 0;
    if (queue.length >= queueSize || queued >= queueShare) return count(OwnerEventResult.Dropped);
    inSecond++;
    inSecondOf.set(record.namespace, ofNamespace + 1);
    queuedOf.set(record.namespace, queued + 1);
    lastSent.delete(key);
    lastSent.set(key, at);
    if (lastSent.size > remembered) lastSent.delete(lastSent.keys().next().value as string);
    const time = new Date(at);
    queue.push({
      namespace: record.namespace,
      event: {
        // client-go's recorder names an Event <object>.<hex nanoseconds>.
        metadata: {
          name: `${owner.name.slice(0, 200)}.${(BigInt(at) * 1_000_000n + BigInt(sequence++ % 1_000_000)).toString(16)}`,
          namespace: record.namespace,
        },
        involvedObject: {
          apiVersion: owner.apiVersion,
          kind: owner.kind,
          name: owner.name,
          namespace: record.namespace,
          ...(owner.uid !== '' && { uid: owner.uid }),
        },
        type: 'Warning',
        reason: upperCamel(record.reason),
        message: owner.message,
        source: { component: EVENT_COMPONENT },
        reportingComponent: EVENT_COMPONENT,
        ...(options.instance !== undefined && { reportingInstance: options.instance }),
        firstTimestamp: time,
        lastTimestamp: time,
        count: 1,
      },
    });
    // After the answer: the observer runs before the review's bytes are written.
    running ??= new Promise<void>((resolve) => setImmediate(resolve)).then(drain);
  };

  return {
    observe,
    async close() {
      closed = true;
      queue.length = 0;
      queuedOf.clear();
      await running;
    },
  };
}

/** `unknown-template` -> `UnknownTemplate`, as Kubernetes spells Event reasons. */
export function upperCamel(reason: string): string {
  return reason.replace(/(?:^|-)([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

/** The controller ownerReference of an object's list, if any (a ReplicaSet's Deployment). */
export function controllerOf(
  refs: readonly { apiVersion: string; kind: string; name: string; uid: string; controller?: boolean }[] | undefined,
): Controller | undefined {
  const ref = refs?.find((r) => r.controller === true);
  return ref === undefined ? undefined : { apiVersion: ref.apiVersion, kind: ref.kind, name: ref.name, uid: ref.uid };
}
