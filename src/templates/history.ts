import { setFor, type TemplateHistory, type TemplateSet } from './load.js';

export type { TemplateHistory };

/** How many earlier sets are remembered, however short their lives were. */
export const SETS_KEPT = 8;
/** How many template versions `knows` remembers: thousands of edits, a few hundred KiB at most. */
export const VERSIONS_KEPT = 4096;

export interface HistoryOptions {
  /** How long a replaced set is still accepted, and how long after start unversioned statuses are. */
  readonly windowMs: number;
  /** Asks for the templates directory to be read again (debounced by the caller). */
  readonly onUnknownVersion?: () => void;
  readonly now?: () => number;
}

/**
 * Keeps the sets served recently and hands out, for each review, the current set with a frozen view
 * of that history. The view (and so the object the answer cache keys its entries by) changes exactly
 * when a verdict could: a set swapped in, an earlier set leaving the window, or the end of the
 * window for unversioned statuses. Nothing here is computed per review but a clock read.
 */
export class SetHistory {
  readonly #options: HistoryOptions;
  readonly #now: () => number;
  readonly #started: number;
  /** Earlier sets, newest first, with the time each stopped being current. */
  #earlier: { readonly set: TemplateSet; readonly until: number }[] = [];
  /** `namespace\0name\0version` of every template served, oldest first (the namespace of a SidecarTemplate object; empty for a file). */
  readonly #versions = new Set<string>();
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

  /** The set for one review: the current one, carrying the history as it stands now. */
  current(): TemplateSet {
    if (this.#now() >= this.#viewUntil) this.#view = this.#makeView();
    return this.#view;
  }

  /** Makes `next` the current set; the one it replaces is remembered for the window. */
  replace(next: TemplateSet): void {
    const now = this.#now();
    const until = now + this.#options.windowMs;
    const kept = [{ set: this.#current, until }, ...this.#earlier].filter((e) => e.until > now && e.set.digest !== next.digest);
    this.#earlier = kept.slice(0, SETS_KEPT);
    this.#current = next;
    this.#learn(next);
    this.#view = this.#makeView();
  }

  #learn(set: TemplateSet): void {
    const templates = [set, ...(set.namespaces?.values() ?? [])].flatMap((s) => [...s.templates.values()]);
    for (const t of templates) {
      const key = versionKey(t.namespace, t.name, t.version);
      this.#versions.delete(key); // re-added last: the most recently served stay longest
      this.#versions.add(key);
    }
    for (const key of this.#versions) {
      if (this.#versions.size <= VERSIONS_KEPT) break;
      this.#versions.delete(key);
    }
  }

  #makeView(): TemplateSet {
    const now = this.#now();
    this.#earlier = this.#earlier.filter((e) => e.until > now);
    const unversionedUntil = this.#started + this.#options.windowMs;
    const acceptsUnversioned = now < unversionedUntil;
    const ends = [...this.#earlier.map((e) => e.until), ...(acceptsUnversioned ? [unversionedUntil] : [])];
    this.#viewUntil = ends.length === 0 ? Number.POSITIVE_INFINITY : Math.min(...ends);
    const versions = this.#versions;
    const onUnknown = this.#options.onUnknownVersion;
    const earlier = this.#earlier.map((e) => e.set);
    const historyOf = (sets: readonly TemplateSet[]): TemplateHistory =>
      Object.freeze({
        earlier: Object.freeze(sets),
        knows: (template: string, version: string, namespace?: string) => versions.has(versionKey(namespace, template, version)),
        acceptsUnversioned,
        sawUnknownVersion: () => onUnknown?.(),
      });
    // Each namespace with templates of its own, now or in a set still remembered, gets its view
    // with the history as that namespace saw it: a pod injected from a team's template
    // deleted a minute ago is still accepted for the window, as a replaced ConfigMap set is.
    const named = new Set([this.#current, ...earlier].flatMap((s) => [...(s.namespaces?.keys() ?? [])]));
    const namespaces = new Map([...named].map((ns) => [ns, Object.freeze({ ...setFor(this.#current, ns), history: historyOf(earlier.map((e) => setFor(e, ns))) })] as const));
    return Object.freeze({ ...this.#current, history: historyOf(earlier), ...(named.size > 0 && { namespaces }) });
  }
}

function versionKey(namespace: string | undefined, template: string, version: string): string {
  return `${namespace ?? ''}\0${template}\0${version}`;
}
