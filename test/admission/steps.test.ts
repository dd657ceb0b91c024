import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mutating, validating, type StepLog } from '../../src/admission/handlers.js';
import { loadTemplateSet } from '../../src/templates/load.js';
import { Writable } from 'node:stream';
import { serveConfig } from '../../src/cli/serve-flags.js';
import { createLogger } from '../../src/log.js';
import { serve } from '../../src/main.js';
import { httpsRequest } from '../helpers/client.js';
import { optedInPod, podReview } from '../helpers/review.js';
import { makeTestCerts } from '../helpers/tls.js';

/** The debug step log of the handlers: one line per decision, and nothing at all without it. */
describe('review steps at debug level', () => {
  const capture = (): { lines: [Record<string, unknown>, string][]; debug: StepLog } => {
    const lines: [Record<string, unknown>, string][] = [];
    return { lines, debug: (fields, decided) => void lines.push([fields, decided]) };
  };

  it('logs the selection, its source and the verdict of an injected pod', async () => {
    const set = await loadTemplateSet('templates');
    const { lines, debug } = capture();
    const handler = mutating({ templates: () => set, debug });
    handler(podReview(optedInPod(), { namespace: 'shop' }).request);
    assert.deepEqual(
      lines.map(([, d]) => d),
      ['selected', 'injected'],
    );
    assert.equal(lines[0]![0]['from'], 'the default templates');
    assert.equal(lines[0]![0]['namespace'], 'shop');
    assert.match(String((lines[0]![0]['templates'] as string[])[0]), /@/);
  });

  it('logs why a pod is skipped or denied', async () => {
    const set = await loadTemplateSet('templates');
    const { lines, debug } = capture();
    const handler = mutating({ templates: () => set, debug });
    handler(podReview(optedInPod({ labels: { 'sidecar-injector.io/inject': 'false' } }), { namespace: 'shop' }).request);
    handler(podReview(optedInPod({ annotations: { 'sidecar-injector.io/templates': 'nosuch' } }), { namespace: 'shop' }).request);
    assert.deepEqual(
      lines.map(([, d]) => d),
      ['skipped: not selected', 'denied: the templates the pod names'],
    );
    assert.equal(lines[1]![0]['code'], 'TEMPLATE_UNKNOWN');
  });

  it('logs the validating verdict', async () => {
    const set = await loadTemplateSet('templates');
    const { lines, debug } = capture();
    validating({ templates: () => set, debug })(podReview(optedInPod(), { namespace: 'shop' }).request);
    assert.deepEqual(
      lines.map(([, d]) => d),
      ['validated: denied'],
    );
  });

  it('is what the server writes at --log-level debug, and nothing of it at info', async () => {
    const certs = await makeTestCerts();
    for (const level of ['debug', 'info']) {
      const chunks: string[] = [];
      const sink = new Writable({ write: (c, _e, cb) => (chunks.push(String(c)), cb()) });
      const config = serveConfig(
        ['--port', '0', '--health-port', '0', '--host', '127.0.0.1', '--cert-dir', certs.certDir, '--templates-dir', 'templates', '--log-level', level],
        {},
      );
      const running = await serve(config, createLogger(level, sink));
      try {
        await httpsRequest(`https://127.0.0.1:${running.port}/mutate`, JSON.stringify(podReview(optedInPod(), { namespace: 'shop' })), {
          ca: certs.ca.certPem,
        });
      } finally {
        await running.close();
      }
      const steps = chunks
        .join('')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l))
        .filter((l) => l.level === 20 && ['selected', 'injected'].includes(l.msg));
      assert.deepEqual(
        steps.map((l) => l.msg),
        level === 'debug' ? ['selected', 'injected'] : [],
        level,
      );
    }
  });
});
