import assert from 'node:assert/strict';
import { mkdtemp, mkdir, rename, symlink, writeFile, rm } from 'node:fs/promises';
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
    const cm = await ConfigMapDir.create({ 'pair.yaml': template('v1') });
    const server = await startTestServer(['--templates-dir', cm.dir, '--templates-poll-seconds', '0']);
    try {
      const post = async (): Promise<string[]> => {
        const res = await httpsRequest(`${server.url}/mutate`, JSON.stringify(podReview(optedInPod())), { ca: server.certs.ca.certPem });
        assert.equal(res.status, 200);
        return decodePatch(res.json().response).filter((op) => op.path === '/spec/containers/1' || op.path === '/spec/containers/2').map((op) => op.value.image.split(':')[1]);
      };
      const seen = new Set<string>();
      for (let round = 2; round <= 6; round++) {
        const inflight = Array.from({ length: 20 }, post);
        await cm.update({ 'pair.yaml': round === 4 ? BROKEN : template(`v${round}`) });
        for (const tags of await Promise.all(inflight)) {
          assert.equal(tags.length, 2);
          assert.equal(tags[0], tags[1], `one review saw one set, got ${tags.join(' and ')}`);
          seen.add(tags[0]!);
        }
        await new Promise((r) => setTimeout(r, 150));
      }
      const final = await post();
      assert.deepEqual(final, ['v6', 'v6'], 'the server took the last valid set');
      assert.ok(!seen.has('v9'), 'the broken set never served');
    } finally {
      await server.close();
    }
  });
});
