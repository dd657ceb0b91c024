import { Keys } from '../inject/keys.js';
import type { Container, NamedItem, VolumeMount } from '../kube/types.js';
import { escapeToken } from '../patch/pointer.js';
import { overrideKey } from '../templates/override-keys.js';
import { QUANTITY_PATTERN } from '../templates/schema.js';
import { NativeSidecar, SERVICE_ACCOUNT_TOKEN_PATH, type CompiledTemplate } from '../templates/template.js';
import { enforcesRequired, matchConstraints, type Names } from './bindings.js';
import { withinBounds } from './bounds.js';
import { celObject, celString, Definition, placeholderCel } from './cel.js';
import { celList, IN_JOB, OPTED_IN, OPTED_IN_BY_BINDINGS, requiredHere, requiredIn, selectedExpr, type SetContext } from './selection.js';

/**
 * A template's MutatingAdmissionPolicy: one JSONPatch mutation that adds what the pod lacks, where
 * the webhook puts it whichever policy runs first (test/policy/parity*.test.ts).
 */

/**
 * The volume of the pod's own ServiceAccount token, found by its mount in the pod's own containers
 * and then init containers (sidecars left out), as withPodToken finds it; "" when none mounts it.
 */
const POD_TOKEN = `((object.spec.containers + object.spec.?initContainers.orValue([])).filter(c, !(c.name in variables.sidecars)).map(c, c.?volumeMounts.orValue([]).filter(m, m.mountPath == ${celString(SERVICE_ACCOUNT_TOKEN_PATH)}).map(m, m.name)).flatten() + [""])[0]`;

/** `serviceAccountToken: true`: the template's containers mount the pod's token, where the pod has one (test/policy/parity-token.test.ts). */
function podToken(t: CompiledTemplate): boolean {
  return t.render({ namespace: 'default', podName: 'p', serviceAccountName: 'default', labels: {}, annotations: {} }).podToken === true;
}

/**
 * A required template's policy is bound to every pod of its namespaces (requiredBinding), as the
 * required webhooks are: a pod that opted in selects as /mutate selects (the template among the
 * others, in its order), any other pod gets the required templates alone, as /mutate/required
 * gives them (test/policy/parity-required.test.ts).
 */
export function mutatingPolicy(t: CompiledTemplate, policy: string, context: SetContext, names: Names): Record<string, unknown> {
  const name = celString(t.name);
  const ops = (native: boolean): string => `(${patchGroups(t, native, context).join(' + ')})`;
  const patch = t.nativeMode === NativeSidecar.JobsOnly ? `(variables.inJob ? ${ops(true)} : ${ops(false)})` : ops(t.nativeMode === NativeSidecar.Always);
  const required = t.required !== undefined && enforcesRequired(names.options);
  // Every condition runs (withinBounds says why): the one that iterates carries the bounds first.
  const within = withinBounds(names.options.limits);
  const matchConditions = required
    ? [
        { name: 'required-here', expression: requiredIn(t.required?.namespaceSelector) },
        { name: 'within-bounds', expression: within },
      ]
    : [
        { name: 'opted-in', expression: OPTED_IN },
        { name: 'selected', expression: `${within} && ${name} in ${selectedExpr(context)}` },
      ];
  const selected = required
    ? [
        { name: 'optedIn', expression: `${OPTED_IN_BY_BINDINGS} && (${OPTED_IN})` },
        { name: 'selected', expression: `variables.optedIn ? ${selectedExpr(context)} : ${requiredHere(context)}` },
      ]
    : [{ name: 'selected', expression: selectedExpr(context) }];
  return {
    apiVersion: names.apiVersion('MutatingAdmissionPolicy'),
    kind: 'MutatingAdmissionPolicy',
    metadata: names.metadata(policy, { 'sidecar-injector.io/template-version': t.version }),
    spec: {
      failurePolicy: 'Fail',
      // Re-run when a later policy or webhook changed the pod; every patch adds only what is missing, so a second run adds nothing.
      reinvocationPolicy: 'IfNeeded',
      matchConstraints: matchConstraints(names.options),
      matchConditions,
      variables: [
        ...selected,
        { name: 'inJob', expression: IN_JOB },
        // The selected templates before and after this one: their items stay ahead of (behind) this one's, as the webhook orders them.
        { name: 'earlier', expression: `lists.range(variables.selected.indexOf(${name})).map(i, variables.selected[i])` },
        { name: 'later', expression: `lists.range(size(variables.selected)).filter(i, i > variables.selected.indexOf(${name})).map(i, variables.selected[i])` },
        { name: 'names', expression: `object.spec.containers.map(c, c.name) + object.spec.?initContainers.orValue([]).map(c, c.name)` },
        { name: 'sidecars', expression: `variables.selected.filter(t, t in ${context.containers}).map(t, ${context.containers}[t]).flatten()` },
        { name: 'apps', expression: appsExpr(t) },
        ...(podToken(t) ? [{ name: 'podToken', expression: POD_TOKEN }] : []),
        ...overrideVariables(t),
      ],
      mutations: [{ patchType: 'JSONPatch', jsonPatch: { expression: patch } }],
    },
  };
}

/** Which of the pod's containers (by index) get the template's env and mounts: not sidecars, allowed by appContainers and the pod's annotation. */
function appsExpr(t: CompiledTemplate): string {
  const apps = t.render({ namespace: 'default', podName: 'p', serviceAccountName: 'default', labels: {}, annotations: {} }).appContainers;
  const annotation = `object.metadata.?annotations[?${celString(Keys.appContainers)}]`;
  const conditions = ['!(c.name in variables.sidecars)', `(!${annotation}.hasValue() || c.name in ${annotation}.value().split(",").map(n, n.trim()))`];
  if (apps?.include !== undefined) conditions.push(`c.name in ${celList(apps.include)}`);
  if (apps?.exclude !== undefined) conditions.push(`!(c.name in ${celList(apps.exclude)})`);
  return `object.spec.containers.transformList(i, c, ${conditions.join(' && ')}, i)`;
}

/** The JSON patch of one template as CEL lists of JSONPatch, to concatenate. */
function patchGroups(t: CompiledTemplate, native: boolean, context: SetContext): string[] {
  const groups: string[] = [];
  const sidecars = native ? t.spec.containers.map((c) => ({ ...c, restartPolicy: 'Always' })) : [];
  const anchored = typeof t.placement === 'object' ? t.placement : undefined;
  const init = [...t.spec.initContainers, ...(anchored === undefined ? sidecars : [])];
  const regular = native ? [] : t.spec.containers;
  if (init.length + sidecars.length > 0) groups.push(INIT_PARENT);
  // Native sidecars next to a named init container first: their index is read from the pod before
  // the insertions at the head (test/policy/parity-native-placement.test.ts).
  if (anchored !== undefined && sidecars.length > 0) {
    const byTemplate = `(variables.inJob ? ${context.anchoredNativeInJobs} : ${context.anchoredNative})`;
    const list = 'object.spec.?initContainers.orValue([])';
    const later = `variables.later.filter(t, t in ${byTemplate} && !(t in ${context.anchors} && ${context.anchors}[t] in ${list}.map(c, c.name))).map(t, ${byTemplate}[t]).flatten()`;
    groups.push(
      containerOps(
        'initContainers',
        sidecars,
        nextTo(
          anchored,
          list,
          tailOf(list, later, (item) => `${item}.name`),
        ),
        podFields(t),
      ),
    );
  }
  if (init.length > 0) groups.push(containerOps('initContainers', init, headIndex('initContainers', context.firstInit), podFields(t)));
  if (t.spec.volumes.length > 0)
    groups.push(namedOps('/spec/volumes', 'object.spec.?volumes.orValue([])', t.spec.volumes, 'Object.spec.volumes', Definition.volume, context.volumes));
  if (t.spec.imagePullSecrets.length > 0)
    groups.push(
      namedOps(
        '/spec/imagePullSecrets',
        'object.spec.?imagePullSecrets.orValue([])',
        t.spec.imagePullSecrets,
        'Object.spec.imagePullSecrets',
        Definition.reference,
        context.pullSecrets,
      ),
    );
  if (t.spec.env.length > 0)
    groups.push(appOps('env', t.spec.env, context.env, (e) => `!(${celString(e.name)} in c.?env.orValue([]).map(x, x.name))`, 'name', Definition.env));
  if (t.spec.volumeMounts.length > 0) {
    const absent = (m: NamedItem): string => {
      const mount = m as VolumeMount;
      return `!c.?volumeMounts.orValue([]).exists(x, x.name == ${celString(mount.name)} || x.mountPath == ${celString(mount.mountPath)})`;
    };
    groups.push(appOps('volumeMounts', t.spec.volumeMounts, context.mounts, absent, 'mountPath', Definition.volumeMount));
  }
  // After the env and mounts: their operations address the application containers by their index before any insertion.
  if (regular.length > 0) {
    // Ahead of the later templates placed last, and of those placed next to a container the pod lacks.
    const later = `variables.later.filter(t, t in ${context.lastContainers} && !(t in ${context.anchors} && ${context.anchors}[t] in variables.names)).map(t, ${context.lastContainers}[t]).flatten()`;
    const tail = tailOf('object.spec.containers', later, (item) => `${item}.name`);
    const at =
      t.placement === 'first'
        ? headIndex('containers', context.firstContainers)
        : typeof t.placement === 'object'
          ? nextTo(t.placement, 'object.spec.containers', tail)
          : tail;
    groups.push(containerOps('containers', regular, at, podFields(t)));
  }
  for (const [field, map] of [
    ['labels', t.spec.labels],
    ['annotations', t.spec.annotations],
  ] as const) {
    const keys = Object.entries(map);
    if (keys.length > 0) groups.push(keyOps(field, keys));
  }
  return groups.length === 0 ? ['[]'] : groups;
}

/**
 * Where this template's items go at the head of a list: after the leading run of items that belong
 * to the templates selected earlier (whichever policy ran first, the webhook's order results). The
 * pod's own items of such a name count too: see the known difference in docs/policies.md.
 */
function headIndex(field: 'containers' | 'initContainers', byTemplate: string): string {
  const list = `object.spec.?${field}.orValue([])`;
  const earlier = `variables.earlier.filter(t, t in ${byTemplate}).map(t, ${byTemplate}[t]).flatten()`;
  return headOf(list, earlier, (item) => `${item}.name`);
}

/** Where at the tail: ahead of the trailing run of items that belong to the templates selected later. */
function tailIndex(list: string, key: (item: string) => string, byTemplate: string): string {
  const later = `variables.later.filter(t, t in ${byTemplate}).map(t, ${byTemplate}[t]).flatten()`;
  return tailOf(list, later, key);
}

/** Before or after the named container, as placeItems puts it; where `last` would when the pod has none of that name. */
function nextTo(placement: { readonly before: string } | { readonly after: string }, list: string, tail: string): string {
  const index = `${list}.map(c, c.name).indexOf(${celString('before' in placement ? placement.before : placement.after)})`;
  return `(${index} >= 0 ? ${index}${'before' in placement ? '' : ' + 1'} : ${tail})`;
}

/** One past the last item of `list` whose key is not in `names` (0 when there is none): O(n). */
function tailOf(list: string, names: string, key: (item: string) => string): string {
  return `(lists.range(size(${list})).filter(k, !(${key(`${list}[k]`)} in ${names})).map(k, k + 1) + [0]).max()`;
}

/** The first item of `list` whose key is not in `names` (size when there is none): O(n). */
function headOf(list: string, names: string, key: (item: string) => string): string {
  return `(lists.range(size(${list})).filter(k, !(${key(`${list}[k]`)} in ${names})) + [size(${list})]).min()`;
}

/**
 * Each container the pod lacks by name (in either list), inserted at one index in reverse order so
 * that they keep the template's order there (a missing initContainers list is INIT_PARENT's). One value per
 * operation: the apiserver converts a typed object, not a list of them.
 */
function containerOps(field: 'containers' | 'initContainers', containers: readonly Container[], at: string, fields: PodFields): string {
  const type = `Object.spec.${field}`;
  const ops = [...containers]
    .reverse()
    .map(
      (c) =>
        `(${celString(c.name)} in variables.names ? [] : [JSONPatch{op: "add", path: "/spec/${field}/" + string(${at}), value: ${celObject(c, type, Definition.container, fields(c, type))}}])`,
    );
  return ops.join(' + ');
}

/** The fields of an added container that the pod decides, as CEL: its token mount, its first container's overridden requests. */
type PodFields = (c: Container, type: string) => Record<string, string>;

function podFields(t: CompiledTemplate): PodFields {
  const token = podToken(t);
  const first = t.spec.containers[0]?.name;
  const overrides = t.overrides.filter((f): f is QuantityOverride => f === 'cpu' || f === 'memory');
  return (c, type) => ({
    ...(token ? tokenMounts(c, type) : {}),
    ...(c.name === first && overrides.length > 0 ? { resources: overriddenResources(c, type, overrides) } : {}),
  });
}

export type QuantityOverride = 'cpu' | 'memory';

/** The annotation value of an override, trimmed ("" when absent), and whether it is set and valid: a Kubernetes quantity above zero, as quantityRule checks it. */
function overrideVariables(t: CompiledTemplate): { name: string; expression: string }[] {
  return t.overrides
    .filter((f) => f === 'cpu' || f === 'memory')
    .flatMap((f) => {
      const annotation = `object.metadata.?annotations[?${celString(overrideKey(t.name, f))}]`;
      return [
        { name: f, expression: `${annotation}.orValue("").trim()` },
        { name: `${f}Set`, expression: `${annotation}.hasValue()` },
        {
          name: `${f}Ok`,
          expression: `variables.${f}Set && variables.${f}.matches(${celString(QUANTITY_PATTERN)}) && !variables.${f}.startsWith("-") && isQuantity(variables.${f}) && quantity(variables.${f}).isGreaterThan(quantity("0"))`,
        },
      ];
    });
}

/**
 * The first container's resources with the pod's valid overrides (withRequest): the request set,
 * a template limit below it raised to it. A request the template lacks is added only when overridden
 * (test/policy/parity-overrides.test.ts).
 */
function overriddenResources(c: Container, type: string, overrides: readonly QuantityOverride[]): string {
  const resources = (c['resources'] ?? {}) as { requests?: Record<string, string>; limits?: Record<string, string> };
  const requests = resources.requests ?? {};
  const limits = resources.limits;
  const overridden = (k: string): boolean => (overrides as readonly string[]).includes(k);
  const entries = [
    ...Object.entries(requests).map(([k, v]) =>
      overridden(k) ? `${celString(k)}: variables.${k}Ok ? variables.${k} : ${celString(v)}` : `${celString(k)}: ${celString(v)}`,
    ),
    ...overrides.filter((f) => !Object.hasOwn(requests, f)).map((f) => `?${celString(f)}: variables.${f}Ok ? optional.of(variables.${f}) : optional.none()`),
  ];
  const raised = (k: string, v: string): string =>
    overridden(k)
      ? `${celString(k)}: variables.${k}Ok && quantity(variables.${k}).isGreaterThan(quantity(${celString(v)})) ? variables.${k} : ${celString(v)}`
      : `${celString(k)}: ${celString(v)}`;
  const fields: Record<string, string> = { requests: `{${entries.join(', ')}}` };
  if (limits !== undefined)
    fields['limits'] = `{${Object.entries(limits)
      .map(([k, v]) => raised(k, v))
      .join(', ')}}`;
  return celObject(resources, `${type}.resources`, 'V1ResourceRequirements', fields);
}

/** The missing initContainers list, added before any insertion into it (once per policy). */
const INIT_PARENT = `(has(object.spec.initContainers) ? [] : [JSONPatch{op: "add", path: "/spec/initContainers", value: []}])`;

/**
 * A container's volumeMounts with the pod's token mount (withTokenMount), unless the template
 * mounts something at its path: the pod's volume is known per pod only.
 */
function tokenMounts(c: Container, type: string): Record<string, string> {
  const own = c.volumeMounts ?? [];
  if (own.some((m) => m.mountPath === SERVICE_ACCOUNT_TOKEN_PATH)) return {};
  const mount = `${type}.volumeMounts{name: variables.podToken, mountPath: ${celString(SERVICE_ACCOUNT_TOKEN_PATH)}, readOnly: true}`;
  const listed = `[${own.map((m) => celObject(m as unknown as Record<string, unknown>, `${type}.volumeMounts`, Definition.volumeMount)).join(', ')}]`;
  return { volumeMounts: `${listed} + (variables.podToken != "" ? [${mount}] : [])` };
}

/** Volumes or pull secrets the pod lacks by name, ahead of those of later templates. */
function namedOps(path: string, list: string, items: readonly NamedItem[], type: string, definition: Definition, byTemplate: string): string {
  const parent = `(has(object.spec.${path.split('/').pop()}) ? [] : [JSONPatch{op: "add", path: ${celString(path)}, value: []}])`;
  const at = tailIndex(list, (item) => `${item}.name`, byTemplate);
  const ops = [...items]
    .reverse()
    .map(
      (item) =>
        `(${list}.exists(x, x.name == ${celString(item.name)}) ? [] : [JSONPatch{op: "add", path: ${celString(`${path}/`)} + string(${at}), value: ${celObject(item, type, definition)}}])`,
    );
  return [parent, ...ops].join(' + ');
}

/** Env vars or mounts for each application container that lacks them. */
function appOps(
  field: 'env' | 'volumeMounts',
  items: readonly NamedItem[],
  byTemplate: string,
  absent: (item: NamedItem) => string,
  key: string,
  definition: Definition,
): string {
  const list = `c.?${field}.orValue([])`;
  const at = tailOf(list, `variables.later.filter(t, t in ${byTemplate}).map(t, ${byTemplate}[t]).flatten()`, (item) => `${item}.${key}`);
  const path = `"/spec/containers/" + string(i) + "/${field}"`;
  const parent = `(has(c.${field}) ? [] : [JSONPatch{op: "add", path: ${path}, value: []}])`;
  const ops = [...items]
    .reverse()
    .map(
      (item) =>
        `(${absent(item)} ? [JSONPatch{op: "add", path: ${path} + "/" + string(${at}), value: ${celObject(item, `Object.spec.containers.${field}`, definition)}}] : [])`,
    );
  return `object.spec.containers.transformList(i, c, i in variables.apps, ${[parent, ...ops].join(' + ')}).flatten()`;
}

/** Labels or annotations the pod lacks (its own value wins), with the map added when missing. */
function keyOps(field: 'labels' | 'annotations', entries: readonly (readonly [string, string])[]): string {
  const parent = `(has(object.metadata.${field}) ? [] : [JSONPatch{op: "add", path: "/metadata/${field}", value: {}}])`;
  const ops = entries.map(
    ([key, value]) =>
      `(has(object.metadata.${field}) && ${celString(key)} in object.metadata.${field} ? [] : [JSONPatch{op: "add", path: ${celString(`/metadata/${field}/${escapeToken(key)}`)}, value: ${placeholderCel(value)}}])`,
  );
  return [parent, ...ops].join(' + ');
}
