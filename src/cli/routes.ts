import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { InjectorError } from '../errors.js';
import { isObject, type JsonObject } from '../kube/types.js';

/**
 * Which of the injector's webhooks the apiserver calls for a pod CREATE, decided as the apiserver
 * decides it: a webhook is called when its namespaceSelector matches the labels of the pod's
 * namespace and its objectSelector matches the pod's labels (for a validating webhook, the labels
 * of the pod after every mutation). `inject` and `explain` read the shipped configurations, so
 * they give the verdict a cluster installed from this repository gives.
 */

export type Labels = Readonly<Record<string, string>>;

/** metav1.LabelSelector; an absent or empty selector matches everything. */
export interface LabelSelector {
  readonly matchLabels?: Labels;
  readonly matchExpressions?: readonly { readonly key: string; readonly operator: string; readonly values?: readonly string[] }[];
}

/** One webhook of the shipped configurations, as far as routing goes. */
export interface Webhook {
  readonly name: string;
  readonly kind: 'mutating' | 'validating';
  /** clientConfig.service.path: the endpoint the review is sent to. */
  readonly path: string;
  readonly namespaceSelector?: LabelSelector;
  readonly objectSelector?: LabelSelector;
}

/** The webhook configurations `kubectl apply -k manifests/` installs. */
export const SHIPPED_WEBHOOKS = join('manifests', 'base', 'webhooks.yaml');

/**
 * The label the apiserver puts on every namespace, with its name as the value (Kubernetes 1.22+,
 * NamespaceDefaultLabelName), so a namespaceSelector can name namespaces.
 */
export const NAMESPACE_NAME_LABEL = 'kubernetes.io/metadata.name';

/** The labels a namespace has: the automatic name label, plus those given (`--namespace-labels`). */
export function namespaceLabels(namespace: string, given: Labels = {}): Labels {
  return { ...given, [NAMESPACE_NAME_LABEL]: namespace };
}

/** The webhooks of `kind` that receive a pod CREATE in a namespace with these labels; the apiserver calls them in this order. */
export function receivingWebhooks(webhooks: readonly Webhook[], kind: Webhook['kind'], namespace: Labels, pod: Labels): Webhook[] {
  return webhooks.filter((w) => w.kind === kind && matchesSelector(w.namespaceSelector, namespace) && matchesSelector(w.objectSelector, pod));
}

/** True when some webhook's namespaceSelector takes pods of this namespace at all. */
export function namespaceReceives(webhooks: readonly Webhook[], namespace: Labels): boolean {
  return webhooks.some((w) => matchesSelector(w.namespaceSelector, namespace));
}

/**
 * Evaluates a label selector as apimachinery's LabelSelectorAsSelector does: every matchLabels pair
 * and every expression must hold; NotIn and DoesNotExist hold for a missing key.
 * (To be replaced by the shared evaluator in src/kube/selectors.ts when it lands.)
 */
export function matchesSelector(selector: LabelSelector | undefined, labels: Labels): boolean {
  if (selector === undefined) return true;
  const has = (key: string): boolean => Object.hasOwn(labels, key);
  for (const [key, value] of Object.entries(selector.matchLabels ?? {})) {
    if (!has(key) || labels[key] !== value) return false;
  }
  for (const e of selector.matchExpressions ?? []) {
    const values = e.values ?? [];
    const ok =
      e.operator === 'In' ? has(e.key) && values.includes(labels[e.key]!)
      : e.operator === 'NotIn' ? !has(e.key) || !values.includes(labels[e.key]!)
      : e.operator === 'Exists' ? has(e.key)
      : e.operator === 'DoesNotExist' ? !has(e.key)
      : false;
    if (!ok) return false;
  }
  return true;
}

/** Reads the webhooks of the Mutating- and ValidatingWebhookConfigurations in a YAML file. */
export function parseWebhooks(text: string, source: string): Webhook[] {
  const out: Webhook[] = [];
  for (const doc of parseAllDocuments(text)) {
    const value: unknown = doc.toJS();
    if (!isObject(value)) continue;
    const kind = value['kind'] === 'MutatingWebhookConfiguration' ? 'mutating' : value['kind'] === 'ValidatingWebhookConfiguration' ? 'validating' : undefined;
    if (kind === undefined || !Array.isArray(value['webhooks'])) continue;
    for (const w of value['webhooks'] as JsonObject[]) {
      const service = (w['clientConfig'] as { service?: { path?: unknown } } | undefined)?.service;
      if (typeof w['name'] !== 'string' || typeof service?.path !== 'string') throw new InjectorError('INPUT_INVALID', [source, `webhook ${String(w['name'])} has no clientConfig.service.path`]);
      out.push({
        name: w['name'],
        kind,
        path: service.path,
        ...(isObject(w['namespaceSelector']) && { namespaceSelector: w['namespaceSelector'] as LabelSelector }),
        ...(isObject(w['objectSelector']) && { objectSelector: w['objectSelector'] as LabelSelector }),
      });
    }
  }
  return out;
}

/**
 * The webhooks shipped with this copy of the injector: manifests/base/webhooks.yaml of the package this
 * module belongs to (found upwards from here, so it works from src/ under tsx and from dist/).
 */
export async function shippedWebhooks(): Promise<Webhook[]> {
  const file = join(packageRoot(dirname(fileURLToPath(import.meta.url))), SHIPPED_WEBHOOKS);
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new InjectorError('INPUT_INVALID', [file, `${(err as Error).message} (the shipped webhook configurations decide which pods are sent to the injector)`], { cause: err });
  }
  return parseWebhooks(text, file);
}

function packageRoot(dir: string): string {
  for (let d = dir; ; d = dirname(d)) {
    if (existsSync(join(d, 'package.json'))) return d;
    if (dirname(d) === d) return dir;
  }
}
