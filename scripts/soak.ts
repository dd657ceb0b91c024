/**
 * Soak: minutes of mixed valid and hostile traffic against a real server process over loopback TLS,
 * with the templates directory rewritten (valid, broken, fixed) in between. Passes when no valid
 * review failed and the server's open file descriptors and resident memory stayed within bounds.
 *
 *   npm run soak                        # 180 s
 *   SOAK_SECONDS=600 npm run soak       # longer
 *   npm run build && SOAK_BUILT=1 npm run soak   # the built server, as deployed (RSS as in the Deployment)
 *
 * Besides the hostile inputs of test/server/hostile.test.ts it sends the costliest shapes of
 * bench/shapes.ts (issue 11), and reports how long the server's event loop was blocked at worst
 * in each sampling window (its own nodejs_eventloop_lag_max_seconds on /metrics: the longest delay of the last minute).
 *
 * Not part of `npm test`. Prints a summary (JSON and a Markdown table for BENCHMARKS.md); exits 1
 * when a bound is broken.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cp, mkdir, mkdtemp, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { Agent, request } from 'node:https';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createCA, issueServingCert } from '../src/certs/pki.js';
import { applyPatchV4 } from '../test/helpers/jsonpatch-v4.js';
import { podProblems } from '../test/helpers/pod.js';
import { exchange, openTcp, openTls, rawPost } from '../test/helpers/raw.js';
import { decodePatch, optedInPod, podReview } from '../test/helpers/review.js';
import { distinct, eventLoopMaxMs, fresh, handleReview, Shapes, SoakShapes } from '../bench/shapes.js';
import { loadTemplateSet } from '../src/templates/load.js';

const SECONDS = Number(process.env['SOAK_SECONDS'] ?? 180);
const VALID_WORKERS = Number(process.env['SOAK_VALID_WORKERS'] ?? 8);
const HOSTILE_WORKERS = Number(process.env['SOAK_HOSTILE_WORKERS'] ?? 4);
/** Workers that only stall (body, headers, handshake) or never read their answers, each holding connections for seconds. */
const STALL_WORKERS = Number(process.env['SOAK_STALL_WORKERS'] ?? 4);
/** A worker that sends reviews with operation and namespace values no real review has, as fast as they are answered. */
const LABEL_WORKERS = 1;
/** Workers that send the costliest shapes of bench/shapes.ts (the largest allowed, and the 3 MiB ones refused), one after another. */
const COST_WORKERS = Number(process.env['SOAK_COST_WORKERS'] ?? 1);
const RELOAD_EVERY_MS = 10_000;
const SAMPLE_EVERY_MS = 5_000;
const WARMUP_MS = 15_000;
/** The bounds the soak holds the server to, after warm-up: */
const BOUNDS = {
  /** Open fds: the client keeps VALID_WORKERS + HOSTILE_WORKERS connections at most, plus slack for closing ones. */
  fdGrowth: 2 * (VALID_WORKERS + HOSTILE_WORKERS + STALL_WORKERS + LABEL_WORKERS + COST_WORKERS) + 16,
  /** Resident memory growth after warm-up, in MiB. */
  rssGrowthMiB: 64,
  /** Resident memory at any time: the Deployment's limit (manifests/base/deployment.yaml). */
  rssMaxMiB: 256,
  /** Growth of the /metrics text after warm-up, in bytes: labels from closed sets do not grow with distinct requests. */
  metricsGrowthBytes: 16 * 1024,
};

interface Counts {
  [k: string]: number;
}
const valid: Counts = { ok: 0, failed: 0, retried429: 0 };
const hostile: Counts = {};
const unexpected: string[] = [];
const failures: string[] = [];

async function main(): Promise<void> {
  const work = await mkdtemp(join(tmpdir(), 'sidecar-injector-soak-'));
  const templatesDir = join(work, 'templates');
  await cp('templates', templatesDir, { recursive: true });
  const originals = await readTemplates(templatesDir);
  const ca = await createCA('soak-ca', 1);
  const serving = await issueServingCert(ca, { dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'], validityDays: 1 });
  const certDir = join(work, 'certs');
  await mkdir(certDir);
  await writeFile(join(certDir, 'tls.crt'), serving.certPem);
  await writeFile(join(certDir, 'tls.key'), serving.keyPem);
  const [port, healthPort] = [await freePort(), await freePort()];

  // The server as deployed (the built one, which holds about 50 MiB less than through tsx) with SOAK_BUILT=1 after `npm run build`.
  const entry = process.env['SOAK_BUILT'] === '1' ? ['dist/src/cli/index.js'] : ['--import', 'tsx', 'src/cli/index.ts'];
  const child = spawn(
    process.execPath,
    [
      ...entry,
      'serve',
      '--host',
      '127.0.0.1',
      '--port',
      String(port),
      '--health-port',
      String(healthPort),
      '--cert-dir',
      certDir,
      '--templates-dir',
      templatesDir,
      '--templates-poll-seconds',
      '2',
      '--log-level',
      'error',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let serverLog = '';
  child.stderr!.on('data', (c: Buffer) => (serverLog = (serverLog + c.toString()).slice(-4000)));
  await waitReady(healthPort, child);
  const url = `https://127.0.0.1:${port}`;
  const agent = new Agent({ keepAlive: true, maxSockets: VALID_WORKERS + LABEL_WORKERS + COST_WORKERS, ca: ca.certPem });
  const costShapes = await buildCostShapes();
  console.log(`soak: ${SECONDS} s, ${VALID_WORKERS} valid + ${HOSTILE_WORKERS} hostile workers, server pid ${child.pid} on ${url}`);

  const started = Date.now();
  const until = started + SECONDS * 1000;
  const samples: Sample[] = [];
  const sampler = setInterval(() => void sample(child, started, healthPort).then((s) => samples.push(s)), SAMPLE_EVERY_MS);
  let metricsAfterWarmup = 0;
  const metricsSizer = setTimeout(() => void metricsSize(healthPort).then((n) => (metricsAfterWarmup = n)), WARMUP_MS);
  let reloads = 0;
  const reloader = (async () => {
    while (Date.now() + RELOAD_EVERY_MS < until) {
      await sleep(RELOAD_EVERY_MS);
      await rewriteTemplates(templatesDir, originals, reloads++);
    }
  })();
  const workers = [
    ...Array.from({ length: VALID_WORKERS }, () => loop(until, () => validReview(url, agent))),
    ...Array.from({ length: HOSTILE_WORKERS }, () => loop(until, () => hostileRequest(port, ca.certPem, Fast))),
    ...Array.from({ length: STALL_WORKERS }, () => loop(until, () => hostileRequest(port, ca.certPem, Stalls))),
    ...Array.from({ length: LABEL_WORKERS }, () => loop(until, () => distinctLabels(url, agent))),
    ...Array.from({ length: COST_WORKERS }, () => loop(until, () => costShape(url, agent, costShapes))),
  ];
  await Promise.all([...workers, reloader]);
  clearInterval(sampler);
  clearTimeout(metricsSizer);
  samples.push(await sample(child, started, healthPort));
  const reloadMetrics = await metricsLines(healthPort, 'template_reloads_total');
  const metricsBytes = { afterWarmup: metricsAfterWarmup, end: await metricsSize(healthPort) };
  const alive = child.exitCode === null;
  agent.destroy();
  child.kill('SIGTERM');
  await new Promise((r) => child.once('exit', r));
  await rm(work, { recursive: true, force: true });

  report({ samples, reloads, reloadMetrics, metricsBytes, alive, serverLog });
}

/** One valid review of a random kind, checked the way the apiserver checks it; retried on 429 like client-go. */
async function validReview(url: string, agent: Agent): Promise<void> {
  const kind = pick(['default', 'default', 'default', 'proxy', 'not-opted-in', 'unknown-template', 'v1beta1', 'validate']);
  const pod =
    kind === 'not-opted-in'
      ? { ...optedInPod(), metadata: { name: 'plain', labels: { app: 'web' } } }
      : kind === 'proxy'
        ? optedInPod({ annotations: { 'sidecar-injector.io/templates': 'proxy,log-shipper' } })
        : kind === 'unknown-template'
          ? optedInPod({ annotations: { 'sidecar-injector.io/templates': 'no-such-template' } })
          : optedInPod({ name: `web-${randomBytes(3).toString('hex')}` });
  const opts = kind === 'v1beta1' ? { apiVersion: 'admission.k8s.io/v1beta1' } : {};
  try {
    const { body, review } = await postReview(url, '/mutate', podReview(pod, opts), agent);
    const r = body.response;
    check(r.uid === review.request.uid, 'uid echoed');
    check(body.apiVersion === review.apiVersion, 'apiVersion echoed');
    if (kind === 'unknown-template') {
      check(r.allowed === false && r.status?.code === 400, 'unknown template refused with 400');
    } else if (kind === 'not-opted-in') {
      check(r.allowed === true && r.patch === undefined, 'a pod that did not opt in is left alone');
    } else {
      check(r.allowed === true && r.patchType === 'JSONPatch', `injected: ${JSON.stringify(r.status ?? r)}`);
      const patched = applyPatchV4(pod, decodePatch(r));
      const problems = podProblems(patched);
      check(problems.length === 0, `patched pod valid: ${problems.join('; ')}`);
      if (kind === 'validate') {
        const v = await postReview(url, '/validate', podReview(patched), agent);
        check(v.body.response.allowed === true, `validate admits the injected pod: ${JSON.stringify(v.body.response.status)}`);
        const bare = await postReview(url, '/validate', podReview(pod), agent);
        check(bare.body.response.allowed === false && bare.body.response.status?.code === 403, 'validate refuses a pod without its sidecars');
      }
    }
    valid['ok']!++;
  } catch (err) {
    valid['failed']!++;
    if (failures.length < 20) failures.push(`${kind}: ${(err as Error).message}`);
  }
}

async function postReview(url: string, path: string, review: any, agent: Agent): Promise<{ body: any; review: any }> {
  for (let attempt = 0; ; attempt++) {
    const res = await post(`${url}${path}`, JSON.stringify(review), agent);
    if (res.status === 429 && attempt < 10) {
      valid['retried429']!++;
      await sleep(Number(res.retryAfter ?? 1) * 1000);
      continue;
    }
    if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${res.text.slice(0, 200)}`);
    return { body: JSON.parse(res.text), review };
  }
}

function post(url: string, body: string, agent: Agent): Promise<{ status: number; text: string; retryAfter?: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'POST', agent, headers: { 'content-type': 'application/json' }, timeout: 10_000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const retryAfter = res.headers['retry-after'];
        resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8'), ...(retryAfter !== undefined && { retryAfter }) });
      });
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error('no answer within 10 s (the apiserver default timeoutSeconds)')));
    req.on('error', reject);
    req.end(body);
  });
}

/** The hostile inputs of test/server/hostile.test.ts, one at random, each with the answer it must get. */
const Hostile: Record<string, (port: number, ca: string) => Promise<boolean>> = {
  malformedJson: async (port, ca) => (await tls(port, ca, [rawPost('/mutate', '{"apiVersion":')])).status === 400,
  notAReview: async (port, ca) => (await tls(port, ca, [rawPost('/mutate', '[1,2,3]')])).status === 400,
  uidMissing: async (port, ca) =>
    (await tls(port, ca, [rawPost('/mutate', JSON.stringify({ ...podReview(optedInPod()), request: { operation: 'CREATE' } }))])).status === 400,
  objectOtherKind: async (port, ca) => {
    // Opted in by its label, as in test/server/hostile.test.ts: an object that does not opt in is left alone whatever its kind.
    const r = await tls(port, ca, [
      rawPost(
        '/mutate',
        JSON.stringify(podReview({ apiVersion: 'v1', kind: 'Service', metadata: { name: 's', labels: { 'sidecar-injector.io/inject': 'true' } } })),
      ),
    ]);
    return r.status === 200 && r.text.includes('"allowed":false');
  },
  deepNesting: async (port, ca) => (await tls(port, ca, [rawPost('/mutate', '['.repeat(50_000) + ']'.repeat(50_000))])).status === 400,
  protoKeys: async (port, ca) => {
    const text = JSON.stringify(podReview(optedInPod({ annotations: { PROTO: 'x' } }))).replace('"PROTO"', '"__proto__"');
    return (await tls(port, ca, [rawPost('/mutate', text)])).status === 200;
  },
  bigIntegers: async (port, ca) => {
    const text = JSON.stringify(
      podReview(optedInPod({ spec: { containers: [{ name: 'web', image: 'nginx', securityContext: { runAsUser: 424242 } }] } })),
    ).replace('424242', '9007199254740993');
    const r = await tls(port, ca, [rawPost('/mutate', text)]);
    return r.status === 200 && !r.text.includes('900719925474099');
  },
  tooLarge: async (port, ca) => (await tls(port, ca, [rawPost('/mutate', 'x'.repeat(8 * 1024 * 1024))], 2_000)).status === 413,
  stalledBody: async (port, ca) => (await tls(port, ca, [rawPost('/mutate', JSON.stringify(podReview(optedInPod()))).slice(0, -40)], 20_000)).status === 408,
  /** Headers and one byte of body, then nothing: dropped with a 408 after --body-timeout, never holding a review slot. */
  stalledOneByte: async (port, ca) => {
    const body = JSON.stringify(podReview(optedInPod()));
    const r = await tls(port, ca, [rawPost('/mutate', body).slice(0, -(body.length - 1))], 20_000);
    return r.status === 408 && r.closed;
  },
  /** Reviews whose answers are never read, on several connections at once, for 5 s. */
  nonReader: async (port, ca) => {
    const request = rawPost(
      '/mutate',
      JSON.stringify(podReview(optedInPod({ spec: { containers: Array.from({ length: 200 }, (_, i) => ({ name: `c${i}`, image: 'nginx' })) } }))),
    );
    const sockets = await Promise.all(Array.from({ length: 8 }, () => openTls(port, ca)));
    for (const socket of sockets) {
      socket.pause();
      socket.on('error', () => {});
      socket.write(request.repeat(4));
    }
    await sleep(5_000);
    for (const socket of sockets) socket.destroy();
    return true;
  },
  stalledHeaders: async (port, ca) => (await tls(port, ca, ['POST /mutate HTTP/1.1\r\nHost: localhost\r\n'], 20_000)).status === 408,
  abortedBody: async (port, ca) => {
    const socket = await openTls(port, ca);
    socket.write(rawPost('/mutate', JSON.stringify(podReview(optedInPod()))).slice(0, -40));
    await sleep(50);
    socket.destroy();
    return true;
  },
  stalledHandshake: async (port) => (await exchange(await openTcp(port), [], 20_000)).closed,
  garbageTls: async (port) => (await exchange(await openTcp(port), [randomBytes(2048)], 5_000)).closed,
  plainHttp: async (port) => {
    const r = await exchange(await openTcp(port), [rawPost('/mutate', '{}')], 5_000);
    return r.closed && !r.text.startsWith('HTTP/');
  },
  http10: async (port, ca) => {
    const r = await tls(port, ca, [rawPost('/mutate', JSON.stringify(podReview(optedInPod())), {}, 'HTTP/1.0')]);
    return r.status === 200 && r.closed;
  },
  smuggling: async (port, ca) => {
    const r = await tls(port, ca, [
      `POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: localhost\r\n\r\n`,
    ]);
    return r.status === 400 && r.text.match(/HTTP\/1\.1 /g)?.length === 1;
  },
  hugeHeader: async (port, ca) => (await tls(port, ca, [rawPost('/mutate', '{}', { 'X-Pad': 'a'.repeat(20_000) })])).status === 431,
};

const Stalls = ['stalledBody', 'stalledOneByte', 'stalledHeaders', 'stalledHandshake', 'nonReader'];
const Fast = Object.keys(Hostile).filter((k) => !Stalls.includes(k));

/** Operation and namespace values no real review has: answered, counted under `other`, clipped in the log. */
async function distinctLabels(url: string, agent: Agent): Promise<void> {
  hostile['distinctLabels'] = (hostile['distinctLabels'] ?? 0) + 1;
  const tag = randomBytes(8).toString('hex');
  try {
    const skipped = await post(
      `${url}/mutate`,
      JSON.stringify(podReview(optedInPod(), { operation: `OP-${tag}`, namespace: `ns-${tag}-${'x'.repeat(500)}` })),
      agent,
    );
    const rejected = await post(`${url}/validate`, JSON.stringify(podReview(optedInPod(), { namespace: `ns-${tag}` })), agent);
    if (!(skipped.status === 200 && skipped.text.includes('"allowed":true') && rejected.status === 200 && rejected.text.includes('"allowed":false')))
      unexpected.push(`distinctLabels: ${skipped.status} ${rejected.status}`);
  } catch (err) {
    unexpected.push(`distinctLabels: ${(err as Error).message}`);
  }
}

/** A cost shape and the answer it must get, as the server's own code gives it in this process. */
interface CostShape {
  readonly name: string;
  readonly text: string;
  readonly expected: 'injected' | 'refused' | 'HTTP 400';
}

async function buildCostShapes(): Promise<CostShape[]> {
  const set = await loadTemplateSet('templates');
  return SoakShapes.map((name) => {
    const text = Shapes[name]!().text;
    const answer = handleReview(fresh(text), set);
    const expected = answer.startsWith('HTTP 400') ? 'HTTP 400' : answer.startsWith('refused') ? 'refused' : 'injected';
    return { name, text, expected };
  });
}

/** One review of a cost shape (each body distinct, as bench/shapes.ts sends them), checked against its expected answer. */
async function costShape(url: string, agent: Agent, shapes: readonly CostShape[]): Promise<void> {
  const shape = pick(shapes);
  const key = `cost:${shape.name}`;
  hostile[key] = (hostile[key] ?? 0) + 1;
  try {
    const res = await post(`${url}/mutate`, distinct(shape.text), agent);
    const response = res.status === 200 ? JSON.parse(res.text).response : undefined;
    const ok =
      shape.expected === 'HTTP 400'
        ? res.status === 400
        : shape.expected === 'refused'
          ? response?.allowed === false && response.status?.code === 400
          : response?.allowed === true && typeof response.patch === 'string';
    if (res.status === 429) hostile['cost:429'] = (hostile['cost:429'] ?? 0) + 1;
    else if (!ok) unexpected.push(`${key}: HTTP ${res.status} ${res.text.slice(0, 120)}`);
  } catch (err) {
    unexpected.push(`${key}: ${(err as Error).message}`);
  }
}

async function hostileRequest(port: number, ca: string, kinds: readonly string[]): Promise<void> {
  const name = pick(kinds);
  hostile[name] = (hostile[name] ?? 0) + 1;
  try {
    if (!(await Hostile[name]!(port, ca))) unexpected.push(name);
  } catch (err) {
    unexpected.push(`${name}: ${(err as Error).message}`);
  }
}

async function tls(port: number, ca: string, chunks: string[], waitMs = 10_000): ReturnType<typeof exchange> {
  return exchange(await openTls(port, ca), chunks, waitMs);
}

/**
 * Rewrites the templates directory: a changed valid set, now and then a broken file (rejected, last
 * good set kept) that the next round fixes. Each file is replaced whole (written aside, then
 * renamed), as the kubelet updates a ConfigMap volume: a file rewritten in place is empty for a
 * moment, and a reload that reads it then serves a set without that template (seen in a soak run
 * whose client was slowed by the cost shapes; docs/limits-and-security.md, "Proof").
 */
async function rewriteTemplates(dir: string, originals: Map<string, string>, round: number): Promise<void> {
  const broken = round % 4 === 3;
  const replace = async (file: string, text: string): Promise<void> => {
    // The loader skips dotfiles, so the file written aside is never read half-written.
    await writeFile(join(dir, `.${file}.tmp`), text);
    await rename(join(dir, `.${file}.tmp`), join(dir, file));
  };
  for (const [file, text] of originals) {
    // A changed value in every file makes every reload a real new set.
    await replace(file, text.replace(/memory: 32Mi/, `memory: ${33 + round}Mi`).replace(/periodSeconds: 5/, `periodSeconds: ${6 + round}`));
  }
  if (broken)
    await replace(
      'broken.yaml',
      'apiVersion: sidecar-injector.io/v1alpha1\nkind: SidecarTemplate\nmetadata: { name: broken }\nspec: { containers: [ { name: Bad_Name } ] }\n',
    );
  else await rm(join(dir, 'broken.yaml'), { force: true });
}

async function readTemplates(dir: string): Promise<Map<string, string>> {
  const files = (await readdir(dir)).filter((f) => f.endsWith('.yaml'));
  return new Map(await Promise.all(files.map(async (f) => [f, await readFile(join(dir, f), 'utf8')] as [string, string])));
}

interface Sample {
  readonly t: number;
  readonly fds: number;
  readonly rssMiB: number;
  /** The longest the server's event loop was blocked since the previous sample, ms (its nodejs_eventloop_lag_max_seconds: the longest delay of the last minute, which no scrape resets, so a block shows in the samples of the minute after it and the max over the run is the worst block). */
  readonly loopMaxMs: number;
}

async function sample(child: ChildProcess, started: number, healthPort: number): Promise<Sample> {
  const fds = (await readdir(`/proc/${child.pid}/fd`)).length;
  const status = await readFile(`/proc/${child.pid}/status`, 'utf8');
  const rssKiB = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
  const loopMaxMs = await eventLoopMaxMs(healthPort).catch(() => NaN);
  return { t: Math.round((Date.now() - started) / 1000), fds, rssMiB: Math.round(rssKiB / 102.4) / 10, loopMaxMs: Math.round(loopMaxMs) };
}

function report(r: {
  samples: Sample[];
  reloads: number;
  reloadMetrics: string[];
  metricsBytes: { afterWarmup: number; end: number };
  alive: boolean;
  serverLog: string;
}): void {
  const warm = r.samples.filter((s) => s.t * 1000 >= WARMUP_MS);
  const base = warm[0] ?? r.samples[0]!;
  const last = r.samples[r.samples.length - 1]!;
  const maxFds = Math.max(...warm.map((s) => s.fds));
  const maxRss = Math.max(...warm.map((s) => s.rssMiB));
  const fdGrowth = last.fds - base.fds;
  const rssGrowth = Math.round((last.rssMiB - base.rssMiB) * 10) / 10;
  const hostileTotal = Object.entries(hostile).reduce((a, [k, v]) => (k === 'cost:429' ? a : a + v), 0);
  const loops = warm
    .map((s) => s.loopMaxMs)
    .filter((v) => Number.isFinite(v))
    .sort((a, b) => a - b);
  const loop = { median: loops[Math.floor(loops.length / 2)] ?? 0, max: loops.at(-1) ?? 0 };
  const verdicts = {
    'server alive at the end': r.alive,
    'zero failed valid reviews': valid['failed'] === 0,
    'every hostile input got its expected answer': unexpected.length === 0,
    [`fd growth after warm-up <= ${BOUNDS.fdGrowth}`]: fdGrowth <= BOUNDS.fdGrowth,
    [`RSS growth after warm-up <= ${BOUNDS.rssGrowthMiB} MiB`]: rssGrowth <= BOUNDS.rssGrowthMiB,
    [`RSS always <= ${BOUNDS.rssMaxMiB} MiB`]: Math.max(...r.samples.map((s) => s.rssMiB)) <= BOUNDS.rssMaxMiB,
    [`/metrics growth after warm-up <= ${BOUNDS.metricsGrowthBytes} bytes`]: r.metricsBytes.end - r.metricsBytes.afterWarmup <= BOUNDS.metricsGrowthBytes,
  };
  const summary = {
    seconds: SECONDS,
    valid,
    hostile: { total: hostileTotal, ...hostile },
    unexpected: unexpected.slice(0, 20),
    failures,
    reloads: r.reloads,
    reloadMetrics: r.reloadMetrics,
    fds: { afterWarmup: base.fds, max: maxFds, end: last.fds, growth: fdGrowth },
    eventLoopMaxMsPerWindow: loop,
    rssMiB: { afterWarmup: base.rssMiB, max: maxRss, end: last.rssMiB, growth: rssGrowth },
    metricsBytes: r.metricsBytes,
    verdicts,
  };
  console.log(JSON.stringify(summary, null, 2));
  console.log(
    `\n| soak (${SECONDS} s; ${VALID_WORKERS} valid, ${HOSTILE_WORKERS} hostile, ${STALL_WORKERS} stalling, ${LABEL_WORKERS} distinct-label, ${COST_WORKERS} cost-shape workers) | value |\n|---|---|`,
  );
  console.log(
    `| hostile requests by kind | ${Object.entries(hostile)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')} |`,
  );
  console.log(`| valid reviews answered correctly / failed | ${valid['ok']} / ${valid['failed']} (429 retries: ${valid['retried429']}) |`);
  console.log(`| hostile requests (unexpected answers) | ${hostileTotal} (${unexpected.length}) |`);
  console.log(`| template rewrites (every ${RELOAD_EVERY_MS / 1000} s, every 4th broken) | ${r.reloads} |`);
  console.log(`| open fds after warm-up / max / end | ${base.fds} / ${maxFds} / ${last.fds} |`);
  console.log(`| RSS MiB after warm-up / max / end | ${base.rssMiB} / ${maxRss} / ${last.rssMiB} |`);
  console.log(
    `| event loop blocked at worst per ${SAMPLE_EVERY_MS / 1000} s sample, ms: median / max (nodejs_eventloop_lag_max_seconds, the last minute's longest) | ${loop.median} / ${loop.max} |`,
  );
  console.log(`| /metrics bytes after warm-up / end | ${r.metricsBytes.afterWarmup} / ${r.metricsBytes.end} |`);
  const ok = Object.values(verdicts).every(Boolean);
  for (const [k, v] of Object.entries(verdicts)) console.log(`${v ? 'PASS' : 'FAIL'} ${k}`);
  if (!ok && r.serverLog) console.log(`server stderr (tail):\n${r.serverLog}`);
  process.exitCode = ok ? 0 : 1;
}

function check(cond: boolean, what: string): void {
  if (!cond) throw new Error(`expected ${what}`);
}

async function loop(until: number, step: () => Promise<void>): Promise<void> {
  while (Date.now() < until) await step();
}

function pick<T>(items: readonly T[]): T {
  return items[Math.floor(Math.random() * items.length)]!;
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as AddressInfo;
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });
}

async function waitReady(healthPort: number, child: ChildProcess): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (child.exitCode !== null) throw new Error(`server exited with ${child.exitCode}`);
    if ((await healthGet(healthPort, '/readyz').catch(() => undefined))?.status === 200) return;
    await sleep(100);
  }
  throw new Error('server did not become ready in 20 s');
}

async function metricsSize(healthPort: number): Promise<number> {
  return Buffer.byteLength((await healthGet(healthPort, '/metrics')).text);
}

async function metricsLines(healthPort: number, name: string): Promise<string[]> {
  const res = await healthGet(healthPort, '/metrics');
  return res.text.split('\n').filter((l) => l.includes(name) && !l.startsWith('#'));
}

function healthGet(port: number, path: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    httpRequest({ host: '127.0.0.1', port, path }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
    })
      .on('error', reject)
      .end();
  });
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
