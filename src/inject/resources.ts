import { InjectorError } from '../errors.js';
import { isObject, type Container, type PodSpec } from '../kube/types.js';
import { parseQuantity } from './overrides.js';

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
 */
export function checkPodResources(spec: PodSpec, before: PodContainers, after: PodContainers): void {
  const own = spec['resources'];
  if (!isObject(own)) return;
  const problems: string[] = [];
  for (const [resource, value] of entries(own['requests'])) {
    const allowed = quantityOf(value);
    const wanted = aggregateRequest(after, resource);
    if (wanted > allowed && !(aggregateRequest(before, resource) > allowed)) {
      problems.push(`requests.${resource} is ${value as string}, the containers with the sidecars request ${show(resource, wanted)} together`);
    }
  }
  for (const [resource, value] of entries(own['limits'])) {
    const allowed = quantityOf(value);
    for (const c of after.containers) {
      if (before.containers.includes(c)) continue;
      const limit = amount(c, 'limits', resource);
      if (quantityOf(limit) > allowed) problems.push(`limits.${resource} is ${value as string}, sidecar "${c.name}" limits it to ${limit as string}`);
    }
  }
  if (problems.length > 0) throw new InjectorError('POD_RESOURCES_EXCEEDED', [problems.join('; ')]);
}

/**
 * What the containers request of a resource together, as the scheduler and the apiserver count it
 * (resourcehelper.PodRequests): the regular containers and native sidecars, or an init container
 * with the native sidecars started before it, whichever is more. A container that only limits a
 * resource requests its limit (SetDefaults_Pod).
 */
function aggregateRequest(pod: PodContainers, resource: string): number {
  let sidecars = 0;
  let init = 0;
  for (const c of pod.initContainers) {
    if (c.restartPolicy === 'Always') sidecars += request(c, resource);
    else init = Math.max(init, sidecars + request(c, resource));
  }
  let regular = 0;
  for (const c of pod.containers) regular += request(c, resource);
  return Math.max(init, sidecars + regular);
}

function request(c: Container, resource: string): number {
  const n = quantityOf(amount(c, 'requests', resource) ?? amount(c, 'limits', resource));
  return Number.isNaN(n) ? 0 : n;
}

/**
 * A quantity as the apiserver sends it (a string; a number from other clients); NaN for anything
 * else, which compares false, so a value of the wrong type never refuses a pod (nor throws).
 */
function quantityOf(value: unknown): number {
  if (typeof value === 'number') return value;
  return typeof value === 'string' ? parseQuantity(value) : Number.NaN;
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

/** A sum for the message, as people write it: cpu in millicores, bytes in Mi. */
function show(resource: string, value: number): string {
  if (resource === 'cpu') return `${Math.ceil(value * 1000)}m`;
  if (value >= 2 ** 20) return `${Math.ceil((value / 2 ** 20) * 10) / 10}Mi`;
  return String(value);
}
