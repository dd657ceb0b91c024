import { watch, type FSWatcher } from 'node:fs';
import { readlink } from 'node:fs/promises';
import { join } from 'node:path';
import { InjectorError, TemplateSetError, formatFault, type TemplateFault } from '../errors.js';
import type { Logger } from '../log.js';
import { SetHistory } from './history.js';
import { compileTemplateSet, readTemplateDir, type TemplateFile, type TemplateSet } from './load.js';
import { digestOf } from './template.js';

/** What a reload attempt gave; passed to `onReload` (metrics) after every attempt that found a change. */
export interface ReloadResult {
  readonly ok: boolean;
  /** Digest of the files read: the new set's digest when ok, the rejected content's otherwise. */
  readonly digest: string;
  readonly time: Date;
  /** The set serving after the attempt (the new one, or the last good one). */
  readonly serving: string;
  readonly faults: readonly TemplateFault[];
  /** Why the set was rejected, in one line. */
  readonly error?: string;
}

export interface TemplateStoreOptions {
  readonly logger: Logger;
  /** Re-read the directory this often even without file-system events; 0: events only. */
  readonly pollIntervalMs?: number;
  /** Use file-system events (default true); without them, polling alone finds changes. */
  readonly watch?: boolean;
  /** Events come in bursts (a ConfigMap update is several renames): wait this long for quiet. */
  readonly debounceMs?: number;
  readonly onReload?: (result: ReloadResult) => void;
  /**
   * How long a replaced set is still accepted by the validating handler, and how long after start
   * the status annotations of an earlier injector release are (default 10 minutes; see history.ts).
   */
  readonly historyWindowMs?: number;
}

/** Default of `historyWindowMs`: a ConfigMap rollout (a minute or two) and an injector rollout, with room. */
export const HISTORY_WINDOW_MS = 10 * 60 * 1000;
/** A pod naming a template version not served here asks for a re-read at most this often. */
const UNKNOWN_VERSION_RELOAD_MS = 1000;

/** The template set in force, replaced in one step when the directory changes to a valid set. */
export interface TemplateStore {
  /**
   * The set to use for one review, carrying the history of the sets served before it; read it once
   * per review so the review sees one consistent set.
   */
  current(): TemplateSet;
  /** Checks the directory now; resolves to the result, or undefined when nothing changed. */
  reload(): Promise<ReloadResult | undefined>;
  close(): Promise<void>;
}

/**
 * Faults for files that are empty now but defined templates of the set serving. An editor or a
 * copy that rewrites a file in place leaves it empty for a moment; read then, the file would load
 * as one with no templates, and the set would lose them: pods skipped, and /validate requiring
 * nothing (the soak caught 507 valid reviews skipped so). Such a file is taken for one caught
 * mid-write: the last good set keeps serving, and the next event or poll reads the file again.
 * Deleting the file is how its templates are removed. Not applied to a ConfigMap volume, which the
 * kubelet updates whole, never a file at a time.
 */
function emptiedFiles(files: readonly TemplateFile[], serving: TemplateSet): TemplateFault[] {
  const faults: TemplateFault[] = [];
  for (const f of files) {
    if (f.text.trim() !== '') continue;
    const lost = [...serving.templates.values()].filter((t) => t.file === f.file).map((t) => t.name);
    if (lost.length === 0) continue;
    faults.push({ file: f.file, path: '', message: `the file is empty but defined ${lost.join(', ')} until now: taken for a file caught mid-write, so the last good set keeps serving; delete the file to remove its templates` });
  }
  return faults;
}

// The kubelet writes a ConfigMap volume as timestamped directories and swaps the `..data` symlink
// to the new one (pkg/volume/util/atomic_writer.go); the visible files are symlinks through it.
const KUBELET_DATA = '..data';

/**
 * Loads the templates (throwing, so the server does not start, when they are invalid) and watches
 * the directory with fs.watch and polling. A changed directory is read completely, validated as a
 * whole, and swapped in with one assignment; an invalid set is logged with every fault and the last
 * good set keeps serving.
 */
export async function openTemplateStore(dir: string, options: TemplateStoreOptions): Promise<TemplateStore> {
  const { logger } = options;
  // The first read, like every reload, must not mix two ConfigMap versions.
  const first = await readConsistently(dir);
  if (first.length === 0) throw new InjectorError('TEMPLATES_EMPTY', [dir]);
  let current = compileTemplateSet(first, dir);
  let lastUnknown = 0;
  const history = new SetHistory(current, {
    windowMs: options.historyWindowMs ?? HISTORY_WINDOW_MS,
    // The apiserver may ask this replica to validate a pod that another replica injected with a
    // newer set, one the kubelet has not yet written here; reading now may find it.
    onUnknownVersion: () => {
      const now = Date.now();
      if (closed || now - lastUnknown < UNKNOWN_VERSION_RELOAD_MS) return;
      lastUnknown = now;
      void reload();
    },
  });
  let rejected: string | undefined; // digest of the broken content last reported, so a poll does not repeat it
  let running: Promise<ReloadResult | undefined> | undefined;
  let again = false;
  let closed = false;
  let watcher: FSWatcher | undefined;
  let debounce: NodeJS.Timeout | undefined;

  const check = async (): Promise<ReloadResult | undefined> => {
    const files = await readConsistently(dir);
    const digest = digestOf(files.map((f) => [f.file, f.text]));
    if (digest === rejected) return undefined;
    if (digest === current.digest) {
      if (rejected === undefined) return undefined;
      // A broken edit reverted: the files are the served set again, which the not-served gauge must learn
      // (test/metrics/templates-served.test.ts).
      rejected = undefined;
      logger.info({ dir, digest }, 'templates on disk are the served set again');
      return { ok: true, digest, time: new Date(), serving: digest, faults: [] };
    }
    const time = new Date();
    try {
      if (files.length === 0) throw new InjectorError('TEMPLATES_EMPTY', [dir]);
      // The kubelet swaps a ConfigMap in whole (..data), so an empty key there was emptied on purpose.
      const emptied = (await dataTarget(dir)) === undefined ? emptiedFiles(files, current) : [];
      if (emptied.length > 0) throw new TemplateSetError(emptied);
      const next = compileTemplateSet(files, dir);
      current = next; // the swap: a review already running keeps the set it read
      history.replace(next);
      rejected = undefined;
      logger.info({ dir, templates: [...next.templates.keys()], defaults: next.defaults.map((t) => t.name), digest: next.digest }, 'templates reloaded');
      return { ok: true, digest: next.digest, time, serving: next.digest, faults: [] };
    } catch (err) {
      if (!(err instanceof TemplateSetError) && !(err instanceof InjectorError)) throw err;
      rejected = digest;
      const faults = err instanceof TemplateSetError ? err.faults : [];
      logger.error({ dir, digest, serving: current.digest, faults: faults.map(formatFault), error: err.message }, 'templates NOT reloaded: the new set is invalid; the last good set keeps serving');
      return { ok: false, digest, time, serving: current.digest, faults, error: err.message.split('\n')[0] ?? err.message };
    }
  };

  const reload = (): Promise<ReloadResult | undefined> => {
    if (running !== undefined) {
      again = true;
      return running;
    }
    running = (async () => {
      let last: ReloadResult | undefined;
      do {
        again = false;
        const result = await check().catch((err: unknown) => {
          // A file removed between listing and reading, a directory being replaced: try again later.
          logger.warn({ dir, err: (err as Error).message }, 'templates directory not readable; will retry');
          return undefined;
        });
        if (result !== undefined) {
          last = result;
          options.onReload?.(result);
        }
      } while (again && !closed);
      running = undefined;
      return last;
    })();
    return running;
  };

  const schedule = (): void => {
    if (closed) return;
    clearTimeout(debounce);
    debounce = setTimeout(() => void reload(), options.debounceMs ?? 100);
    debounce.unref();
  };

  const startWatching = (): void => {
    if (closed || watcher !== undefined) return;
    try {
      watcher = watch(dir, { persistent: false }, schedule);
      watcher.on('error', (err) => {
        logger.warn({ dir, err: err.message }, 'watching the templates directory failed; polling continues');
        watcher?.close();
        watcher = undefined;
      });
    } catch (err) {
      logger.warn({ dir, err: (err as Error).message }, 'cannot watch the templates directory; polling only');
    }
  };

  const watching = options.watch ?? true;
  if (watching) startWatching();
  const poll = (options.pollIntervalMs ?? 0) > 0 ? setInterval(() => {
    if (watching) startWatching(); // re-establish a watcher lost when the directory was replaced
    void reload();
  }, options.pollIntervalMs) : undefined;
  poll?.unref();

  return {
    current: () => history.current(),
    reload,
    async close() {
      closed = true;
      clearTimeout(debounce);
      clearInterval(poll);
      watcher?.close();
      await running;
    },
  };
}

/**
 * Reads every template file; when the kubelet swapped `..data` while the files were being read, the
 * read is repeated, so a set is never a mix of two ConfigMap versions.
 */
async function readConsistently(dir: string): Promise<TemplateFile[]> {
  for (let attempt = 0; ; attempt++) {
    const before = await dataTarget(dir);
    const files = await readTemplateDir(dir);
    if ((await dataTarget(dir)) === before || attempt >= 5) return files;
  }
}

async function dataTarget(dir: string): Promise<string | undefined> {
  try {
    return await readlink(join(dir, KUBELET_DATA));
  } catch {
    return undefined; // not a ConfigMap volume (or not yet): a plain directory
  }
}
