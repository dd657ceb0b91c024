import { setFor, type TemplateHistory, type TemplateSet } from './load.js';
import { digestOf } from './template.js';

export type { TemplateHistory };

/** How many earlier views of one namespace (or of the cluster-wide set) are remembered, however short their lives were. */
export const SETS_KEPT = 8;
/** How many earlier views are remembered in all; past it, the view that remembers the most forgets its oldest. */
export const VIEWS_KEPT = 512;
/** How many template versions `knows` remembers in all: thousands of edits, a few hundred KiB at most. */
export const VERSIONS_KEPT = 4096;

export interface HistoryOptions {
  /** How long a replaced set is still accepted, and how long after start unversioned statuses are. */
  readonly windowMs: number;
  /** Asks for the templates directory to be read again (debounced by the caller). */
  readonly onUnknownVersion?: () => void;
  readonly now?: () => number;
}

/** The key of the view every namespace without templates of its own sees (no namespace name holds a NUL). */
const CLUSTER = '\0cluster';

/** An earlier view of one key: the set its pods were judged against, its digest, and until when it is accepted. */
interface Earlier {
  readonly set: TemplateSet;
  readonly digest: string;
  readonly until: number;
}

/** What is remembered for one key: its earlier views, newest first, and the history object handed out for it until `until`. */
interface ViewHistory {
  earlier: Earlier[];
  history?: TemplateHistory;
  until: number;
}

/**
 * Keeps the sets served recently and hands out, for each review, the current set with a frozen view
 * of that history. History is kept per view: each namespace with templates of its own (now, or in
 * an earlier view still remembered) has its own earlier views, and every other namespace shares
 * the cluster-wide set's. A change in one namespace adds an earlier view to that namespace alone, so
 * a team's churn never ages out another namespace's history (test/templates/history.test.ts,
 * "churn"). A namespace's `history` object (its generation for the answer cache) changes exactly
 * when a verdict there could: its view replaced, one of its earlier views leaving the window, or the
 * end of the window for unversioned statuses. Nothing here is computed per review but a clock read.
 */
export class SetHistory {
  readonly #options: HistoryOptions;
  readonly #now: () => number;
  readonly #started: number;
  readonly #views = new Map<string, ViewHistory>();
  /** `namespace\0name\0version` of every template served, by the template's namespace (empty for a file), oldest first. */
  readonly #versions = new Map<string, Set<string>>();
  #versionCount = 0;
  #current: TemplateSet;
  #view: TemplateSet;
  #viewUntil = 0;

  constructor(first: TemplateSet, options: HistoryOptions) {
    this.#options = options;
    this.#now = options.now ?? Date.now;
    this.#started = this.#now();
    this.#current = first;
    this.#learn(first);
    this.#view = this.#makeView();
  }

  /** The set for one review: the current one, each namespace's view carrying its history as it stands now. */
  current(): TemplateSet {
    if (this.#now() >= this.#viewUntil) this.#view = this.#makeView();
    return this.#view;
  }

  /** Makes `next` the current set; each view it changes remembers the one it replaces for the window. */
  replace(next: TemplateSet): void {
    const now = this.#now();
    const until = now + this.#options.windowMs;
    const previous = this.#current;
    const keys = new Set([CLUSTER, ...(previous.namespaces?.keys() ?? []), ...(next.namespaces?.keys() ?? []), ...this.#views.keys()]);
    for (const key of keys) {
      const before = viewDigest(previous, key);
      const after = viewDigest(next, key);
      if (before === after) continue;
      const kept = this.#views.get(key) ?? { earlier: [], until: 0 };
      kept.earlier = [{ set: viewOf(previous, key), digest: before, until }, ...kept.earlier].filter((e) => e.until > now && e.digest !== after).slice(0, SETS_KEPT);
      delete kept.history;
      this.#views.set(key, kept);
    }
    this.#current = next;
    this.#trim();
    this.#learn(next);
    this.#view = this.#makeView();
  }

  /** At most VIEWS_KEPT earlier views in all: the view that remembers the most forgets its oldest first, so a churning namespace pays for its own churn. */
  #trim(): void {
    let total = 0;
    for (const v of this.#views.values()) total += v.earlier.length;
    while (total > VIEWS_KEPT) {
      let most: ViewHistory | undefined;
      for (const v of this.#views.values()) if (most === undefined || v.earlier.length > most.earlier.length) most = v;
      most!.earlier.pop();
      delete most!.history;
      total--;
    }
  }

  #learn(set: TemplateSet): void {
    const templates = [set, ...(set.namespaces?.values() ?? [])].flatMap((s) => [...s.templates.values()]);
    for (const t of templates) {
      const namespace = t.namespace ?? '';
      const key = versionKey(t.namespace, t.name, t.version);
      const own = this.#versions.get(namespace) ?? new Set<string>();
      this.#versions.set(namespace, own);
      if (own.delete(key)) this.#versionCount--; // re-added last: the most recently served stay longest
      own.add(key);
      this.#versionCount++;
    }
    // Past VERSIONS_KEPT, the namespace that holds the most versions forgets its oldest.
    while (this.#versionCount > VERSIONS_KEPT) {
      let most: Set<string> | undefined;
      for (const own of this.#versions.values()) if (most === undefined || own.size > most.size) most = own;
      for (const oldest of most!) {
        most!.delete(oldest);
        break;
      }
      this.#versionCount--;
    }
  }

  #makeView(): TemplateSet {
    const now = this.#now();
    const unversionedUntil = this.#started + this.#options.windowMs;
    const acceptsUnversioned = now < unversionedUntil;
    this.#viewUntil = Number.POSITIVE_INFINITY;
    for (const [key, kept] of this.#views) {
      if (kept.history !== undefined && now < kept.until) {
        this.#viewUntil = Math.min(this.#viewUntil, kept.until);
        continue;
      }
      kept.earlier = kept.earlier.filter((e) => e.until > now);
      // A namespace with no templates of its own and nothing left to remember sees the cluster-wide view again.
      if (key !== CLUSTER && kept.earlier.length === 0 && !this.#current.namespaces?.has(key)) {
        this.#views.delete(key);
        continue;
      }
      const ends = [...kept.earlier.map((e) => e.until), ...(acceptsUnversioned ? [unversionedUntil] : [])];
      kept.until = ends.length === 0 ? Number.POSITIVE_INFINITY : Math.min(...ends);
      kept.history = this.#historyOf(kept.earlier.map((e) => e.set), acceptsUnversioned);
      this.#viewUntil = Math.min(this.#viewUntil, kept.until);
    }
    const cluster = this.#viewHistory(CLUSTER, acceptsUnversioned, unversionedUntil);
    const named = new Set([...(this.#current.namespaces?.keys() ?? []), ...this.#views.keys()]);
    named.delete(CLUSTER);
    const namespaces = new Map(
      [...named].map((ns) => {
        const history = this.#viewHistory(ns, acceptsUnversioned, unversionedUntil);
        return [ns, Object.freeze({ ...setFor(this.#current, ns), history })] as const;
      }),
    );
    return Object.freeze({ ...this.#current, history: cluster, ...(named.size > 0 && { namespaces }) });
  }

  /** The history object of `key`, the one made before while nothing of it changed. */
  #viewHistory(key: string, acceptsUnversioned: boolean, unversionedUntil: number): TemplateHistory {
    const kept = this.#views.get(key) ?? { earlier: [], until: 0 };
    if (kept.history === undefined) {
      kept.until = acceptsUnversioned ? unversionedUntil : Number.POSITIVE_INFINITY;
      kept.history = this.#historyOf([], acceptsUnversioned);
      this.#viewUntil = Math.min(this.#viewUntil, kept.until);
    }
    this.#views.set(key, kept);
    return kept.history;
  }

  #historyOf(sets: readonly TemplateSet[], acceptsUnversioned: boolean): TemplateHistory {
    const versions = this.#versions;
    const onUnknown = this.#options.onUnknownVersion;
    return Object.freeze({
      earlier: Object.freeze(sets),
      knows: (template: string, version: string, namespace?: string) => versions.get(namespace ?? '')?.has(versionKey(namespace, template, version)) === true,
      acceptsUnversioned,
      sawUnknownVersion: () => onUnknown?.(),
    });
  }
}

/** The view of `key` in `set`: a namespace's own, or the cluster-wide set. */
function viewOf(set: TemplateSet, key: string): TemplateSet {
  return key === CLUSTER ? set : setFor(set, key);
}

/** What tells two views of `key` apart: a namespace's own view's digest, or the cluster-wide templates'. */
function viewDigest(set: TemplateSet, key: string): string {
  const own = key === CLUSTER ? undefined : set.namespaces?.get(key);
  return own?.digest ?? clusterDigest(set);
}

/** The digest of the cluster-wide templates alone (a set's own digest covers every namespace's). */
const clusterDigests = new WeakMap<TemplateSet, string>();
function clusterDigest(set: TemplateSet): string {
  if (set.namespaces === undefined) return set.digest;
  const found = clusterDigests.get(set);
  if (found !== undefined) return found;
  const digest = digestOf([...set.templates.values()].map((t) => [t.namespace ?? '', t.name, t.version]).sort());
  clusterDigests.set(set, digest);
  return digest;
}

function versionKey(namespace: string | undefined, template: string, version: string): string {
  return `${namespace ?? ''}\0${template}\0${version}`;
}
