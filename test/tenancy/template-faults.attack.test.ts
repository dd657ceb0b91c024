import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { eventually, sct } from '../helpers/sidecartemplates.js';
import { startFakeApiServer, type FakeApiServer } from '../helpers/fake-apiserver.js';
import { startClusterTestServer, type TestServer } from '../helpers/server.js';

/**
 * A team's object of 64 KiB that is nothing but faults: containers of 256 arguments `{{x}}`, each
 * an unknown placeholder whose fault says ~190 bytes. Within the CRD's bounds and the injector's
 * per-object limit, 31 such containers made 7936 faults: a `Loaded` message of 1.6 MB (over etcd's
 * 1.5 MiB, so never written), held in the replica per object beside its log line, 25 times what
 * the budgets charge it. What the injector keeps and says of one object's faults is bounded.
 */
describe("attack: a team's object made of faults", () => {
  let api: FakeApiServer;
  let server: TestServer;

  before(async () => {
    api = await startFakeApiServer();
    server = await startClusterTestServer(api);
  });
  after(async () => {
    await server?.close();
    await api?.close();
  });

  it('says the first faults of an object, each cut short, and how many more, in a Loaded message of a few KiB', async () => {
    const args = Array.from({ length: 256 }, () => '{{x}}');
    const long = `{{ ${'x'.repeat(8_000)}`;
    const containers = Array.from({ length: 27 }, (_, i) => ({ name: `c${i}`, image: 'registry.example.com/a:1', args: i === 0 ? [long] : args }));
    api.applyTemplate(sct('team-a', 'flood', 'registry.example.com/a:1', { containers }));
    const loaded = (): any => api.template('team-a', 'flood')?.status?.conditions?.find((c: any) => c.type === 'Loaded');
    await eventually(() => loaded()?.status === 'False', 'the object refused');
    const message: string = loaded().message;
    assert.ok(message.length < 16 * 1024, `the Loaded message holds ${message.length} characters`);
    assert.match(message, /\/spec\/containers\/0\/args\/0: unterminated placeholder in "\{\{ x{100}/);
    assert.match(message, /\/spec\/containers\/1\/args\/0: unknown placeholder "\{\{x\}\}"/);
    assert.match(message, /and 6641 more faults not shown \(the injector keeps the first 16 of an object\)$/);
  });

  it("says the first clashes of a team's default template with another, and how many more", async () => {
    // 11 containers of 256 ports each (the CRD's most a list holds), ~60 KiB: every port clashes with the other default's.
    const containers = (image: string) =>
      Array.from({ length: 11 }, (_, i) => ({ name: `c${i}`, image, ports: Array.from({ length: 256 }, (_, p) => ({ containerPort: 1000 + i * 256 + p })) }));
    api.applyTemplate(sct('team-c', 'first', 'registry.example.com/a:1', { default: true, containers: containers('registry.example.com/a:1') }));
    const loaded = (name: string): any => api.template('team-c', name)?.status?.conditions?.find((c: any) => c.type === 'Loaded');
    await eventually(() => loaded('first')?.status === 'True', 'the first default served');
    api.applyTemplate(sct('team-c', 'second', 'registry.example.com/b:1', { default: true, containers: containers('registry.example.com/b:1') }));
    await eventually(() => loaded('second')?.status === 'False', 'the clashing default refused');
    const message: string = loaded('second').message;
    assert.ok(message.length < 16 * 1024, `the Loaded message holds ${message.length} characters`);
    assert.match(message, /container "c0" is defined by both template "first" and template "second": both are default templates of namespace team-c/);
    assert.match(message, /and \d+ more faults not shown \(the injector keeps the first 16 of an object\)$/);
  });
});
