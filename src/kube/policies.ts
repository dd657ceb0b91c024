import {
  AdmissionregistrationV1Api,
  AdmissionregistrationV1beta1Api,
  KubernetesObjectApi,
  PatchStrategy,
  type KubernetesObject,
} from '@kubernetes/client-node';
import { InjectorError } from '../errors.js';
import { apiError, apiStatus, statusMessage, type KubeClients } from './client.js';

const GROUP = 'admissionregistration.k8s.io';

/** The admission policy kinds the injector writes, by resource name. */
export const PolicyResources = {
  MutatingAdmissionPolicy: 'mutatingadmissionpolicies',
  MutatingAdmissionPolicyBinding: 'mutatingadmissionpolicybindings',
  ValidatingAdmissionPolicy: 'validatingadmissionpolicies',
  ValidatingAdmissionPolicyBinding: 'validatingadmissionpolicybindings',
} as const;
export type PolicyKind = keyof typeof PolicyResources;

/** What `--policy-api` asks for: a version, or auto (API discovery decides). */
export type PolicyApiChoice = 'auto' | 'v1' | 'v1beta1';

/** One object the compiler makes, as it is applied. */
export interface PolicyObject extends KubernetesObject {
  readonly apiVersion: string;
  readonly kind: string;
  readonly metadata: { readonly name: string; readonly labels?: Readonly<Record<string, string>>; readonly annotations?: Readonly<Record<string, string>> };
}

/**
 * The four policy kinds through the Kubernetes API: server-side apply with one field manager,
 * listed by this install's labels, deleted. Every fault is an InjectorError a user can act on:
 * POLICY_API_FORBIDDEN naming the verb and resource RBAC lacks, POLICY_API_NOT_SERVED naming the
 * Kubernetes versions that serve the kinds, POLICY_OBJECT_REFUSED for an apply the apiserver's
 * validation refuses (400, 422: that object alone, never retried as it is), else KUBE_API_FAILED.
 */
export interface PolicyApi {
  /** The apiVersion of MutatingAdmissionPolicy and its binding (ValidatingAdmissionPolicy is always v1, GA since 1.30). */
  readonly mutatingApiVersion: string;
  apply(obj: PolicyObject): Promise<void>;
  /** Every object of the four kinds whose labels match `selector` (a label selector). */
  list(selector: string): Promise<PolicyObject[]>;
  /** Deletes the object; one already gone is not an error. */
  remove(obj: PolicyObject): Promise<void>;
}

/** The field manager of every apply: one manager for every replica, so their applies of the same objects agree (test/policy/sync.test.ts). */
export const FIELD_MANAGER = 'sidecar-injector';

/**
 * Opens the policy API: with `auto`, asks API discovery which admissionregistration.k8s.io version
 * serves mutatingadmissionpolicies (v1 from Kubernetes 1.36, v1beta1 in 1.34 and 1.35 with the
 * beta API on); throws POLICY_API_NOT_SERVED when neither does.
 */
export async function openPolicyApi(kube: KubeClients, choice: PolicyApiChoice): Promise<PolicyApi> {
  const version = choice === 'auto' ? await discoverVersion(kube) : choice;
  const objects = KubernetesObjectApi.makeApiClient(kube.config);
  const mutatingApiVersion = `${GROUP}/${version}`;
  const apiVersionOf = (kind: PolicyKind): string => (kind.startsWith('Mutating') ? mutatingApiVersion : `${GROUP}/v1`);
  return {
    mutatingApiVersion,
    async apply(obj) {
      try {
        await objects.patch(obj, undefined, undefined, FIELD_MANAGER, true, PatchStrategy.ServerSideApply);
      } catch (err) {
        const status = apiStatus(err);
        // 413: an object over the apiserver's request or etcd's object size (compile.ts bounds it first).
        if (status === 400 || status === 413 || status === 422)
          throw new InjectorError('POLICY_OBJECT_REFUSED', [obj.kind, obj.metadata.name, `HTTP ${status}: ${statusMessage(err)}`], { cause: err });
        throw classify('patch', obj.kind, obj.apiVersion, err);
      }
    },
    async list(selector) {
      const lists = await Promise.all(
        (Object.keys(PolicyResources) as PolicyKind[]).map((kind) =>
          call('list', kind, apiVersionOf(kind), () => objects.list(apiVersionOf(kind), kind, undefined, undefined, undefined, undefined, undefined, selector)),
        ),
      );
      return lists.flatMap((l, i) => {
        const kind = Object.keys(PolicyResources)[i] as PolicyKind;
        return l.items.map((item) => ({ ...item, apiVersion: apiVersionOf(kind), kind, metadata: { ...item.metadata, name: item.metadata?.name ?? '' } }));
      });
    },
    async remove(obj) {
      try {
        await call('delete', obj.kind, obj.apiVersion, () => objects.delete(obj));
      } catch (err) {
        if (!(err instanceof InjectorError && apiStatus(err.cause) === 404)) throw err;
      }
    },
  };
}

/** The version discovery names for mutatingadmissionpolicies: v1 first, then v1beta1. */
async function discoverVersion(kube: KubeClients): Promise<'v1' | 'v1beta1'> {
  const serves = async (api: { getAPIResources(): Promise<{ resources: { name: string }[] }> }): Promise<boolean> => {
    try {
      return (await api.getAPIResources()).resources.some((r) => r.name === PolicyResources.MutatingAdmissionPolicy);
    } catch (err) {
      if (apiStatus(err) === 404) return false;
      throw classify('get', 'MutatingAdmissionPolicy', `${GROUP}/v1`, err);
    }
  };
  if (await serves(kube.config.makeApiClient(AdmissionregistrationV1Api))) return 'v1';
  if (await serves(kube.config.makeApiClient(AdmissionregistrationV1beta1Api))) return 'v1beta1';
  throw new InjectorError('POLICY_API_NOT_SERVED', [`${PolicyResources.MutatingAdmissionPolicy} in ${GROUP}/v1 or v1beta1`]);
}

async function call<T>(verb: string, kind: string, apiVersion: string, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    throw classify(verb, kind, apiVersion, err);
  }
}

/** The one-line error of a failed call: what RBAC lacks, a kind the cluster does not serve, or the API's answer. */
function classify(verb: string, kind: string, apiVersion: string, err: unknown): InjectorError {
  const plural = PolicyResources[kind as PolicyKind] ?? kind;
  const resource = `${plural}.${GROUP}`;
  const status = apiStatus(err);
  // An apply that creates the object is refused for create, not patch: the apiserver's message says which verb.
  if (status === 403) return new InjectorError('POLICY_API_FORBIDDEN', [refusedVerb(err) ?? verb, resource], { cause: err });
  // client-node finds a kind's resource by discovery first: a version the cluster does not serve fails there with 404, or finds no such kind.
  const unrecognized = status === undefined && /Unrecognized API version and kind/.test((err as Error).message);
  if ((status === 404 && verb !== 'delete') || unrecognized) return new InjectorError('POLICY_API_NOT_SERVED', [`${plural} in ${apiVersion}`], { cause: err });
  return apiError(`${verb} ${resource}`, err);
}

/** The verb a 403 names (`... cannot create resource "x" ...`, the apiserver's RBAC message), if it names one. */
function refusedVerb(err: unknown): string | undefined {
  const body = (err as { body?: unknown }).body;
  const text = typeof body === 'string' ? body : JSON.stringify(body ?? '');
  return /cannot ([a-z]+) resource/.exec(text)?.[1];
}
