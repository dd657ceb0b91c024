import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { cp, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eventually } from '../helpers/sidecartemplates.js';
import { startFakeApiServer, type FakeApiServer } from '../helpers/fake-apiserver.js';
import { startClusterTestServer, startTestServer, type TestServer } from '../helpers/server.js';

/**
 * sidecar_injector_templates_not_served is a state: it says "what is there is not what is served"
 * for as long as it is true, so the documented alert (docs/metrics-and-logs.md) keeps firing while
 * the templates stay broken, where a counter of failed reloads counts the break once.
 */
const notServed = async (server: TestServer, source: string): Promise<number | undefined> => {
  const text = await (await fetch(`${server.healthUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`sidecar_injector_templates_not_served{source="${source}"} `));
  return line === undefined ? undefined : Number(line.split(' ')[1]);
};

describe('templates_not_served', () => {
  const closers: (() => Promise<void>)[] = [];
  after(async () => {
    for (const close of closers) await close();
  });

  it('is 1 for the directory from a broken edit until the files load again, across later polls', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'not-served-'));
    await cp('templates', dir, { recursive: true });
    const server = await startTestServer(['--templates-dir', dir, '--templates-poll-seconds', '1']);
    closers.push(() => server.close());
    assert.equal(await notServed(server, 'directory'), 0);
    assert.equal(await notServed(server, 'sidecartemplates'), 0);
    const good = await readFile(join(dir, 'proxy.yaml'), 'utf8');
    await writeFile(join(dir, 'proxy.yaml'), good.replace('containers:', 'contaners:'));
    await eventually(async () => (await notServed(server, 'directory')) === 1, 'the broken edit seen');
    // Polls find the same broken files again: the gauge stays up (the reload counter does not move).
    await new Promise((r) => setTimeout(r, 2500));
    assert.equal(await notServed(server, 'directory'), 1);
    await writeFile(join(dir, 'proxy.yaml'), good);
    await eventually(async () => (await notServed(server, 'directory')) === 0, 'the fix seen');
  });

  it('counts the SidecarTemplate objects whose current version is not served', async () => {
    const api: FakeApiServer = await startFakeApiServer();
    closers.push(() => api.close());
    const sct = (name: string, extra: object = {}): any => ({
      apiVersion: 'sidecar-injector.io/v1alpha1',
      kind: 'SidecarTemplate',
      metadata: { name, namespace: 'team-a' },
      spec: { containers: [{ name, image: `registry.example.com/${name}:1` }], ...extra },
    });
    api.applyTemplate(sct('good'));
    const server = await startClusterTestServer(api);
    closers.push(() => server.close());
    assert.equal(await notServed(server, 'sidecartemplates'), 0);
    const broken = sct('good');
    broken.spec.containers[0].imagePullPolicy = 'Sometimes';
    api.applyTemplate(broken);
    const alsoBroken = sct('other');
    alsoBroken.spec.contaners = [];
    api.applyTemplate(alsoBroken);
    await eventually(async () => (await notServed(server, 'sidecartemplates')) === 2, 'two objects not served as they are');
    api.applyTemplate(sct('good'));
    api.deleteTemplate('team-a', 'other');
    await eventually(async () => (await notServed(server, 'sidecartemplates')) === 0, 'both fixed');
  });
});
