import { InjectorError } from '../errors.js';
import { isObject, type Container, type PodSpec } from '../kube/types.js';
import { formatQuantity, quantityOf } from '../kube-values/quantity.js';

/** The containers of the pod once injected, in their lists' order. */
export interface PodContainers {
  readonly containers: readonly Container[];
  readonly initContainers: readonly Container[];
}

/**
 * Pod-level resources (`spec.resources`, beta and on by default since Kubernetes 1.34): the
 * apiserver refuses a pod whose pod-level request of a resource is below what its containers
 * request together, or one of whose containers limits a resource above the pod-level limit
 * (validatePodResourceConsistency, pkg/apis/core/validation). Sidecars request resources of their
 * own, so a pod that fits on its own can stop fitting once injected, and the apiserver's 422 would
 * name neither the injector nor the sidecars: refused here, saying what to raise. A resource the
 * pod did not fit before injection is left to the apiserver (the sidecars did not cause it).
 * Quantities are summed and compared exactly (Quantity.Add, Quantity.Cmp), never as doubles, and
 * one that cannot be read refuses nothing.
 */
export function checkPodResources(spec: PodSpec, before: PodContainers, after: PodContainers): void {
  const own = spec['resources'];
  if (!isObject(own)) return;
  const problems: string[] = [];
  const podLimits = entries(own['limits']);
  for (const [resource, value] of entries(own['requests'])) {
    const allowed = quantityOf(value);
    if (allowed === undefined) continue;
    const wanted = aggregateRequest(after, resource);
    const had = aggregateRequest(before, resource);
    if (wanted <= allowed.nanos || had > allowed.nanos) continue;
    const show = (nanos: bigint): string => formatQuantity({ nanos, format: allowed.format });
    const share = `the sidecars add ${show(wanted - had)}`;
    // A pod that sets only limits gets its requests filled in with its containers' total before
    // webhooks run (defaultPodRequests, pkg/apis/core/v1/defaults.go), not recomputed after them:
    // the user never wrote this figure, so say where it came from and what to write instead.
    problems.push(
      podLimits.length > 0 && had === allowed.nanos
        ? `requests.${resource} is ${written(value)}, which the apiserver filled in from the containers' total because the pod sets only spec.resources.limits, and not recomputed after injection: set spec.resources.requests.${resource} explicitly to at least ${show(wanted)} (${share})`
        : `requests.${resource} is ${written(value)}, the containers with the sidecars request ${show(wanted)} together (${share})`,
    );
  }
  for (const [resource, value] of podLimits) {
    const allowed = quantityOf(value);
    if (allowed === undefined) continue;
    for (const c of after.containers) {
      if (before.containers.includes(c)) continue;
      const limit = amount(c, 'limits', resource);
      const own = quantityOf(limit);
      if (own !== undefined && own.nanos > allowed.nanos)
        problems.push(`limits.${resource} is ${written(value)}, sidecar "${c.name}" limits it to ${written(limit)}`);
    }
  }
  if (problems.length > 0) throw new InjectorError('POD_RESOURCES_EXCEEDED', [problems.join('; ')]);
}

/**
 * What the containers request of a resource together, in nano-units, as the scheduler and the
 * apiserver count it (resourcehelper.PodRequests): the regular containers and native sidecars, or an
 * init container with the native sidecars started before it, whichever is more. A container that
 * only limits a resource requests its limit (SetDefaults_Pod). Exact, as Quantity.Add is.
 */
function aggregateRequest(pod: PodContainers, resource: string): bigint {
  let sidecars = 0n;
  let init = 0n;
  for (const c of pod.initContainers) {
    if (c.restartPolicy === 'Always') sidecars += request(c, resource);
    else init = max(init, sidecars + request(c, resource));
  }
  let regular = 0n;
  for (const c of pod.containers) regular += request(c, resource);
  return max(init, sidecars + regular);
}

/** A container's request of a resource; 0 for one it does not set or that cannot be read, so such a value never refuses a pod (nor throws). */
function request(c: Container, resource: string): bigint {
  return quantityOf(amount(c, 'requests', resource) ?? amount(c, 'limits', resource))?.nanos ?? 0n;
}

function max(a: bigint, b: bigint): bigint {
  return a > b ? a : b;
}

/** A container's request or limit of a resource, as written; undefined when it sets none. */
function amount(c: Container, list: 'requests' | 'limits', resource: string): unknown {
  const resources = c['resources'];
  const map = isObject(resources) ? resources[list] : undefined;
  return isObject(map) && Object.hasOwn(map, resource) && map[resource] !== null ? map[resource] : undefined;
}

function entries(map: unknown): [string, unknown][] {
  return isObject(map) ? Object.entries(map) : [];
}

/** A quantity the message quotes, as the pod wrote it (only read ones are quoted: a string or a number). */
function written(value: unknown): string {
  return String(value);
}
