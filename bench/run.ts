/**
 * `npm run bench`: the product (production build, real TLS, the bundled templates) against a floor
 * server (bare node:https + JSON.parse), driven alternately with the same keep-alive HTTPS load over
 * loopback, for a small, a typical and a large pod. Writes the table to BENCHMARKS.md.
 *
 * Flags: --quick (short phases, for a smoke run), --shapes a,b (the worst shapes of bench/shapes.ts to send; 'none' for none), --profile (both servers run with --cpu-prof into
 * bench/profiles/<server>/), --floor FILE (another floor server,
 * same arguments as bench/floor.mjs), --skip-koa-floor (under apisim, leave out the Koa floor, bench/floor-koa.mjs), --pods small,typical,large,optout, --product-flags='--log-level warn' (extra serve flags), --node-flags='--max-semi-space-size=4' (node flags for the product; default: those of the Dockerfile's ENTRYPOINT), --memory-limit 256Mi|none (each server's memory cgroup; default: the Deployment's limit), --no-write (print only), --seconds N, --rounds N, --connections N, --rate N.
 */
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { cpus, platform, release, tmpdir, totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { createCA, issueServingCert } from '../src/certs/pki.js';
import { bytesOf, deploymentMemoryLimit, makeMemoryCgroup, type MemoryCgroup } from './cgroup.js';
import { apisimBinary, apisimFiles, apisimLoad, Cores, type ApisimResult } from './apisim.js';
import { budgetOf, budgetSum, Lines, monotonicMicros, readProfile, threadCpu, threadDelta, type Budget, type GcCounts, type Measured } from './budget.js';
import { measureSteps, type Step } from './hotpath.js';
import { closedLoop, mergeSorted, quantile, steadyRate, type LoadResult, type Target } from './load.js';
import { DefaultSizes, Pods, reviewTemplate, type PodSize } from './pods.js';
import { measureShapes, measureShapesOverTls, Shapes, type ShapeFigures, type TlsFigures } from './shapes.js';
import { cpuMicros, freePort, httpOk, imageNodeFlags, memory, startServer, tlsOk, type ServerProcess } from './servers.js';
import { keepBlocks } from '../scripts/generated-block.js';

const { values: flags } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    profile: { type: 'boolean', default: false },
    'no-write': { type: 'boolean', default: false },
    seconds: { type: 'string' },
    rounds: { type: 'string' },
    connections: { type: 'string' },
    rate: { type: 'string', default: '500' },
    'steady-seconds': { type: 'string' },
    pods: { type: 'string', default: DefaultSizes.join(',') },
    shapes: { type: 'string', default: Object.keys(Shapes).join(',') },
    'product-flags': { type: 'string', default: '' },
    'node-flags': { type: 'string' },
    floor: { type: 'string', default: 'bench/floor.mjs' },
    'skip-koa-floor': { type: 'boolean', default: false },
    'skip-budget': { type: 'boolean', default: false },
    'skip-warn': { type: 'boolean', default: false },
    templates: { type: 'string', default: 'templates' },
    select: { type: 'string' },
    'memory-limit': { type: 'string' },
  },
});
const SECONDS = Number(flags.seconds ?? (flags.quick ? 1 : 3));
const ROUNDS = Number(flags.rounds ?? (flags.quick ? 2 : 3));
/** apisim, the apiserver's own kind of client, when APISIM names its binary (bench/apisim.ts). */
const APISIM = apisimBinary();
const CONNECTIONS = Number(flags.connections ?? (APISIM ? 4 : 8));
const RATE = Number(flags.rate);
const STEADY_SECONDS = Number(flags['steady-seconds'] ?? (flags.quick ? 2 : 8));
const ENTRY = 'dist/src/cli/index.js';
const DEPLOYMENT = 'manifests/base/deployment.yaml';
/**
 * Each server's memory limit, as its container's (bench/cgroup.ts): --memory-limit (bytes, Mi, Gi, or
 * 'none'), by default the Deployment's; undefined, with the reason, where there is none.
 */
const [MEMORY_LIMIT, NO_MEMORY_LIMIT] = memoryLimit(flags['memory-limit']);
function memoryLimit(flag: string | undefined): [{ readonly bytes: number; readonly source: string } | undefined, string] {
  if (flag === 'none') return [undefined, '--memory-limit none'];
  const [bytes, source] =
    flag === undefined ? [deploymentMemoryLimit(readFileSync(DEPLOYMENT, 'utf8')), `the Deployment's (${DEPLOYMENT})`] : [bytesOf(flag), '--memory-limit'];
  const probe = makeMemoryCgroup(`sidecar-injector-bench-${process.pid}-probe`, bytes);
  if (typeof probe === 'string') return [undefined, probe];
  probe.remove();
  return [{ bytes, source }, ''];
}

/** The templates the product serves: every YAML file of the folders of --templates, copied into one. */
const TEMPLATES_DIR = await templatesDir(flags.templates.split(','));
/** The pods, each selecting the templates of --select by name (sidecar-injector.io/templates), if given. */
const PODS = flags.select === undefined ? Pods : selecting(flags.select);
const SIZES = flags.pods.split(',').filter((s): s is PodSize => s in Pods);
const SHAPES = flags.shapes.split(',').filter((s) => Object.hasOwn(Shapes, s));

/** What one server did with one pod size under one kind of load, added up over the rounds. */
interface Figures {
  readonly results: LoadResult[];
  cpuMicros: number;
  /** The runs of apisim, when it drives the load. */
  readonly apisim?: ApisimResult[];
}

interface Row {
  readonly reviewsPerSecond: number;
  readonly p50: number;
  readonly p99: number;
  readonly p999: number;
  readonly cpuPerReview: number;
  readonly peakRssMb: number;
  readonly errors: number;
}

async function main(): Promise<void> {
  if (!existsSync(ENTRY)) throw new Error(`${ENTRY} is missing: run \`npm run build\` first (npm run bench does)`);
  // Under apisim this process, which reads the servers' stdout as a container runtime's log shim
  // would, runs on the client's core: a log line that wakes it must not hand it the server's core.
  if (APISIM !== undefined) execFileSync('taskset', ['-a', '-p', '-c', Cores.client, String(process.pid)], { stdio: 'ignore' });
  const { ca, certDir } = await makeCerts();
  const servers = await startServers(certDir, ca);
  const saturated: Record<string, Record<string, Row>> = {};
  const distinct: Record<string, Record<string, Row>> = {};
  const steady: Record<string, Record<string, Row>> = {};
  let shapesOverTls: TlsFigures[] = [];
  let shapesPeakRssMb = 0;
  const budgetSize: PodSize | undefined = SIZES.includes('typical') ? 'typical' : SIZES[0];
  let budget: BudgetFigures | undefined;
  try {
    for (const size of SIZES) {
      saturated[size] = await saturate(servers, size, ca, false);
      log(`${size}: ${describe(saturated[size]!)}`);
    }
    for (const size of SIZES) {
      distinct[size] = await saturate(servers, size, ca, true);
      log(`${size}, every pod distinct: ${describe(distinct[size]!)}`);
    }
    // Before the steady phase and the shapes, which leave the product a larger heap.
    if (APISIM !== undefined && !flags['skip-budget'] && budgetSize !== undefined) budget = await budgetPhase(servers, certDir, ca, budgetSize);
    for (const size of SIZES) {
      steady[size] = await steadyPhase(servers, size, ca);
      log(`${size} at ${RATE}/s: ${describe(steady[size]!)}`);
    }
    const product = servers.find((s) => s.name === 'product')!;
    // The shapes are built and sent by this process: it gets both cores again.
    if (APISIM !== undefined) execFileSync('taskset', ['-a', '-p', '-c', `${Cores.client},${Cores.server}`, String(process.pid)], { stdio: 'ignore' });
    if (SHAPES.length > 0) {
      shapesOverTls = await measureShapesOverTls(product.port, healthPorts.get(product)!, ca, SHAPES, flags.quick ? 3 : 10, product.child.pid);
      for (const f of shapesOverTls)
        log(
          `${f.name} over TLS: ${f.status}, median ${f.medianMs.toFixed(0)} ms, event loop blocked up to ${f.loopMedianMs.toFixed(0)} ms (median; worst ${f.loopWorstMs.toFixed(0)}), main thread CPU ${f.mainCpuMedianMs.toFixed(0)} ms (worst ${f.mainCpuWorstMs.toFixed(0)}; waited for a core up to ${f.runQueueWorstMs.toFixed(0)}), a small review meanwhile waited up to ${f.probeWorstMs.toFixed(0)} ms`,
        );
      shapesPeakRssMb = memory(product.child.pid!).peak / 2 ** 20;
    }
  } finally {
    await Promise.all(servers.map((s) => s.stop()));
  }
  // The steps first: the shapes leave this process a heap and a string table that slow every later step.
  const steps = SIZES.length > 0 ? await measureSteps(SIZES.includes('typical') ? 'typical' : SIZES[0]!, flags.quick ? 3000 : 20000) : [];
  const shapeSteps = SHAPES.length > 0 ? await measureShapes(SHAPES, flags.quick ? 3 : 10) : [];
  const report =
    render(servers, saturated, distinct, steady, steps) +
    (budget && budgetSize ? renderBudget(budget, budgetSize) : '') +
    renderShapes(shapeSteps, shapesOverTls, shapesPeakRssMb);
  process.stdout.write(`\n${report}`);
  if (!flags['no-write'] && !flags.quick) {
    // Sections other scripts write (scripts/policy-cost.ts) are kept.
    await writeFile('BENCHMARKS.md', keepBlocks(await readFile('BENCHMARKS.md', 'utf8').catch(() => ''), report));
    log('wrote BENCHMARKS.md');
  }
  if (flags.profile)
    log('CPU profile of the product written to bench/profiles/{product,floor} (summarize: node --import tsx bench/profile.ts bench/profiles/product)');
}

/** The budget of each load: each measured server's (the floors' and the product's), each line in µs per review, by server name. */
type BudgetFigures = Record<'replicaset' | 'distinct', ReadonlyMap<string, Budget>>;

/**
 * The budget (bench/budget.ts): a second floor, Koa floor and product, each with --cpu-prof and
 * the GC observer, driven by apisim with the pods of one ReplicaSet, then with every pod distinct.
 * Each load warms up every server unmeasured, then runs ROUNDS rounds in which the unprofiled
 * server (of the phases above) and its profiled twin take turns: the twin's windows give the
 * lines, the unprofiled runs the CPU per review that their sum is checked against.
 */
async function budgetPhase(servers: readonly ServerProcess[], certDir: string, ca: string, size: PodSize): Promise<BudgetFigures> {
  // Kept after the run: node --import tsx bench/profile.ts bench/profiles/budget/product
  const dir = 'bench/profiles/budget';
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const observer = ['--import', pathToFileURL(resolve('bench/gc-observer.mjs')).href];
  process.env['BENCH_GC_DIR'] = resolve(dir);
  const twins: { readonly profiled: ServerProcess; readonly plain: ServerProcess; readonly dir: string }[] = [];
  try {
    for (const plain of servers.filter((s) => s.name !== WARN_PRODUCT)) {
      const profileDir = join(dir, plain.name === KOA_FLOOR ? 'koa-floor' : plain.name);
      // 200 samples a second: the profiler's signals cost the main thread little, and 3 rounds of 3 s still give each server 1800 samples a load.
      const profiled = ['--cpu-prof', `--cpu-prof-dir=${profileDir}`, `--cpu-prof-interval=${PROFILE_INTERVAL_US}`, ...observer];
      twins.push({ profiled: await startNamed(plain.name, profiled, certDir, ca), plain, dir: profileDir });
    }
    const windows = new Map<string, Measured[]>();
    const plainCpu = new Map<string, { micros: number; reviews: number }>();
    for (const kind of ['replicaset', 'distinct'] as const) {
      const load = (server: ServerProcess, seconds: number) =>
        apisimLoad({
          binary: APISIM!,
          port: server.port,
          caFile: apisimInput!.caFile,
          podFile: apisimInput!.podFiles[size]!,
          pid: server.child.pid!,
          connections: CONNECTIONS,
          distinct: kind === 'distinct',
          expectPatch: !FLOORS.has(server.name) && size !== 'optout',
          seconds,
          warmupSeconds: 0,
        });
      for (const twin of twins) for (const server of [twin.plain, twin.profiled]) await load(server, 1);
      for (let round = 0; round < ROUNDS; round++) {
        for (const twin of round % 2 === 0 ? twins : [...twins].reverse()) {
          const key = `${kind} ${twin.profiled.name}`;
          const plain = await load(twin.plain, SECONDS);
          const sum = plainCpu.get(key) ?? { micros: 0, reviews: 0 };
          plainCpu.set(key, { micros: sum.micros + (plain.cpuUsPerReq ?? NaN) * plain.ok, reviews: sum.reviews + plain.ok });
          const pid = twin.profiled.child.pid!;
          const gcBefore = await gcCounts(dir, pid);
          const before = threadCpu(pid);
          const start = monotonicMicros();
          const result = await load(twin.profiled, SECONDS);
          const end = monotonicMicros();
          const threads = threadDelta(pid, before, threadCpu(pid));
          const gcAfter = await gcCounts(dir, pid);
          for (const r of [plain, result])
            if (r.errors > 0) throw new Error(`${twin.profiled.name} answered ${r.errors} reviews wrongly in the budget run: ${r.firstError}`);
          const gc = { minor: gcAfter.minor - gcBefore.minor, major: gcAfter.major - gcBefore.major, pauseMs: gcAfter.pauseMs - gcBefore.pauseMs };
          windows.set(key, [...(windows.get(key) ?? []), { window: { start, end }, reviews: result.ok, threads, gc }]);
          log(
            `budget, ${kind}: ${twin.profiled.name} unprofiled ${plain.cpuUsPerReq?.toFixed(0)} µs/review; profiled: main thread ${(threads.main / result.ok).toFixed(0)}, other threads ${(threads.others / result.ok).toFixed(0)}`,
          );
        }
      }
    }
    // Stopped before their profiles are read: a profile is written on exit. The `finally` stops
    // them on an error too; stopping twice is harmless.
    await Promise.all(twins.map((t) => t.profiled.stop()));
    const of = (kind: keyof BudgetFigures): ReadonlyMap<string, Budget> =>
      new Map(
        twins.map((twin) => {
          const plain = plainCpu.get(`${kind} ${twin.profiled.name}`)!;
          return [twin.profiled.name, budgetOf(readProfile(twin.dir), windows.get(`${kind} ${twin.profiled.name}`)!, plain.micros / plain.reviews)];
        }),
      );
    return { replicaset: of('replicaset'), distinct: of('distinct') };
  } finally {
    await Promise.all(twins.map((t) => t.profiled.stop()));
  }
}

const PROFILE_INTERVAL_US = 5000;

/** The GC totals a server's observer (bench/gc-observer.mjs) has counted so far: it writes them on SIGUSR2. */
async function gcCounts(dir: string, pid: number): Promise<GcCounts> {
  const file = join(dir, `gc-${pid}.json`);
  rmSync(file, { force: true });
  process.kill(pid, 'SIGUSR2');
  for (let waited = 0; waited < 2000; waited += 5) {
    if (existsSync(file)) {
      try {
        return JSON.parse(readFileSync(file, 'utf8')) as GcCounts;
      } catch {
        // Being written.
      }
    }
    await new Promise((r) => setTimeout(r, 5));
  }
  throw new Error(`the GC observer of ${pid} did not answer`);
}

async function templatesDir(dirs: readonly string[]): Promise<string> {
  if (dirs.length === 1) return dirs[0]!;
  const into = await mkdtemp(join(tmpdir(), 'sidecar-injector-bench-templates-'));
  for (const dir of dirs) for (const file of readdirSync(dir).filter((f) => /\.ya?ml$/.test(f))) copyFileSync(join(dir, file), join(into, file));
  return into;
}

function selecting(names: string): typeof Pods {
  const select = (pod: object): object => {
    const p = structuredClone(pod) as { metadata: { annotations?: Record<string, string> } };
    p.metadata.annotations = { ...p.metadata.annotations, 'sidecar-injector.io/templates': names };
    return p;
  };
  return Object.fromEntries(Object.entries(Pods).map(([size, pod]) => [size, select(pod)])) as unknown as typeof Pods;
}

async function makeCerts(): Promise<{ ca: string; certDir: string }> {
  const ca = await createCA('bench-ca', 1);
  const serving = await issueServingCert(ca, { dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'], validityDays: 1 });
  const certDir = await mkdtemp(join(tmpdir(), 'sidecar-injector-bench-'));
  await writeFile(join(certDir, 'tls.crt'), serving.certPem);
  await writeFile(join(certDir, 'tls.key'), serving.keyPem);
  return { ca: ca.certPem, certDir };
}

/** The health port of each product started, where /metrics tells how long its event loop was blocked. */
const healthPorts = new Map<ServerProcess, number>();

/**
 * Starts the servers the phases compare: the floor, under apisim the Koa floor, the product and
 * the product with logs at warn; the product's start is timed up to a 200 from /readyz.
 */
async function startServers(certDir: string, ca: string): Promise<ServerProcess[]> {
  if (APISIM !== undefined) apisimInput = await apisimFiles(certDir, ca, PODS);
  const floor = await startNamed('floor', profileFlags('floor'), certDir, ca);
  const koaFloor = KOA_TOO ? [await startNamed(KOA_FLOOR, profileFlags('koa-floor'), certDir, ca)] : [];
  const product = await startNamed('product', profileFlags('product'), certDir, ca);
  log(`product ready in ${product.readyMs.toFixed(0)} ms (spawn to 200 from /readyz); floor in ${floor.readyMs.toFixed(0)} ms`);
  // The same product with its review lines off, for comparison: what the log line costs.
  const warn = WARN_TOO ? [await startNamed(WARN_PRODUCT, [], certDir, ca)] : [];
  return [floor, ...koaFloor, product, ...warn];
}

/** Starts one of the compared servers by name, with `extra` node flags (a profiler's) first. */
async function startNamed(name: string, extra: readonly string[], certDir: string, ca: string): Promise<ServerProcess> {
  const tls = [join(certDir, 'tls.crt'), join(certDir, 'tls.key')];
  if (name === 'floor' || name === KOA_FLOOR) {
    const port = await freePort();
    const args = name === 'floor' ? [flags.floor, String(port), ...tls] : [KOA_FLOOR_FILE, String(port), ...tls, await answerSizes()];
    return startServer(name, [...extra, ...args], port, () => tlsOk(port, ca), placed(name, port));
  }
  const [port, healthPort] = [await freePort(), await freePort()];
  const args = [
    ...extra,
    ...nodeFlags(),
    ENTRY,
    'serve',
    '--port',
    String(port),
    '--health-port',
    String(healthPort),
    '--host',
    '127.0.0.1',
    '--cert-dir',
    certDir,
    '--templates-dir',
    TEMPLATES_DIR,
    ...flags['product-flags'].split(' ').filter(Boolean),
    ...(name === WARN_PRODUCT ? ['--log-level', 'warn'] : []),
  ];
  const server = await startServer(name, args, port, () => httpOk(healthPort, '/readyz'), placed(name, port));
  healthPorts.set(server, healthPort);
  return server;
}

/**
 * The Koa floor (bench/floor-koa.mjs): the floor's work plus what the stack adds (Koa, raw-body,
 * the product's log line, an answer as long as the product's), beside the others under apisim
 * unless --skip-koa-floor.
 */
const KOA_FLOOR = 'Koa floor';
const KOA_FLOOR_FILE = 'bench/floor-koa.mjs';
const KOA_TOO = APISIM !== undefined && !flags['skip-koa-floor'];
/** The servers that answer without a patch. */
const FLOORS: ReadonlySet<string> = new Set(['floor', KOA_FLOOR]);

/**
 * For the Koa floor, the length of each pod's review body and of the product's answer to it,
 * "bodyBytes:answerBytes,...", from the build the servers run (dist/).
 */
async function answerSizes(): Promise<string> {
  type Dist = [typeof import('../src/templates/load.js'), typeof import('../src/admission/handlers.js'), typeof import('../src/admission/codec.js')];
  const [{ loadTemplateSet }, { createHandlers }, { decodeReview, encodeAnswer }] = (await Promise.all(
    ['templates/load.js', 'admission/handlers.js', 'admission/codec.js'].map((file) => import(pathToFileURL(resolve('dist/src', file)).href)),
  )) as Dist;
  const set = await loadTemplateSet(TEMPLATES_DIR);
  const mutate = createHandlers({ templates: () => set }).byPath.get('/mutate')!;
  return SIZES.map((size) => {
    const t = reviewTemplate(PODS[size]);
    const body = Buffer.concat([t.prefix, Buffer.from('00000000-0000-4000-8000-000000000001'), t.suffix]);
    const review = decodeReview(JSON.parse(body.toString('utf8')));
    return `${body.length}:${Buffer.byteLength(encodeAnswer(review, mutate(review.request).response))}`;
  }).join(',');
}

/** The product with logs at warn, run beside the others unless --skip-warn or the product flags set a level. */
const WARN_PRODUCT = 'product, logs at warn';
const WARN_TOO = !flags['skip-warn'] && !/--log-level/.test(flags['product-flags']);

/** Where a server runs: on the servers' core under apisim, in a memory cgroup of its own with MEMORY_LIMIT where the machine allows. */
function placed(name: string, port: number): { core?: string; cgroup?: MemoryCgroup } {
  const core = APISIM !== undefined ? { core: Cores.server } : {};
  if (MEMORY_LIMIT === undefined) return core;
  const cgroup = makeMemoryCgroup(`sidecar-injector-bench-${process.pid}-${name.replace(/\W+/g, '-')}-${port}`, MEMORY_LIMIT.bytes);
  if (typeof cgroup === 'string') throw new Error(cgroup);
  return { ...core, cgroup };
}

/** The product's node flags: --node-flags, else the image's own (the Dockerfile's ENTRYPOINT). */
function nodeFlags(): string[] {
  return flags['node-flags'] !== undefined ? flags['node-flags'].split(' ').filter(Boolean) : imageNodeFlags(readFileSync('Dockerfile', 'utf8'));
}

function profileFlags(name: string): string[] {
  return flags.profile ? ['--cpu-prof', `--cpu-prof-dir=bench/profiles/${name}`] : [];
}

function targetOf(server: ServerProcess, ca: string): Target {
  return { port: server.port, path: '/mutate', ca };
}

/** Warm-up, then ROUNDS rounds of the closed-loop load on each server, alternating which goes first. */
async function saturate(servers: readonly ServerProcess[], size: PodSize, ca: string, distinctPods: boolean): Promise<Record<string, Row>> {
  if (APISIM !== undefined) return apisimPhase(servers, size, { distinct: distinctPods, rounds: ROUNDS });
  const body = reviewTemplate(PODS[size], { distinct: distinctPods });
  const figures = new Map(servers.map((s) => [s.name, { results: [], cpuMicros: 0 } as Figures]));
  for (const s of servers) checkAnswer(s, size, await closedLoop(targetOf(s, ca), body, CONNECTIONS, Math.min(1.5, SECONDS)));
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? servers : [...servers].reverse();
    for (const s of order) await measure(s, figures.get(s.name)!, () => closedLoop(targetOf(s, ca), body, CONNECTIONS, SECONDS));
  }
  return Object.fromEntries(servers.map((s) => [s.name, row(s, figures.get(s.name)!)]));
}

/** A steady RATE reviews/s on each server in turn: the latency an apiserver sees at a normal load. */
async function steadyPhase(servers: readonly ServerProcess[], size: PodSize, ca: string): Promise<Record<string, Row>> {
  // Every pod distinct under apisim: the issue-20 figure is the p99 of distinct reviews at 500/s.
  if (APISIM !== undefined) return apisimPhase(servers, size, { distinct: true, rounds: 1, rate: RATE, seconds: STEADY_SECONDS });
  const body = reviewTemplate(PODS[size]);
  const out: Record<string, Row> = {};
  for (const s of servers) {
    const f: Figures = { results: [], cpuMicros: 0 };
    await measure(s, f, () => steadyRate(targetOf(s, ca), body, RATE, STEADY_SECONDS));
    out[s.name] = row(s, f);
  }
  return out;
}

/** Where apisim reads the CA and the pods (written once, by startServers). */
let apisimInput: { readonly caFile: string; readonly podFiles: Record<string, string> } | undefined;

/**
 * The same phase driven by apisim: rounds alternating between the servers, each a measured run
 * after apisim's own warm-up; the server's CPU per review is what apisim read of its /proc.
 */
async function apisimPhase(
  servers: readonly ServerProcess[],
  size: PodSize,
  opts: { readonly distinct: boolean; readonly rounds: number; readonly rate?: number; readonly seconds?: number },
): Promise<Record<string, Row>> {
  const figures = new Map(servers.map((s) => [s.name, { results: [], cpuMicros: 0, apisim: [] } as Figures]));
  for (let round = 0; round < opts.rounds; round++) {
    const order = round % 2 === 0 ? servers : [...servers].reverse();
    for (const s of order) {
      const result = await apisimLoad({
        binary: APISIM!,
        port: s.port,
        caFile: apisimInput!.caFile,
        podFile: apisimInput!.podFiles[size]!,
        pid: s.child.pid!,
        connections: CONNECTIONS,
        seconds: opts.seconds ?? SECONDS,
        distinct: opts.distinct,
        expectPatch: !FLOORS.has(s.name) && size !== 'optout',
        ...(opts.rate !== undefined && { rate: opts.rate }),
      });
      if (result.errors > 0) throw new Error(`${s.name} answered ${result.errors} ${size} reviews wrongly (apisim): ${result.firstError}`);
      figures.get(s.name)!.apisim!.push(result);
    }
  }
  return Object.fromEntries(servers.map((s) => [s.name, row(s, figures.get(s.name)!)]));
}

async function measure(server: ServerProcess, into: Figures, load: () => Promise<LoadResult>): Promise<void> {
  const pid = server.child.pid!;
  const before = cpuMicros(pid);
  const result = await load();
  into.cpuMicros += cpuMicros(pid) - before;
  into.results.push(result);
}

/** The product must really inject (the pods opt in); a fast wrong answer would make a meaningless table. */
function checkAnswer(server: ServerProcess, size: PodSize, r: LoadResult): void {
  if (r.errors > 0) throw new Error(`${server.name} answered ${r.errors} ${size} reviews wrongly: ${r.firstError}`);
  const response = JSON.parse(r.sample ?? '{}').response;
  if (response?.allowed !== true) throw new Error(`${server.name} did not allow the ${size} pod: ${r.sample}`);
  if (!FLOORS.has(server.name) && size !== 'optout' && typeof response.patch !== 'string')
    throw new Error(`product did not inject the ${size} pod: ${r.sample}`);
}

function row(server: ServerProcess, f: Figures): Row {
  if (f.apisim !== undefined) return apisimRow(server, f.apisim);
  const sorted = mergeSorted(f.results);
  const requests = f.results.reduce((n, r) => n + r.requests, 0);
  const seconds = f.results.reduce((n, r) => n + r.seconds, 0);
  return {
    reviewsPerSecond: requests / seconds,
    p50: quantile(sorted, 0.5),
    p99: quantile(sorted, 0.99),
    p999: quantile(sorted, 0.999),
    cpuPerReview: f.cpuMicros / requests,
    peakRssMb: memory(server.child.pid!).peak / 2 ** 20,
    errors: f.results.reduce((n, r) => n + r.errors, 0),
  };
}

/** A row from apisim's runs: rates and CPU over every review, latency quantiles the median run's. */
function apisimRow(server: ServerProcess, runs: readonly ApisimResult[]): Row {
  const reviews = runs.reduce((n, r) => n + r.ok, 0);
  const median = (pick: (r: ApisimResult) => number): number => {
    const values = runs.map(pick).sort((a, b) => a - b);
    return values[Math.floor(values.length / 2)] ?? NaN;
  };
  return {
    reviewsPerSecond: runs.reduce((n, r) => n + r.rps, 0) / runs.length,
    p50: median((r) => r.p50),
    p99: median((r) => r.p99),
    p999: median((r) => r.p999),
    cpuPerReview: runs.reduce((n, r) => n + (r.cpuUsPerReq ?? NaN) * r.ok, 0) / reviews,
    peakRssMb: memory(server.child.pid!).peak / 2 ** 20,
    errors: runs.reduce((n, r) => n + r.errors, 0),
  };
}

function describe(rows: Record<string, Row>): string {
  return Object.entries(rows)
    .map(
      ([name, r]) =>
        `${name} ${r.reviewsPerSecond.toFixed(0)}/s p99 ${r.p99.toFixed(2)} ms cpu ${r.cpuPerReview.toFixed(0)} us rss ${r.peakRssMb.toFixed(0)} MB${r.errors ? ` ERRORS ${r.errors}` : ''}`,
    )
    .join(' | ');
}

function render(
  servers: readonly ServerProcess[],
  saturated: Record<string, Record<string, Row>>,
  distinct: Record<string, Record<string, Row>>,
  steady: Record<string, Record<string, Row>>,
  steps: readonly Step[],
): string {
  const product = servers.find((s) => s.name === 'product')!;
  const cpu = cpus()[0]?.model ?? 'unknown CPU';
  const command = `npm run bench${process.argv.slice(2).length ? ` -- ${process.argv.slice(2).join(' ')}` : ''}`;
  const sizes = SIZES.map((s) => `${s} ${(reviewTemplate(PODS[s]).bytes / 1024).toFixed(1)} KB`).join(', ');
  const lines = [
    '# Benchmarks',
    '',
    `Produced by \`${command}\` on ${new Date().toISOString().slice(0, 10)}: ${cpus().length} × ${cpu}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, ${platform()} ${release()}, Node ${process.version}.`,
    '',
    `The product is the production build (\`${['node', ...nodeFlags(), 'dist/src/cli/index.js', 'serve'].join(' ')}\`, as the image starts it, real TLS, ${flags.templates === 'templates' ? 'the bundled templates' : `the templates of ${flags.templates}`}, ${logLevel()}-level`,
    'logs to a pipe that the bench reads, as a container runtime does); the floor is `bench/floor.mjs`, a bare `node:https` server that reads the body, `JSON.parse`s it and',
    `answers \`allowed: true\` with the uid. Both run as child processes; ${driverText()}`,
    `The review bodies are AdmissionReviews of opted-in pods (${sizes}); the product injects ${flags.select === undefined ? 'the default template' : `the templates each selects (\`sidecar-injector.io/templates: ${flags.select}\`)`}`,
    'into each. Server CPU is what the kernel charged to the server process (all threads, `/proc/<pid>/stat`)',
    'during the phase, divided by the reviews answered. Peak RSS is the process high-water mark (VmHWM) so far.',
    MEMORY_LIMIT !== undefined
      ? `Each server runs in a memory cgroup of its own limited to ${MEMORY_LIMIT.bytes / 2 ** 20} MiB, ${MEMORY_LIMIT.source}, as in its container: Node sizes V8's heap from that limit (bench/cgroup.ts).`
      : `The servers run without a memory limit (${NO_MEMORY_LIMIT}): V8 sizes its heap from the machine's memory, not from a container's limit as in a pod (bench/cgroup.ts).`,
    '',
    `Product ready to serve ${product.readyMs.toFixed(0)} ms after spawn (first 200 from /readyz; target < 1000 ms).`,
    ...(WARN_TOO
      ? [
          '',
          `The rows "${WARN_PRODUCT}" are a third server, the same product with \`--log-level warn\` (no review lines), measured in the same rounds: the targets apply to the product with its info lines.`,
        ]
      : []),
    '',
    `## Saturated: ${CONNECTIONS} keep-alive connections, ${ROUNDS} rounds of ${SECONDS} s per server, alternating`,
    '',
    'The pods of one ReplicaSet, as the apiserver sends them during a rollout or scale-up: the same pod each time, a',
    'fresh request uid per review. The product computes the first two answers, parses the third to confirm the kept',
    'answer, and answers the rest from its answer cache without parsing the body.',
    '',
    ...table(saturated),
    '',
    '## Saturated, every pod distinct (the answer cache never answers)',
    '',
    'The same load, but each review carries its uid in a pod label too, so every pod is new to the product: the cost',
    'of a pod seen for the first time, as when every pod comes from another Deployment.',
    '',
    ...table(distinct),
    '',
    `## Steady ${RATE} reviews/s for ${STEADY_SECONDS} s per server (latency counted from when each review was due)`,
    '',
    ...table(steady),
    '',
    'Targets for the typical pod (measured with apisim, 4 connections, client and server on their own cores, logs at info',
    'into a pipe that is read): CPU/review ≤ 1.2 × floor for the pods of one ReplicaSet and ≤ 2.0 × for every pod distinct',
    "(saturated), p99 < 5 ms at a steady 500 distinct reviews/s, peak RSS < 120 MB with the image's node flags and 7 templates,",
    'ready within 1 s. Under apisim the steady phase sends distinct pods; under the Node driver, the pods of one ReplicaSet.',
    '',
    `## Where a review's CPU goes, in process (\`bench/hotpath.ts ${SIZES.includes('typical') ? 'typical' : SIZES[0]}\`, hot loop, no network)`,
    '',
    '| step | CPU µs |',
    '| --- | ---: |',
    ...steps.map((s) => `| ${s.step} | ${s.micros.toFixed(1)} |`),
    '',
    'In the server the same code runs colder than in a hot loop, and the transport (TLS, HTTP parsing, the',
    'socket writes) costs the rest; `npm run bench -- --pods optout` measures the transport alone with a pod',
    'that does not opt in.',
    '',
  ];
  return lines.join('\n');
}

/** The budget table: each line's µs per review, their sum against the CPU measured without the profiler. */
function renderBudget(b: BudgetFigures, size: PodSize): string {
  const loads = [
    ['one ReplicaSet', b.replicaset],
    ['every pod distinct', b.distinct],
  ] as const;
  const columns = loads.flatMap(([load, byServer]) => [...byServer].map(([server, budget]) => ({ server, load, budget, byServer })));
  const cells = (f: (x: Budget) => string): string => columns.map((c) => f(c.budget)).join(' | ');
  // Each column's CPU against a floor's of the same load, measured without the profiler; the floors only against a lesser floor.
  const against = (floor: string): string =>
    columns
      .map((c) => {
        const base = c.byServer.get(floor);
        if (base === undefined || c.server === floor || (c.server === 'floor' && floor === KOA_FLOOR)) return '';
        return `${(c.budget.unprofiled / base.unprofiled).toFixed(2)}×`;
      })
      .join(' | ');
  const koa = b.replicaset.has(KOA_FLOOR);
  const lines = [
    `## Where a review's CPU goes: the budget (${size} pod, apisim, ${CONNECTIONS} connections, server and client on their own cores)`,
    '',
    `CPU µs per review of each line, from a second ${koa ? 'floor, Koa floor' : 'floor'} and product run with \`--cpu-prof\` and a \`perf_hooks\` GC observer`,
    `(\`bench/budget.ts\`), in ${ROUNDS} rounds of ${SECONDS} s alternating with the unprofiled servers of the phases above; the main`,
    "thread's CPU (the kernel's `schedstat`) split by the profile's busy samples in each window, each sample owned by the innermost",
    "frame a rule names (docs/performance.md says which); the other threads from their own `schedstat`, the profiler's thread left",
    'out. The sum is checked against the CPU per review of the unprofiled server in the alternating rounds.',
    ...(koa
      ? [
          '',
          'The Koa floor (`bench/floor-koa.mjs`) is the floor plus what the stack adds: Koa, raw-body, the review line written through the',
          "product's logger, an answer as long as the product's to each pod, and a safe answer cache (a repeated body known by the SHA-256 of",
          'its bytes after the uid, answered from its second sighting with a prepared text and the new uid): its lines are the measured floor',
          "of the product's Koa, body, log, answer cache and write lines; its handler line holds its parse, key, lookup and answer.",
        ]
      : []),
    '',
    `| line | ${columns.map((c) => `${c.server}, ${c.load}`).join(' | ')} |`,
    `| --- | ${columns.map(() => '---:').join(' | ')} |`,
    ...Lines.filter((line) => columns.some((c) => (c.budget.perReview.get(line) ?? 0) >= 0.05)).map(
      (line) => `| ${line} | ${cells((c) => (c.perReview.get(line) ?? 0).toFixed(1))} |`,
    ),
    `| **sum of the lines** | ${cells((c) => `**${budgetSum(c).toFixed(0)}**`)} |`,
    `| measured without the profiler, alternating rounds | ${cells((c) => c.unprofiled.toFixed(0))} |`,
    `| sum / measured | ${cells((c) => `${((100 * budgetSum(c)) / c.unprofiled).toFixed(0)}%`)} |`,
    `| **/ floor, measured** | ${against('floor')} |`,
    ...(koa ? [`| **/ Koa floor, measured** | ${against(KOA_FLOOR)} |`] : []),
    `| main thread: busy samples' wall time / its CPU | ${cells((c) => `${((100 * c.busyWall) / c.mainCpu).toFixed(0)}%`)} |`,
    `| GC (perf_hooks): scavenges / mark-compacts per 1000 reviews | ${cells((c) => `${((1000 * c.gc.minor) / c.reviews).toFixed(1)} / ${((1000 * c.gc.major) / c.reviews).toFixed(2)}`)} |`,
    `| GC (perf_hooks): pause µs per review | ${cells((c) => ((1000 * c.gc.pauseMs) / c.reviews).toFixed(1))} |`,
    `| the profiler's own thread (not in the sum) | ${cells((c) => c.profiler.toFixed(1))} |`,
    `| reviews in the windows | ${cells((c) => String(c.reviews))} |`,
    '',
  ];
  return lines.join('\n');
}

/** The product's log level: --log-level of --product-flags, else the default (info). */
function logLevel(): string {
  return /--log-level[ =](\w+)/.exec(flags['product-flags'])?.[1] ?? 'info';
}

/** Which client drove the load, for the report. */
function driverText(): string {
  if (APISIM === undefined) return `the load driver (\`bench/load.ts\`, Node) shares the same ${cpus().length} cores with them.`;
  return "the load driver is apisim (`../shared/tools/apisim`, the apiserver's own Go webhook client: reviews in its field order, keep-alive HTTP/1.1 over TLS, answers verified as it verifies them; every pod distinct gives each review its own pod name, `--distinct`), pinned to core 0 with the servers on core 1 (`taskset`).";
}

function renderShapes(steps: readonly ShapeFigures[], overTls: readonly TlsFigures[], peakRssMb: number): string {
  if (steps.length === 0) return '';
  const tls = new Map(overTls.map((f) => [f.name, f]));
  const idle = overTls[0]?.probeIdleMs ?? 0;
  const loopIdle = overTls[0]?.loopIdleMs ?? 0;
  const reviews = flags.quick ? 3 : 10;
  const lines = [
    "## Worst shapes within the apiserver's 3 MiB",
    '',
    'Each shape is built by `bench/shapes.ts` at the limits (docs/limits-and-security.md, "Limits per review"); key names and short strings that',
    "must be new to V8 are new in every review. Over TLS, the product's own measure comes first: each shape is sent",
    `${reviews} times, one review at a time, and around each review the product's \`/metrics\` is scraped; its`,
    "`nodejs_eventloop_lag_p99_seconds` (prom-client's `monitorEventLoopDelay`, reset at every scrape; with so few ticks its p99 is their maximum) is the longest the",
    'event loop was blocked meanwhile. Its timer ticks every 10 ms, so a block of B ms reads as B to B + 10 ms (with only small',
    `reviews going it read ${loopIdle.toFixed(1)} ms). Then the shape's own latency, and the worst latency of a small review sent`,
    `meanwhile from another thread (alone: ${idle.toFixed(1)} ms), which also counts the client's CPU on a shared machine. In process:`,
    "the synchronous work of one review (body scan, JSON.parse, shape check, the handler, the answer's JSON), wall and CPU",
    `milliseconds, and JSON.parse alone. Peak RSS of the product after the shapes: ${peakRssMb.toFixed(0)} MB.`,
    "The product's main-thread CPU is its event loop's CPU time (`/proc/<pid>/task/<pid>/schedstat`) from sending a review to",
    '30 ms after its answer, over 5 more reviews sent with nothing else: it bounds the work of the longest block, which the event',
    'loop measure over-reads by the time the main thread waited for a core on a shared machine (the worst such wait is in the last column).',
    '',
    '| shape | MiB | answer | event loop blocked, median / worst ms | main thread CPU, median / worst ms | over TLS median ms | small review waited ms | in process worst ms | median ms | CPU ms | JSON.parse ms | main thread waited for a core, worst ms |',
    '| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...steps.map((f) => {
      const t = tls.get(f.name);
      return `| ${f.name}: ${f.what} | ${(f.bytes / 2 ** 20).toFixed(2)} | ${f.answer.split(':')[0]} | ${t ? `${t.loopMedianMs.toFixed(0)} / ${t.loopWorstMs.toFixed(0)}` : '-'} | ${t ? `${t.mainCpuMedianMs.toFixed(0)} / ${t.mainCpuWorstMs.toFixed(0)}` : '-'} | ${t ? t.medianMs.toFixed(0) : '-'} | ${t ? t.probeWorstMs.toFixed(0) : '-'} | ${f.worstMs.toFixed(1)} | ${f.medianMs.toFixed(1)} | ${f.cpuMs.toFixed(1)} | ${f.parseMs.toFixed(1)} | ${t ? t.runQueueWorstMs.toFixed(0) : '-'} |`;
    }),
    '',
  ];
  return lines.join('\n');
}

function table(bySize: Record<string, Record<string, Row>>): string[] {
  const out = [
    '| pod | server | reviews/s | p50 ms | p99 ms | p99.9 ms | CPU µs/review | peak RSS MB |',
    '| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |',
  ];
  for (const [size, rows] of Object.entries(bySize)) {
    const floor = rows['floor']!;
    const product = rows['product']!;
    const fmt = (r: Row): string =>
      `${r.reviewsPerSecond.toFixed(0)} | ${r.p50.toFixed(2)} | ${r.p99.toFixed(2)} | ${r.p999.toFixed(2)} | ${r.cpuPerReview.toFixed(0)} | ${r.peakRssMb.toFixed(0)}`;
    const ratio = (a: number, b: number): string => `${(a / b).toFixed(2)}×`;
    out.push(`| ${size} | floor | ${fmt(floor)} |`);
    out.push(`| ${size} | product | ${fmt(product)} |`);
    out.push(
      `| ${size} | **product / floor** | ${ratio(product.reviewsPerSecond, floor.reviewsPerSecond)} | ${ratio(product.p50, floor.p50)} | ${ratio(product.p99, floor.p99)} | ${ratio(product.p999, floor.p999)} | **${ratio(product.cpuPerReview, floor.cpuPerReview)}** | ${ratio(product.peakRssMb, floor.peakRssMb)} |`,
    );
    const koa = rows[KOA_FLOOR];
    if (koa !== undefined) {
      out.push(`| ${size} | ${KOA_FLOOR} | ${fmt(koa)} |`);
      out.push(
        `| ${size} | product / ${KOA_FLOOR} | ${ratio(product.reviewsPerSecond, koa.reviewsPerSecond)} | ${ratio(product.p50, koa.p50)} | ${ratio(product.p99, koa.p99)} | ${ratio(product.p999, koa.p999)} | ${ratio(product.cpuPerReview, koa.cpuPerReview)} | ${ratio(product.peakRssMb, koa.peakRssMb)} |`,
      );
    }
    const warn = rows[WARN_PRODUCT];
    if (warn !== undefined) {
      out.push(`| ${size} | ${WARN_PRODUCT} | ${fmt(warn)} |`);
      out.push(
        `| ${size} | ${WARN_PRODUCT} / floor | ${ratio(warn.reviewsPerSecond, floor.reviewsPerSecond)} | ${ratio(warn.p50, floor.p50)} | ${ratio(warn.p99, floor.p99)} | ${ratio(warn.p999, floor.p999)} | ${ratio(warn.cpuPerReview, floor.cpuPerReview)} | ${ratio(warn.peakRssMb, floor.peakRssMb)} |`,
      );
    }
  }
  return out;
}

function log(message: string): void {
  process.stderr.write(`[bench] ${message}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`bench failed: ${(err as Error).stack ?? String(err)}\n`);
  process.exitCode = 1;
});
