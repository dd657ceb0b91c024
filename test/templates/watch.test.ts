import assert from 'node:assert/strict';
import fsp, { mkdtemp, mkdir, rename, symlink, writeFile, rm } from 'node:fs/promises';
import { syncBuiltinESMExports } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { after, describe, it } from 'node:test';
import { createLogger } from '../../src/log.js';
import { openTemplateStore, type ReloadResult, type TemplateStore } from '../../src/templates/watch.js';
import { httpsRequest } from '../helpers/client.js';
import { decodePatch, optedInPod, podReview } from '../helpers/review.js';
import { startTestServer } from '../helpers/server.js';

/** A template with two containers running the same tag, so a mixed set would show as two tags. */
function template(tag: string, extra = ''): string {
  return `apiVersion: sidecar-injector.io/v1alpha1
kind: SidecarTemplate
metadata:
  name: pair
spec:
  default: true
  containers:
    - name: one
      image: example.com/one:${tag}
    - name: two
      image: example.com/two:${tag}${extra}
`;
}

const BROKEN = template('v9', '\n      imagePullPolicy: Sometimes');

/** A directory laid out like a ConfigMap volume: timestamped data dirs, `..data`, symlinked files. */
class ConfigMapDir {
  private version = 0;
  constructor(readonly dir: string) {}

  static async create(files: Record<string, string>): Promise<ConfigMapDir> {
    const d = new ConfigMapDir(await mkdtemp(join(tmpdir(), 'templates-cm-')));
    await d.update(files);
    for (const name of Object.keys(files)) await symlink(join('..data', name), join(d.dir, name));
    return d;
  }

  /** What the kubelet's atomic writer does: write a new data dir, then rename a symlink over `..data`. */
  async update(files: Record<string, string>): Promise<void> {
    const data = `..2026_11_22_14_00_0${++this.version}.${process.pid}`;
    await mkdir(join(this.dir, data));
    for (const [name, text] of Object.entries(files)) await writeFile(join(this.dir, data, name), text);
    await symlink(data, join(this.dir, '..data_tmp'));
    await rename(join(this.dir, '..data_tmp'), join(this.dir, '..data'));
  }
}

/** A default template with one container named after it, so the review shows which set it read. */
function defaultTemplate(name: string, tag: string, extra = ''): string {
  return `apiVersion: sidecar-injector.io/v1alpha1
kind: SidecarTemplate
metadata:
  name: ${name}
spec:
  default: true
  containers:
    - name: ${name}
      image: example.com/${name}:${tag}${extra}
`;
}

const BROKEN_TWO = defaultTemplate('two', 'v9', '\n      imagePullPolicy: Sometimes');

/** The tags of the injected example.com/one and example.com/two images, in container order. */
function sidecarTags(patch: any[]): string[] {
  const tags: string[] = [];
  const visit = (v: unknown): void => {
    if (Array.isArray(v)) v.forEach(visit);
    else if (v !== null && typeof v === 'object') {
      const image = (v as { image?: unknown }).image;
      const m = typeof image === 'string' ? /^example\.com\/(?:one|two):(.+)$/.exec(image) : null;
      if (m) tags.push(m[1]!);
      else Object.values(v).forEach(visit);
    }
  };
  for (const op of patch) if (String(op.path).startsWith('/spec/containers')) visit(op.value);
  return tags;
}

async function eventually(check: () => Promise<void>, timeoutMs = 5000): Promise<void> {
  const started = Date.now();
  for (;;) {
    try {
      return await check();
    } catch (err) {
      if (Date.now() - started > timeoutMs) throw err;
      await new Promise((r) => setTimeout(r, 20));
    }
  }
}

/**
 * Holds every read of one file (fs/promises readFile, the call load.ts makes) until released: the
 * slow read that lets a test swap the ConfigMap between the files of one set, every time. The file
 * is opened only after the hold, so it resolves through whatever `..data` is then.
 */
class SlowRead {
  private readonly real = fsp.readFile;
  private holding = false;
  private count = 0;
  private gate: { promise: Promise<void>; open: () => void } = SlowRead.newGate();
  private waiters: Array<() => void> = [];

  constructor(private readonly path: string) {}

  private static newGate(): { promise: Promise<void>; open: () => void } {
    let open!: () => void;
    const promise = new Promise<void>((r) => (open = r));
    return { promise, open };
  }

  hold(): void {
    this.holding = true;
    const real = this.real;
    const wrapped = async (...args: Parameters<typeof fsp.readFile>): Promise<any> => {
      if (this.holding && String(args[0]) === this.path) {
        const gate = this.gate.promise;
        this.count++;
        for (const w of this.waiters.splice(0)) w();
        await gate;
      }
      return real(...args);
    };
    (fsp as { readFile: unknown }).readFile = wrapped;
    syncBuiltinESMExports();
  }

  /** Resolves once the file has been asked for `n` times since hold(). */
  async reached(n: number, timeoutMs = 5000): Promise<void> {
    const started = Date.now();
    while (this.count < n) {
      if (Date.now() - started > timeoutMs) throw new Error(`${this.path} was read ${this.count} times, not ${n}: does load.ts still read with fs/promises readFile?`);
      await new Promise<void>((r) => {
        this.waiters.push(r);
        setTimeout(r, 50);
      });
    }
  }

  /** Lets the held read (and the next one, until held again) go on. */
  release(): void {
    this.gate.open();
    this.gate = SlowRead.newGate();
  }

  stop(): void {
    this.holding = false;
    this.gate.open();
    (fsp as { readFile: unknown }).readFile = this.real;
    syncBuiltinESMExports();
  }
}

function captureLogger(): { logger: ReturnType<typeof createLogger>; lines: () => any[] } {
  const chunks: string[] = [];
  const sink = new Writable({ write: (c, _e, cb) => (chunks.push(String(c)), cb()) });
  return { logger: createLogger('info', sink), lines: () => chunks.join('').split('\n').filter(Boolean).map((l) => JSON.parse(l)) };
}

function nextReload(results: ReloadResult[], count: number, timeoutMs = 5000): Promise<ReloadResult> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const tick = (): void => {
      if (results.length >= count) return resolve(results[count - 1]!);
      if (Date.now() - started > timeoutMs) return reject(new Error(`no reload #${count} within ${timeoutMs} ms`));
      setTimeout(tick, 10);
    };
    tick();
  });
}

const imageOf = (store: TemplateStore, i: number): string | undefined => store.current().templates.get('pair')?.spec.containers[i]?.image;

describe('template hot reload', () => {
  const stores: TemplateStore[] = [];
  after(async () => Promise.all(stores.map((s) => s.close())));

  it('takes a ConfigMap update (the kubelet ..data symlink swap) from a file-system event', async () => {
    const cm = await ConfigMapDir.create({ 'pair.yaml': template('v1') });
    const results: ReloadResult[] = [];
    const store = await openTemplateStore(cm.dir, { logger: createLogger('silent'), debounceMs: 20, onReload: (r) => results.push(r) });
    stores.push(store);
    const first = store.current().digest;
    assert.equal(imageOf(store, 0), 'example.com/one:v1');

    await cm.update({ 'pair.yaml': template('v2') });
    const r = await nextReload(results, 1);
    assert.equal(r.ok, true);
    assert.notEqual(r.digest, first);
    assert.equal(r.digest, store.current().digest);
    assert.ok(r.time instanceof Date);
    assert.equal(imageOf(store, 1), 'example.com/two:v2');
  });

  it('keeps serving the last good set on a broken edit, logs each fault with its position, and recovers', async () => {
    const cm = await ConfigMapDir.create({ 'pair.yaml': template('v1') });
    const results: ReloadResult[] = [];
    const log = captureLogger();
    const store = await openTemplateStore(cm.dir, { logger: log.logger, debounceMs: 20, pollIntervalMs: 30, onReload: (r) => results.push(r) });
    stores.push(store);
    const good = store.current();

    await cm.update({ 'pair.yaml': BROKEN });
    const bad = await nextReload(results, 1);
    assert.equal(bad.ok, false);
    assert.equal(bad.serving, good.digest);
    assert.equal(store.current(), good, 'the very same set object keeps serving');
    assert.match(bad.faults.map((f) => `${f.file}:${f.line}:${f.column} ${f.path} ${f.message}`).join('\n'), /pair\.yaml:12:24 \/spec\/containers\/1\/imagePullPolicy must be one of "Always", "IfNotPresent", "Never", got "Sometimes"/);
    const logged = log.lines().find((l) => l.msg.startsWith('templates NOT reloaded'));
    assert.ok(logged, 'the rejection is logged');
    assert.match(logged.faults[0], /pair\.yaml:12:24: template "pair": \/spec\/containers\/1\/imagePullPolicy/);

    // Polls keep finding the same broken content; it is reported once, not on every poll.
    await new Promise((r) => setTimeout(r, 150));
    assert.equal(results.length, 1);

    await cm.update({ 'pair.yaml': template('v3') });
    const fixed = await nextReload(results, 2);
    assert.equal(fixed.ok, true);
    assert.equal(imageOf(store, 0), 'example.com/one:v3');
  });

  it('finds an edit by polling alone when file-system events are off', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'templates-plain-'));
    await writeFile(join(dir, 'pair.yaml'), template('v1'));
    const results: ReloadResult[] = [];
    const store = await openTemplateStore(dir, { logger: createLogger('silent'), watch: false, pollIntervalMs: 25, onReload: (r) => results.push(r) });
    stores.push(store);
    await writeFile(join(dir, 'pair.yaml'), template('v2'));
    assert.equal((await nextReload(results, 1)).ok, true);
    assert.equal(imageOf(store, 0), 'example.com/one:v2');
  });

  it('re-reads the directory when a review names a template version it never served, and remembers the set it replaced', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'templates-plain-'));
    await writeFile(join(dir, 'pair.yaml'), template('v1'));
    const results: ReloadResult[] = [];
    const store = await openTemplateStore(dir, { logger: createLogger('silent'), watch: false, onReload: (r) => results.push(r) });
    stores.push(store);
    const first = store.current();
    await writeFile(join(dir, 'pair.yaml'), template('v2'));
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(results.length, 0, 'no events, no polling: nothing reads the directory by itself');
    first.history?.sawUnknownVersion();
    assert.equal((await nextReload(results, 1)).ok, true);
    assert.equal(imageOf(store, 0), 'example.com/one:v2');
    assert.deepEqual(store.current().history?.earlier.map((s) => s.digest), [first.digest]);
    assert.equal(store.current().history?.knows('pair', first.templates.get('pair')!.version), true);
  });

  it('takes a template file emptied in place for one caught mid-write: the last good set serves until the file is whole', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'templates-plain-'));
    await writeFile(join(dir, 'pair.yaml'), template('v1'));
    await writeFile(join(dir, 'other.yaml'), defaultTemplate('three', 'v1'));
    const store = await openTemplateStore(dir, { logger: createLogger('silent'), watch: false });
    stores.push(store);
    const good = store.current();
    // An editor saving in place: truncated first, written a moment later.
    await writeFile(join(dir, 'pair.yaml'), '\n');
    const r = await store.reload();
    assert.equal(r?.ok, false);
    assert.match(r?.faults[0]?.message ?? '', /the file is empty but defined pair until now/);
    assert.equal(store.current(), good, 'the very same set keeps serving');
    await writeFile(join(dir, 'pair.yaml'), template('v2'));
    assert.equal((await store.reload())?.ok, true);
    assert.equal(imageOf(store, 0), 'example.com/one:v2');
    // Deleting the file is how its templates go.
    await rm(join(dir, 'pair.yaml'));
    assert.equal((await store.reload())?.ok, true);
    assert.equal(store.current().templates.has('pair'), false);
  });

  it('takes a ConfigMap key emptied on purpose: the kubelet swaps the whole volume, so its templates go', async () => {
    const cm = await ConfigMapDir.create({ 'pair.yaml': template('v1'), 'other.yaml': defaultTemplate('three', 'v1') });
    const store = await openTemplateStore(cm.dir, { logger: createLogger('silent'), watch: false });
    stores.push(store);
    await cm.update({ 'pair.yaml': '', 'other.yaml': defaultTemplate('three', 'v1') });
    assert.equal((await store.reload())?.ok, true);
    assert.equal(store.current().templates.has('pair'), false);
    assert.equal(store.current().templates.has('three'), true);
  });

  it('rejects a set that empties the directory and keeps the last good one', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'templates-plain-'));
    await writeFile(join(dir, 'pair.yaml'), template('v1'));
    const store = await openTemplateStore(dir, { logger: createLogger('silent'), watch: false });
    stores.push(store);
    await rm(join(dir, 'pair.yaml'));
    const r = await store.reload();
    assert.equal(r?.ok, false);
    assert.match(r?.error ?? '', /no sidecar templates/);
    assert.equal(imageOf(store, 0), 'example.com/one:v1');
  });

  it('never answers a review with a mix of two sets while reloads happen under load', async () => {
    // Two default templates in two files of one ConfigMap: a set read half before and half after a
    // kubelet `..data` swap would inject `one` and `two` with different tags.
    const files = (tag: string): Record<string, string> => ({ 'one.yaml': defaultTemplate('one', tag), 'two.yaml': defaultTemplate('two', tag) });
    const cm = await ConfigMapDir.create(files('v1'));
    const slow = new SlowRead(join(cm.dir, 'two.yaml'));
    const server = await startTestServer(['--templates-dir', cm.dir, '--templates-poll-seconds', '0']);
    try {
      const post = async (): Promise<string[]> => {
        const res = await httpsRequest(`${server.url}/mutate`, JSON.stringify(podReview(optedInPod())), { ca: server.certs.ca.certPem });
        assert.equal(res.status, 200);
        return sidecarTags(decodePatch(res.json().response));
      };
      const assertOneSet = async (count: number): Promise<Set<string>> => {
        const seen = new Set<string>();
        for (const tags of await Promise.all(Array.from({ length: count }, post))) {
          assert.equal(tags.length, 2, `both default templates injected, got ${tags.join(', ')}`);
          assert.equal(tags[0], tags[1], `one review saw one set, got ${tags.join(' and ')}`);
          seen.add(tags[0]!);
        }
        return seen;
      };

      // The race made certain: the reload has read one.yaml of v2 when the kubelet swaps in v3, and
      // only then reads two.yaml (of v3). The reader must notice the swap and read again; the second
      // read is held too, so reviews answered meanwhile see whatever set the first read produced.
      slow.hold();
      await cm.update(files('v2'));
      await slow.reached(1);
      await cm.update(files('v3'));
      slow.release();
      await slow.reached(2);
      assert.deepEqual([...await assertOneSet(20)], ['v1'], 'while v3 is still being read, v1 serves');
      slow.stop();
      await eventually(async () => assert.deepEqual(await post(), ['v3', 'v3']));

      // Under load: reviews in flight while the ConfigMap changes, a broken version among them.
      const seen = new Set<string>();
      for (let round = 4; round <= 7; round++) {
        const inflight = assertOneSet(20);
        await cm.update(round === 5 ? { 'one.yaml': defaultTemplate('one', 'v9'), 'two.yaml': BROKEN_TWO } : files(`v${round}`));
        for (const tag of await inflight) seen.add(tag);
        await new Promise((r) => setTimeout(r, 150));
      }
      assert.deepEqual(await post(), ['v7', 'v7'], 'the server took the last valid set');
      assert.ok(!seen.has('v9'), 'the broken set never served');
    } finally {
      slow.stop();
      await server.close();
    }
  });
});
