import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fastJsonPatch from 'fast-json-patch';
import { makeTestCerts } from './tls.js';

const { applyPatch } = fastJsonPatch;

/** One call the fake API server answered. */
export interface Call {
  readonly method: string;
  readonly path: string;
  readonly status: number;
}

/**
 * A stand-in for the kube-apiserver that answers the calls the injector makes (Secrets, and the
 * two webhook configuration kinds) with the API server's semantics: 404 Status for a missing
 * object, 409 AlreadyExists on a second create, 409 Conflict on an update carrying a stale
 * resourceVersion, 422 when a JSON patch `test` fails. Over HTTPS, with a bearer token. The webhook
 * configurations are listed too (what `drift` reads the injector's selectors from).
 * For `drift`: lists of Pods (with the status.phase field selector), ReplicaSets, Jobs, CronJobs, in one
 * namespace or all, in pages (limit and continue, as the apiserver's chunked lists), a ConfigMap,
 * Namespaces (get and list), and Deployments, StatefulSets and DaemonSets: get, and the strategic
 * merge patch of `drift --restart`, after which each get shows the controller one step further
 * through the rollout, in the status fields the real controllers write (see `setRollout`).
 */
export interface FakeApiServer {
  readonly url: string;
  /** A kubeconfig file pointing at this server (what `--kubeconfig` reads). */
  readonly kubeconfig: string;
  readonly calls: Call[];
  readonly token: string;
  secret(namespace: string, name: string): any;
  putSecret(namespace: string, obj: any): void;
  webhookConfig(kind: 'mutating' | 'validating', name: string): any;
  putWebhookConfig(kind: 'mutating' | 'validating', obj: any): void;
  /** Every distinct caBundle each configuration carried, in order (base64 as stored). */
  readonly bundleHistory: Record<'mutating' | 'validating', string[]>;
  /** Adds or replaces a Pod, ReplicaSet, Job, CronJob, ConfigMap, Namespace, Deployment, StatefulSet or DaemonSet (by kind, namespace and name). */
  putObject(obj: any): void;
  /** The stored object of that kind (namespace '' for a Namespace). */
  object(kind: string, namespace: string, name: string): any;
  /** How a workload's rollout goes after a patch (default `rolls`). */
  setRollout(kind: string, namespace: string, name: string, rollout: Rollout): void;
  /** Answers every request for this path with 403 Forbidden, as RBAC does for a verb not granted. */
  forbid(path: string): void;
  /**
   * Answers 403 Forbidden to every request `granted` refuses, as RBAC does for a user holding only
   * those rights; undefined grants everything again. A server-side apply that would create a policy
   * object is also asked as method CREATE.
   */
  grantOnly(granted: ((method: string, path: string) => boolean) | undefined): void;
  /**
   * Refuses the server-side apply of each policy object for which `why` returns a reason, with 422
   * Invalid as the apiserver's validation does (`<Kind>.admissionregistration.k8s.io "name" is
   * invalid: <reason>`); undefined accepts every object again.
   */
  invalidate(why: ((kind: string, name: string) => string | undefined) | undefined): void;
  /** Every PATCH of a workload, in order: the path, the Content-Type and the body. */
  readonly patches: { readonly path: string; readonly contentType: string; readonly body: any }[];
  /**
   * SidecarTemplates (issue 23) as the apiserver serves a custom resource: list (all namespaces or
   * one) with the collection's resourceVersion, watch from a resourceVersion as a chunked stream of
   * JSON events, BOOKMARK events, 410 Gone for a resourceVersion older than the last compaction,
   * and PUT of the status subresource (which does not change `generation`).
   */
  applyTemplate(obj: any): any;
  deleteTemplate(namespace: string, name: string): void;
  template(namespace: string, name: string): any;
  /** Writes an object's status as another client would (another replica): PUT of the status subresource. */
  writeTemplateStatus(namespace: string, name: string, status: unknown): void;
  /** Called before each PUT of a template's status is judged: a test changes the object here to make that write meet 409 Conflict. */
  beforeStatusWrite: ((namespace: string, name: string) => void) | undefined;
  /** How many SidecarTemplate list requests with a `continue` token (a page after the first) answer 500 next. */
  failContinuedLists: number;
  /** Forgets the events so far, as etcd compaction does: a watch from before them gets 410 Gone. */
  compact(): void;
  /** Sends a BOOKMARK with the current resourceVersion to every open watch. */
  bookmark(): void;
  /** Ends every open watch, as the apiserver does when a watch's timeout runs out. */
  endWatches(): void;
  /** Open watch streams. */
  readonly watches: number;
  /** Every core/v1 Event created (POST /api/v1/namespaces/NS/events), in order, as stored: the apiserver's 201 answer. */
  readonly createdEvents: any[];
  /**
   * Which admissionregistration.k8s.io version serves MutatingAdmissionPolicy and its binding, as
   * API discovery says: v1 (Kubernetes 1.36+, the default), v1beta1 (1.34 and 1.35 with the beta API
   * on) or none (older). ValidatingAdmissionPolicy and its binding are served in v1 whatever it is.
   */
  policyApi: 'v1' | 'v1beta1' | 'none';
  /**
   * The four policy kinds as the apiserver serves them: discovery (the group, each version's
   * resource list), server-side apply (PATCH application/apply-patch+yaml, fieldManager required,
   * create or replace the fields of that one manager, 409 for another manager's object without
   * force, no write when nothing changed), list with a label selector (=, ==, !=, exists, !exists),
   * get and delete.
   */
  policy(kind: PolicyKind, name: string): any;
  /** Every stored policy object of that kind, by name order. */
  policies(kind: PolicyKind): any[];
  /** Stores an object of another manager, as kubectl or another install would. */
  putPolicy(obj: any, manager?: string): void;
  /** Writes of policy objects (apply that changed something, delete), in order: `VERB kind/name`. */
  readonly policyWrites: string[];
  /** Milliseconds to hold each answer: widens the window in which replicas race. */
  latencyMs: number;
  close(): Promise<void>;
}

/** The admission policy kinds, by resource. */
export const PolicyKinds = {
  mutatingadmissionpolicies: 'MutatingAdmissionPolicy',
  mutatingadmissionpolicybindings: 'MutatingAdmissionPolicyBinding',
  validatingadmissionpolicies: 'ValidatingAdmissionPolicy',
  validatingadmissionpolicybindings: 'ValidatingAdmissionPolicyBinding',
} as const;
export type PolicyKind = (typeof PolicyKinds)[keyof typeof PolicyKinds];

const TOKEN = 'fake-serviceaccount-token';

/**
 * A workload's rollout after a patch, one step per get: `rolls` is observed, half done, then done;
 * `stuck` stays half done; `deadline` is observed with the Progressing condition's
 * ProgressDeadlineExceeded reason; `forbidden` refuses the patch with 403 (no RBAC for it).
 */
export type Rollout = 'rolls' | 'stuck' | 'deadline' | 'forbidden';

export async function startFakeApiServer(): Promise<FakeApiServer> {
  const certs = await makeTestCerts();
  const secrets = new Map<string, any>();
  const hooks = new Map<string, any>();
  const objects = new Map<string, Map<string, any>>(Object.values(Listed).map((r) => [r.kind, new Map()]));
  const calls: Call[] = [];
  const patches: { path: string; contentType: string; body: any }[] = [];
  const rollouts = new Map<string, { rollout: Rollout; step: number }>();
  const forbidden = new Set<string>();
  const rights: { granted?: ((method: string, path: string) => boolean) | undefined } = {};
  const validation: { why?: ((kind: string, name: string) => string | undefined) | undefined } = {};
  const bundleHistory: Record<'mutating' | 'validating', string[]> = { mutating: [], validating: [] };
  let version = 100;
  const state: {
    latencyMs: number;
    beforeStatusWrite: ((namespace: string, name: string) => void) | undefined;
    failContinuedLists: number;
    policyApi: 'v1' | 'v1beta1' | 'none';
  } = {
    policyApi: 'v1',
    latencyMs: 0,
    beforeStatusWrite: undefined,
    failContinuedLists: 0,
  };
  const nextVersion = (): string => String(++version);

  const recordBundles = (kind: 'mutating' | 'validating', obj: any): void => {
    const bundle = String(obj.webhooks?.[0]?.clientConfig?.caBundle ?? '');
    if (bundleHistory[kind].at(-1) !== bundle) bundleHistory[kind].push(bundle);
  };

  const createdEvents: any[] = [];
  const templates = new Map<string, any>();
  const events: { rv: number; type: string; object: any }[] = [];
  let compactedAt = 0;
  const watchers = new Set<{ res: ServerResponse; ns: string | undefined }>();
  const TEMPLATES = /^\/apis\/sidecar-injector\.io\/v1alpha1(?:\/namespaces\/([^/]+))?\/sidecartemplates(?:\/([^/]+)(\/status)?)?$/;
  const emit = (type: string, object: any): void => {
    events.push({ rv: version, type, object });
    // A write that lands after close() ended the watches (an injector's status PUT in flight) reaches no one.
    for (const w of watchers)
      if (!w.res.writableEnded && (w.ns === undefined || w.ns === object.metadata.namespace)) w.res.write(`${JSON.stringify({ type, object })}\n`);
  };
  /** A list, in pages when asked (limit and continue, as the apiserver's chunked lists). */
  const templateList = (ns: string | undefined, query: URLSearchParams): [number, unknown] => {
    if (query.get('continue') && state.failContinuedLists > 0) {
      state.failContinuedLists--;
      return status(500, 'InternalError', 'the list broke off after its first page');
    }
    const all = [...templates.values()].filter((t) => ns === undefined || t.metadata.namespace === ns);
    const from = Number(Buffer.from(query.get('continue') ?? '', 'base64url').toString() || '0');
    const limit = Number(query.get('limit') ?? '0') || all.length;
    const items = all.slice(from, from + limit);
    const more = from + limit < all.length;
    return [
      200,
      {
        apiVersion: 'sidecar-injector.io/v1alpha1',
        kind: 'SidecarTemplateList',
        metadata: { resourceVersion: String(version), ...(more && { continue: Buffer.from(String(from + limit)).toString('base64url') }) },
        items,
      },
    ];
  };
  const templateStatus = (ns: string, name: string, body: string): [number, unknown] => {
    const current = templates.get(`${ns}/${name}`);
    if (current === undefined) return status(404, 'NotFound', `sidecartemplates.sidecar-injector.io "${name}" not found`);
    const obj = JSON.parse(body);
    if (obj.metadata?.resourceVersion !== current.metadata.resourceVersion)
      return status(
        409,
        'Conflict',
        `Operation cannot be fulfilled on sidecartemplates.sidecar-injector.io "${name}": the object has been modified; please apply your changes to the latest version and try again`,
      );
    // The status subresource changes status alone, and never the generation.
    const stored = { ...current, metadata: { ...current.metadata, resourceVersion: nextVersion() }, status: obj.status };
    templates.set(`${ns}/${name}`, stored);
    emit('MODIFIED', stored);
    return [200, stored];
  };
  /** A watch: the events after `rv` replayed, then each new one as it happens, one JSON object a line. */
  const watchTemplates = (res: ServerResponse, ns: string | undefined, query: URLSearchParams): void => {
    const from = Number(query.get('resourceVersion') || '0');
    res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
    res.flushHeaders(); // the apiserver answers a watch at once, before any event
    if (from !== 0 && from < compactedAt) {
      // What the apiserver sends for a resourceVersion etcd no longer has: one ERROR event, then the end.
      res.end(
        `${JSON.stringify({ type: 'ERROR', object: { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: `too old resource version: ${from} (${compactedAt})`, reason: 'Expired', code: 410 } })}\n`,
      );
      return;
    }
    // Without a resourceVersion a watch starts with every object as ADDED; with one, the events after it.
    const replay = from === 0 ? [...templates.values()].map((object) => ({ type: 'ADDED', object })) : events.filter((e) => e.rv > from);
    for (const e of replay) if (ns === undefined || e.object.metadata.namespace === ns) res.write(`${JSON.stringify({ type: e.type, object: e.object })}\n`);
    const watcher = { res, ns };
    watchers.add(watcher);
    res.on('close', () => watchers.delete(watcher));
  };

  const policyStore = new Map<string, any>();
  const policyWrites: string[] = [];
  const GROUP = 'admissionregistration.k8s.io';
  /** Whether `version` serves `resource` now. */
  const serves = (version: string, resource: string): boolean => {
    if (!(resource in PolicyKinds)) return version === 'v1';
    if (resource.startsWith('validating')) return version === 'v1';
    return version === state.policyApi;
  };
  const discovery = (path: string): [number, unknown] | undefined => {
    if (path === `/apis/${GROUP}`) {
      const versions = ['v1', ...(state.policyApi === 'v1beta1' ? ['v1beta1'] : [])].map((v) => ({ groupVersion: `${GROUP}/${v}`, version: v }));
      return [200, { kind: 'APIGroup', apiVersion: 'v1', name: GROUP, versions, preferredVersion: versions[0] }];
    }
    const version = new RegExp(`^/apis/${GROUP.replace(/\./g, '\\.')}/(v1|v1beta1)$`).exec(path)?.[1];
    if (version === undefined) return undefined;
    if (version === 'v1beta1' && state.policyApi !== 'v1beta1') return status(404, 'NotFound', 'the server could not find the requested resource');
    const kinds: Record<string, string> = {
      mutatingwebhookconfigurations: 'MutatingWebhookConfiguration',
      validatingwebhookconfigurations: 'ValidatingWebhookConfiguration',
      ...PolicyKinds,
    };
    const resources = Object.entries(kinds)
      .filter(([name]) => serves(version, name))
      .map(([name, kind]) => ({
        name,
        singularName: kind.toLowerCase(),
        namespaced: false,
        kind,
        verbs: ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'],
      }));
    return [200, { kind: 'APIResourceList', apiVersion: 'v1', groupVersion: `${GROUP}/${version}`, resources }];
  };
  const policyRoute = (req: IncomingMessage, url: URL, body: string): [number, unknown] | undefined => {
    const m = new RegExp(`^/apis/${GROUP.replace(/\./g, '\\.')}/(v1|v1beta1)/([a-z]+)(?:/([^/]+))?$`).exec(url.pathname);
    if (m === null || !(m[2]! in PolicyKinds)) return undefined;
    const [, api, resource, name] = m as unknown as [string, string, keyof typeof PolicyKinds, string | undefined];
    if (!serves(api, resource)) return status(404, 'NotFound', 'the server could not find the requested resource');
    const kind = PolicyKinds[resource];
    const qualified = `${resource}.${GROUP}`;
    if (name === undefined && req.method === 'GET') {
      const match = labelMatcher(url.searchParams.get('labelSelector') ?? '');
      const items = [...policyStore.entries()]
        .filter(([key, obj]) => key.startsWith(`${kind}/`) && match(obj.metadata.labels ?? {}))
        .sort(([a], [b]) => (a < b ? -1 : 1))
        .map(([, obj]) => ({ ...obj, apiVersion: `${GROUP}/${api}` }));
      return [200, { kind: `${kind}List`, apiVersion: `${GROUP}/${api}`, metadata: { resourceVersion: String(version) }, items }];
    }
    if (name === undefined) return status(405, 'MethodNotAllowed', `${req.method} is not supported here`);
    const key = `${kind}/${name}`;
    const current = policyStore.get(key);
    if (req.method === 'GET') return current === undefined ? status(404, 'NotFound', `${qualified} "${name}" not found`) : [200, current];
    if (req.method === 'DELETE') {
      if (current === undefined) return status(404, 'NotFound', `${qualified} "${name}" not found`);
      policyStore.delete(key);
      policyWrites.push(`DELETE ${key}`);
      return [200, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', details: { name, group: GROUP, kind: resource } }];
    }
    if (req.method !== 'PATCH') return status(405, 'MethodNotAllowed', `${req.method} is not supported here`);
    if (req.headers['content-type'] !== 'application/apply-patch+yaml')
      return status(415, 'UnsupportedMediaType', `the fake serves only server-side apply, not ${req.headers['content-type']}`);
    const manager = url.searchParams.get('fieldManager') ?? '';
    if (manager === '') return status(422, 'Invalid', 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch');
    // YAML is a superset of JSON: client-node sends the object as JSON.
    const applied = JSON.parse(body);
    if (applied.apiVersion !== `${GROUP}/${api}` || applied.kind !== kind)
      return status(400, 'BadRequest', `the API version in the data (${applied.apiVersion}) does not match the expected API version (${GROUP}/${version})`);
    if (applied.metadata?.name !== name) return status(400, 'BadRequest', 'the name of the object does not match the name on the URL');
    const invalid = validation.why?.(kind, name);
    if (invalid !== undefined) return status(422, 'Invalid', `${kind}.${GROUP} "${name}" is invalid: ${invalid}`);
    // An apply that creates the object needs create as well as patch (the apiserver's patch handler checks both): asked of grantOnly as CREATE.
    if (current === undefined && rights.granted !== undefined && !rights.granted('CREATE', url.pathname))
      return status(
        403,
        'Forbidden',
        `${qualified} "${name}" is forbidden: User "system:serviceaccount:sidecar-injector:sidecar-injector" cannot create resource "${resource}" in API group "${GROUP}" at the cluster scope`,
      );
    const owner = current?.metadata.managedFields?.[0]?.manager;
    if (owner !== undefined && owner !== manager && url.searchParams.get('force') !== 'true')
      return status(409, 'Conflict', `Apply failed with 1 conflict: conflict with "${owner}": .spec`);
    // One manager owns every field it applies: what it no longer applies is gone, as the apiserver removes fields only that manager owned.
    const same =
      current !== undefined &&
      JSON.stringify({ ...current, metadata: undefined }) === JSON.stringify({ ...applied, metadata: undefined }) &&
      JSON.stringify(current.metadata.labels ?? {}) === JSON.stringify(applied.metadata.labels ?? {}) &&
      JSON.stringify(current.metadata.annotations ?? {}) === JSON.stringify(applied.metadata.annotations ?? {}) &&
      owner === manager;
    if (same) return [200, current];
    const changed = current === undefined || JSON.stringify(current.spec) !== JSON.stringify(applied.spec);
    const stored = {
      ...applied,
      metadata: {
        ...applied.metadata,
        uid: current?.metadata.uid ?? `uid-${name}`,
        generation: current === undefined ? 1 : current.metadata.generation + (changed ? 1 : 0),
        resourceVersion: nextVersion(),
        managedFields: [{ manager, operation: 'Apply', apiVersion: applied.apiVersion, fieldsType: 'FieldsV1' }],
      },
    };
    policyStore.set(key, stored);
    policyWrites.push(`APPLY ${key}`);
    return [current === undefined ? 201 : 200, stored];
  };

  const route = async (req: IncomingMessage, body: string): Promise<[number, unknown]> => {
    if (req.headers.authorization !== `Bearer ${TOKEN}`) return status(401, 'Unauthorized', 'Unauthorized');
    const url = new URL(req.url ?? '/', 'https://x');
    if (forbidden.has(url.pathname)) return status(403, 'Forbidden', `forbidden: User "drift" cannot ${req.method} ${url.pathname}`);
    if (rights.granted !== undefined && !rights.granted(req.method ?? '', url.pathname))
      return status(403, 'Forbidden', `forbidden: User "team-a" cannot ${req.method} ${url.pathname}`);
    const eventPost = req.method === 'POST' && url.pathname.match(/^\/api\/v1\/namespaces\/([^/]+)\/events$/);
    if (eventPost) {
      const event = JSON.parse(body);
      // The apiserver's checks that matter to a client: the namespace of the path, and of the object involved.
      if (event.metadata?.namespace !== undefined && event.metadata.namespace !== eventPost[1])
        return status(400, 'BadRequest', 'the namespace of the provided object does not match the namespace sent on the request');
      if (event.involvedObject?.namespace !== eventPost[1])
        return status(422, 'Invalid', 'involvedObject.namespace: Invalid value: does not match event.namespace');
      const stored = { ...event, metadata: { ...event.metadata, namespace: eventPost[1], resourceVersion: nextVersion() } };
      createdEvents.push(stored);
      return [201, stored];
    }
    const found = (req.method === 'GET' && discovery(url.pathname)) || policyRoute(req, url, body);
    if (found) return found;
    const secret = url.pathname.match(/^\/api\/v1\/namespaces\/([^/]+)\/secrets(?:\/([^/]+))?$/);
    if (secret) return secretRoute(req.method ?? '', secret[1]!, secret[2], body);
    const hookList = url.pathname.match(/^\/apis\/admissionregistration\.k8s\.io\/v1\/(mutating|validating)webhookconfigurations$/);
    if (hookList && req.method === 'GET') {
      const items = [...hooks.entries()].filter(([key]) => key.startsWith(`${hookList[1]}/`)).map(([, obj]) => obj);
      return [
        200,
        {
          kind: `${hookList[1] === 'mutating' ? 'Mutating' : 'Validating'}WebhookConfigurationList`,
          apiVersion: 'admissionregistration.k8s.io/v1',
          metadata: { resourceVersion: String(version) },
          items,
        },
      ];
    }
    const hook = url.pathname.match(/^\/apis\/admissionregistration\.k8s\.io\/v1\/(mutating|validating)webhookconfigurations\/([^/]+)$/);
    if (hook) return hookRoute(req, hook[1] as 'mutating' | 'validating', hook[2]!, body);
    const template = url.pathname.match(TEMPLATES);
    if (template && req.method === 'GET' && template[2] === undefined) return templateList(template[1], url.searchParams);
    if (template && req.method === 'GET') {
      const found = templates.get(`${template[1]}/${template[2]}`);
      return found === undefined ? status(404, 'NotFound', `sidecartemplates.sidecar-injector.io "${template[2]}" not found`) : [200, found];
    }
    if (template && req.method === 'PUT' && template[3] !== undefined) state.beforeStatusWrite?.(template[1]!, template[2]!);
    if (template && req.method === 'PUT' && template[3] !== undefined) return templateStatus(template[1]!, template[2]!, body);
    const configMap = url.pathname.match(/^\/api\/v1\/namespaces\/([^/]+)\/configmaps\/([^/]+)$/);
    if (configMap && req.method === 'GET') {
      const found = objects.get('ConfigMap')!.get(`${configMap[1]}/${configMap[2]}`);
      return found === undefined ? status(404, 'NotFound', `configmaps "${configMap[2]}" not found`) : [200, found];
    }
    const replicaSet = url.pathname.match(/^\/apis\/apps\/v1\/namespaces\/([^/]+)\/replicasets\/([^/]+)$/);
    if (replicaSet && req.method === 'GET') {
      const found = objects.get('ReplicaSet')!.get(`${replicaSet[1]}/${replicaSet[2]}`);
      return found === undefined ? status(404, 'NotFound', `replicasets.apps "${replicaSet[2]}" not found`) : [200, found];
    }
    const namespace = url.pathname.match(/^\/api\/v1\/namespaces\/([^/]+)$/);
    if (namespace && req.method === 'GET') {
      const found = objects.get('Namespace')!.get(`/${namespace[1]}`);
      return found === undefined ? status(404, 'NotFound', `namespaces "${namespace[1]}" not found`) : [200, found];
    }
    const workload = url.pathname.match(/^\/apis\/apps\/v1\/namespaces\/([^/]+)\/(deployments|statefulsets|daemonsets)\/([^/]+)$/);
    if (workload)
      return workloadRoute(req, url.pathname, Object.values(Listed).find((r) => r.plural === workload[2])!.kind, `${workload[1]}/${workload[3]}`, body);
    const list = url.pathname.match(/^\/(api\/v1|apis\/apps\/v1|apis\/batch\/v1)(?:\/namespaces\/([^/]+))?\/([a-z]+)$/);
    const resource = list && Object.values(Listed).find((r) => r.path === list[1] && r.plural === list[3]);
    if (list && resource && req.method === 'GET') return listRoute(resource, list[2], url.searchParams);
    return status(404, 'NotFound', `the server could not find the requested resource (${req.method} ${url.pathname})`);
  };

  const secretRoute = (method: string, ns: string, name: string | undefined, body: string): [number, unknown] => {
    const key = `${ns}/${name}`;
    if (method === 'GET' && name !== undefined) return secrets.has(key) ? [200, secrets.get(key)] : status(404, 'NotFound', `secrets "${name}" not found`);
    if (method === 'POST' && name === undefined) {
      const obj = JSON.parse(body);
      const k = `${ns}/${obj.metadata.name}`;
      if (secrets.has(k)) return status(409, 'AlreadyExists', `secrets "${obj.metadata.name}" already exists`);
      const stored = { ...obj, metadata: { ...obj.metadata, namespace: ns, resourceVersion: nextVersion(), uid: `uid-${version}` } };
      secrets.set(k, stored);
      return [201, stored];
    }
    if (method === 'PUT' && name !== undefined) {
      const obj = JSON.parse(body);
      const current = secrets.get(key);
      if (current === undefined) return status(404, 'NotFound', `secrets "${name}" not found`);
      if (obj.metadata.resourceVersion !== undefined && obj.metadata.resourceVersion !== current.metadata.resourceVersion) {
        return status(
          409,
          'Conflict',
          `Operation cannot be fulfilled on secrets "${name}": the object has been modified; please apply your changes to the latest version and try again`,
        );
      }
      const stored = { ...obj, metadata: { ...obj.metadata, namespace: ns, resourceVersion: nextVersion(), uid: current.metadata.uid } };
      secrets.set(key, stored);
      return [200, stored];
    }
    return status(405, 'MethodNotAllowed', `${method} is not supported here`);
  };

  const listRoute = (resource: (typeof Listed)[keyof typeof Listed], ns: string | undefined, query: URLSearchParams): [number, unknown] => {
    const selector = query.get('fieldSelector') ?? '';
    const match = fieldMatcher(selector);
    if (match === undefined) return status(400, 'BadRequest', `"${selector}" is not a known field selector: only "status.phase"`);
    const all = [...objects.get(resource.kind)!.entries()]
      .filter(([key, obj]) => (ns === undefined || key.startsWith(`${ns}/`)) && match(obj))
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([, obj]) => obj);
    const from = Number(Buffer.from(query.get('continue') ?? '', 'base64url').toString() || '0');
    const limit = Number(query.get('limit') ?? '0') || all.length;
    const items = all.slice(from, from + limit);
    const more = from + limit < all.length;
    const apiVersion = resource.path.replace(/^apis?\//, '');
    return [
      200,
      {
        kind: `${resource.kind}List`,
        apiVersion,
        metadata: { resourceVersion: String(version), ...(more && { continue: Buffer.from(String(from + limit)).toString('base64url') }) },
        items,
      },
    ];
  };

  const workloadRoute = (req: IncomingMessage, path: string, kind: string, key: string, body: string): [number, unknown] => {
    const current = objects.get(kind)!.get(key);
    const plural = `${kind.toLowerCase()}s.apps`;
    if (current === undefined) return status(404, 'NotFound', `${plural} "${key.split('/')[1]}" not found`);
    const rollout = rollouts.get(`${kind}/${key}`) ?? { rollout: 'rolls' as const, step: -1 };
    if (req.method === 'GET') {
      if (rollout.step >= 0) rollout.step++;
      rollouts.set(`${kind}/${key}`, rollout);
      return [200, rollout.step < 0 ? current : rolledTo(current, rollout.rollout, rollout.step)];
    }
    if (req.method !== 'PATCH') return status(405, 'MethodNotAllowed', `${req.method} is not supported here`);
    const contentType = String(req.headers['content-type']);
    patches.push({ path, contentType, body: JSON.parse(body) });
    if (rollout.rollout === 'forbidden')
      return status(
        403,
        'Forbidden',
        `${plural} "${key.split('/')[1]}" is forbidden: User "drift" cannot patch resource "${kind.toLowerCase()}s" in API group "apps" in the namespace "${key.split('/')[0]}"`,
      );
    if (contentType !== 'application/strategic-merge-patch+json') return status(415, 'UnsupportedMediaType', `unexpected patch type ${contentType}`);
    // A strategic merge patch of maps alone (restartedAt's) merges as a JSON merge patch does.
    const patched = mergePatch(structuredClone(current), JSON.parse(body));
    const changed = JSON.stringify(patched.spec) !== JSON.stringify(current.spec);
    patched.metadata = { ...patched.metadata, resourceVersion: nextVersion(), generation: (current.metadata.generation ?? 1) + (changed ? 1 : 0) };
    objects.get(kind)!.set(key, patched);
    rollouts.set(`${kind}/${key}`, { rollout: rollout.rollout, step: 0 });
    return [200, patched];
  };

  const hookRoute = (req: IncomingMessage, kind: 'mutating' | 'validating', name: string, body: string): [number, unknown] => {
    const key = `${kind}/${name}`;
    const current = hooks.get(key);
    const resource = `${kind}webhookconfigurations.admissionregistration.k8s.io`;
    if (current === undefined) return status(404, 'NotFound', `${resource} "${name}" not found`);
    if (req.method === 'GET') return [200, current];
    if (req.method !== 'PATCH') return status(405, 'MethodNotAllowed', `${req.method} is not supported here`);
    if (req.headers['content-type'] !== 'application/json-patch+json')
      return status(415, 'UnsupportedMediaType', `unexpected patch type ${req.headers['content-type']}`);
    let patched: any;
    try {
      patched = applyPatch(structuredClone(current), JSON.parse(body), true, false).newDocument;
    } catch (err) {
      return status(422, 'Invalid', `the server rejected our request due to an error in our request: ${(err as Error).message}`);
    }
    patched.metadata.resourceVersion = nextVersion();
    hooks.set(key, patched);
    recordBundles(kind, patched);
    return [200, patched];
  };

  const server: Server = createServer({ cert: certs.serving.certPem, key: certs.serving.keyPem }, (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'https://x');
      const watching = url.searchParams.get('watch') === 'true' && TEMPLATES.exec(url.pathname);
      if (watching && req.headers.authorization === `Bearer ${TOKEN}` && !forbidden.has(url.pathname)) {
        calls.push({ method: 'WATCH', path: url.pathname, status: 200 });
        watchTemplates(res, watching[1], url.searchParams);
        return;
      }
      void (async () => {
        if (state.latencyMs > 0) await new Promise((r) => setTimeout(r, Math.random() * state.latencyMs));
        const [code, payload] = await route(req, Buffer.concat(chunks).toString('utf8'));
        calls.push({ method: req.method ?? '', path: new URL(req.url ?? '/', 'https://x').pathname, status: code });
        const text = JSON.stringify(payload);
        res.writeHead(code, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
        res.end(text);
      })();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const dir = await mkdtemp(join(tmpdir(), 'fake-apiserver-'));
  const kubeconfig = join(dir, 'kubeconfig');
  await writeFile(kubeconfig, kubeconfigYaml(url, certs.ca.certPem, TOKEN));

  return {
    url,
    kubeconfig,
    calls,
    createdEvents,
    token: TOKEN,
    bundleHistory,
    get latencyMs() {
      return state.latencyMs;
    },
    set latencyMs(v: number) {
      state.latencyMs = v;
    },
    get beforeStatusWrite() {
      return state.beforeStatusWrite;
    },
    set beforeStatusWrite(f) {
      state.beforeStatusWrite = f;
    },
    get failContinuedLists() {
      return state.failContinuedLists;
    },
    set failContinuedLists(n: number) {
      state.failContinuedLists = n;
    },
    get policyApi() {
      return state.policyApi;
    },
    set policyApi(v) {
      state.policyApi = v;
    },
    policy: (kind, name) => policyStore.get(`${kind}/${name}`),
    policies: (kind) =>
      [...policyStore.entries()]
        .filter(([key]) => key.startsWith(`${kind}/`))
        .sort(([a], [b]) => (a < b ? -1 : 1))
        .map(([, obj]) => obj),
    putPolicy: (obj, manager = 'kubectl') =>
      void policyStore.set(`${obj.kind}/${obj.metadata.name}`, {
        ...obj,
        metadata: { ...obj.metadata, generation: 1, resourceVersion: nextVersion(), managedFields: [{ manager, operation: 'Apply' }] },
      }),
    policyWrites,
    secret: (ns, name) => secrets.get(`${ns}/${name}`),
    putSecret: (ns, obj) => secrets.set(`${ns}/${obj.metadata.name}`, { ...obj, metadata: { ...obj.metadata, namespace: ns, resourceVersion: nextVersion() } }),
    webhookConfig: (kind, name) => hooks.get(`${kind}/${name}`),
    putObject: (obj) => {
      const kind = String(obj.kind);
      if (!objects.has(kind)) throw new Error(`the fake API server does not serve ${kind}`);
      objects
        .get(kind)!
        .set(`${obj.metadata.namespace ?? ''}/${obj.metadata.name}`, { ...obj, metadata: { generation: 1, ...obj.metadata, resourceVersion: nextVersion() } });
    },
    object: (kind, namespace, name) => objects.get(kind)?.get(`${namespace}/${name}`),
    setRollout: (kind, namespace, name, rollout) => void rollouts.set(`${kind}/${namespace}/${name}`, { rollout, step: -1 }),
    patches,
    forbid: (path) => void forbidden.add(path),
    grantOnly: (granted) => void (rights.granted = granted),
    invalidate: (why) => void (validation.why = why),
    putWebhookConfig: (kind, obj) => {
      const stored = { ...obj, metadata: { ...obj.metadata, resourceVersion: nextVersion() } };
      hooks.set(`${kind}/${obj.metadata.name}`, stored);
      recordBundles(kind, stored);
    },
    applyTemplate: (obj) => {
      const key = `${obj.metadata.namespace}/${obj.metadata.name}`;
      const current = templates.get(key);
      const changed = current === undefined || JSON.stringify(current.spec) !== JSON.stringify(obj.spec);
      const generation = current === undefined ? 1 : current.metadata.generation + (changed ? 1 : 0);
      const uid = current?.metadata.uid ?? `uid-${version + 1}`;
      // One second per write, as a clock would tick between them: the order of creation is clear.
      const creationTimestamp = current?.metadata.creationTimestamp ?? new Date(Date.UTC(2026, 0, 1) + version * 1000).toISOString().replace(/\.\d+Z$/, 'Z');
      const stored = {
        apiVersion: 'sidecar-injector.io/v1alpha1',
        kind: 'SidecarTemplate',
        ...obj,
        metadata: { ...obj.metadata, uid, generation, creationTimestamp, resourceVersion: nextVersion() },
        ...(current?.status && { status: current.status }),
      };
      templates.set(key, stored);
      emit(current === undefined ? 'ADDED' : 'MODIFIED', stored);
      return stored;
    },
    deleteTemplate: (namespace, name) => {
      const current = templates.get(`${namespace}/${name}`);
      if (current === undefined) return;
      templates.delete(`${namespace}/${name}`);
      emit('DELETED', { ...current, metadata: { ...current.metadata, resourceVersion: nextVersion() } });
    },
    template: (namespace, name) => templates.get(`${namespace}/${name}`),
    writeTemplateStatus: (namespace, name, body) =>
      void templateStatus(
        namespace,
        name,
        JSON.stringify({ metadata: { resourceVersion: templates.get(`${namespace}/${name}`)?.metadata.resourceVersion }, status: body }),
      ),
    compact: () => {
      compactedAt = ++version;
      events.length = 0;
    },
    bookmark: () => {
      for (const w of watchers)
        w.res.write(
          `${JSON.stringify({ type: 'BOOKMARK', object: { apiVersion: 'sidecar-injector.io/v1alpha1', kind: 'SidecarTemplate', metadata: { resourceVersion: String(version) } } })}\n`,
        );
    },
    endWatches: () => {
      for (const w of watchers) w.res.end();
      watchers.clear();
    },
    get watches() {
      return watchers.size;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const w of watchers) w.res.end();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** The kinds `drift` reads, where the API serves them. */
const Listed = {
  pods: { kind: 'Pod', path: 'api/v1', plural: 'pods' },
  replicaSets: { kind: 'ReplicaSet', path: 'apis/apps/v1', plural: 'replicasets' },
  jobs: { kind: 'Job', path: 'apis/batch/v1', plural: 'jobs' },
  configMaps: { kind: 'ConfigMap', path: 'api/v1', plural: 'configmaps' },
  namespaces: { kind: 'Namespace', path: 'api/v1', plural: 'namespaces' },
  deployments: { kind: 'Deployment', path: 'apis/apps/v1', plural: 'deployments' },
  statefulSets: { kind: 'StatefulSet', path: 'apis/apps/v1', plural: 'statefulsets' },
  daemonSets: { kind: 'DaemonSet', path: 'apis/apps/v1', plural: 'daemonsets' },
  cronJobs: { kind: 'CronJob', path: 'apis/batch/v1', plural: 'cronjobs' },
} as const;

/** RFC 7386: objects merge key by key, null deletes, anything else replaces. */
function mergePatch(target: any, patch: any): any {
  if (typeof patch !== 'object' || patch === null || Array.isArray(patch)) return patch;
  const out = typeof target === 'object' && target !== null && !Array.isArray(target) ? target : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

/**
 * The workload as its controller reports it `step` gets after a patch (step 0: the patch's answer),
 * in the status fields kubectl rollout status reads: not yet observed, then half rolled, then done.
 */
function rolledTo(obj: any, rollout: Rollout, step: number): any {
  const generation = obj.metadata.generation;
  const replicas = obj.spec?.replicas ?? 1;
  // Step 1: the controller has not seen the new template: the old status, complete, of the generation before.
  if (step === 0) return obj;
  if (step === 1) return { ...obj, status: { ...obj.status, observedGeneration: generation - 1 } };
  const done = rollout === 'rolls' && step >= 3;
  const observedGeneration = generation;
  switch (obj.kind) {
    case 'Deployment': {
      const conditions =
        rollout === 'deadline'
          ? [
              {
                type: 'Progressing',
                status: 'False',
                reason: 'ProgressDeadlineExceeded',
                message: `ReplicaSet "${obj.metadata.name}-new" has timed out progressing.`,
              },
            ]
          : [];
      const status = done
        ? { replicas, updatedReplicas: replicas, readyReplicas: replicas, availableReplicas: replicas }
        : { replicas: replicas + 1, updatedReplicas: 1, readyReplicas: replicas, availableReplicas: replicas };
      return { ...obj, status: { observedGeneration, ...status, conditions } };
    }
    case 'StatefulSet': {
      const status = done
        ? {
            replicas,
            readyReplicas: replicas,
            updatedReplicas: replicas,
            currentRevision: `${obj.metadata.name}-new`,
            updateRevision: `${obj.metadata.name}-new`,
          }
        : {
            replicas,
            readyReplicas: replicas - 1,
            updatedReplicas: 1,
            currentRevision: `${obj.metadata.name}-old`,
            updateRevision: `${obj.metadata.name}-new`,
          };
      return { ...obj, status: { observedGeneration, ...status } };
    }
    default: {
      const desired = obj.status?.desiredNumberScheduled ?? 2;
      const status = done
        ? { updatedNumberScheduled: desired, numberAvailable: desired, numberReady: desired }
        : { updatedNumberScheduled: 1, numberAvailable: desired - 1, numberReady: desired - 1 };
      return { ...obj, status: { ...obj.status, observedGeneration, currentNumberScheduled: desired, desiredNumberScheduled: desired, ...status } };
    }
  }
}

/** `status.phase=X` and `status.phase!=X` terms joined by commas, as the apiserver accepts for pods; undefined for anything else. */
function fieldMatcher(selector: string): ((obj: any) => boolean) | undefined {
  const terms = selector === '' ? [] : selector.split(',').map((t) => /^status\.phase(!=|==?)(.*)$/.exec(t));
  if (terms.some((t) => t === null)) return undefined;
  return (obj) => terms.every((t) => (obj.status?.phase === t![2]) === (t![1] !== '!='));
}

/** A label selector of equality and existence terms (`a=b`, `a==b`, `a!=b`, `a`, `!a`, comma-joined), as the apiserver reads them. */
function labelMatcher(selector: string): (labels: Record<string, string>) => boolean {
  const terms = selector === '' ? [] : selector.split(',');
  return (labels) =>
    terms.every((term) => {
      const m = /^([^!=]+)(!=|==|=)(.*)$/.exec(term);
      if (m !== null) return (labels[m[1]!] === m[3]) === (m[2] !== '!=');
      return term.startsWith('!') ? !(term.slice(1) in labels) : term in labels;
    });
}

function status(code: number, reason: string, message: string): [number, unknown] {
  return [code, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code }];
}

/** A kubeconfig with one cluster (trusting `caPem`), one token user and one context. */
export function kubeconfigYaml(server: string, caPem: string, token: string, namespace = 'default'): string {
  return [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    `- name: fake`,
    `  cluster: {server: "${server}", certificate-authority-data: "${Buffer.from(caPem).toString('base64')}"}`,
    'users:',
    `- name: fake`,
    `  user: {token: "${token}"}`,
    'contexts:',
    `- name: fake`,
    `  context: {cluster: fake, user: fake, namespace: ${namespace}}`,
    'current-context: fake',
    '',
  ].join('\n');
}

/** A webhook configuration as manifests/ ships it: two entries would be fine too, caBundle empty. */
export function webhookConfigObject(kind: 'mutating' | 'validating', name: string, hooks = 1): any {
  const path = kind === 'mutating' ? '/mutate' : '/validate';
  return {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: kind === 'mutating' ? 'MutatingWebhookConfiguration' : 'ValidatingWebhookConfiguration',
    metadata: { name },
    webhooks: Array.from({ length: hooks }, (_, i) => ({
      name: `${kind}-${i}.sidecar-injector.io`,
      clientConfig: { service: { name: 'sidecar-injector', namespace: 'sidecar-injector', path, port: 443 } },
      rules: [{ operations: ['CREATE'], apiGroups: [''], apiVersions: ['v1'], resources: ['pods'] }],
      sideEffects: 'None',
      admissionReviewVersions: ['v1', 'v1beta1'],
    })),
  };
}
