/**
 * The CPU budget of a review, line by line: where the server's CPU goes under apisim, from a
 * `--cpu-prof` profile of the server and the kernel's per-thread CPU counts, over the same window.
 *
 * How a line is measured:
 * - The main thread's CPU over the window is read from `/proc/<pid>/task/<pid>/schedstat` (time on
 *   a CPU, in ns). Its busy samples in the profile (every sample but `(idle)`, within the window)
 *   are split into lines by who owns each sample's stack: walking from the root to the leaf, the
 *   innermost frame that a rule of `Rules` names wins (so pino's write to stdout, down in node:net,
 *   is the log line's; Koa's `respond` calling `res.end` is the answer's write). A line's share of
 *   the busy samples times the main thread's CPU is its µs; the profile is wall time, so the shares
 *   are scaled to the CPU the kernel counted, and the bench prints how far the two were apart.
 * - `(garbage collector)` samples are the main thread's GC; the other threads (V8's helpers:
 *   concurrent and parallel GC, the optimizing compiler; libuv's pool) are read from their own
 *   schedstat, the profiler's own thread left out. `perf_hooks` GC entries (bench/gc-observer.mjs)
 *   count the collections and their pauses over the same window.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** A span of CLOCK_MONOTONIC time, in µs (what V8's profile timestamps and process.hrtime use). */
export interface Window {
  readonly start: number;
  readonly end: number;
}

/** Now, in µs of CLOCK_MONOTONIC. */
export function monotonicMicros(): number {
  return Number(process.hrtime.bigint() / 1000n);
}

/** The budget's lines, in the order a review meets them. */
export const Lines = [
  'transport: TLS, HTTP parsing, socket reads, event loop (node:https, V8 "(program)")',
  'transport: writing the answer (res.end: headers, TLS, socket)',
  'Koa (context, compose, respond)',
  'middleware: error edge, route, content type, slot',
  'middleware: body (raw-body, transit budget, timer)',
  'pipeline: answer cache (SHA-256 key, lookup, offer)',
  'pipeline: body limits scan (checkBody)',
  'JSON.parse of the body',
  'pipeline: envelope check, verdict, record',
  'handler: mutate (select, render, inject, diff, patch)',
  'answer JSON (encodeAnswer)',
  "the floor's handler (floor.mjs: JSON.parse, answer)",
  'log line (pino, destination, stdout)',
  'metrics (prom-client)',
  'other JavaScript of the product',
  'GC on the main thread ("(garbage collector)")',
  'other threads (V8 GC helpers and compiler, libuv pool)',
] as const;
export type Line = (typeof Lines)[number];

/**
 * Who owns a frame. Rules are tried in order on each frame; the innermost frame with an owner owns
 * the sample. Frames of node's internals own nothing (they serve whoever called them) except the
 * answer's write.
 */
const Rules: readonly { readonly line: Line; readonly url: RegExp; readonly fn?: RegExp }[] = [
  {
    line: 'log line (pino, destination, stdout)',
    url: /node_modules\/(pino|sonic-boom|on-exit-leak-free|quick-format-unescaped|fast-redact|thread-stream)\/|\/src\/log\.js$/,
  },
  { line: 'log line (pino, destination, stdout)', url: /\/src\/admission\/record\.js$/, fn: /^(logReviews|\(anonymous\)|)$/ },
  { line: 'metrics (prom-client)', url: /node_modules\/(prom-client|bintrees)\/|\/src\/metrics\// },
  { line: 'transport: writing the answer (res.end: headers, TLS, socket)', url: /^node:_http_outgoing$/, fn: /^(end|write_|_send|_writeRaw)$/ },
  { line: 'middleware: body (raw-body, transit budget, timer)', url: /node_modules\/(raw-body|bytes|iconv-lite|unpipe)\/|\/src\/server\/body\.js$/ },
  {
    line: 'middleware: error edge, route, content type, slot',
    url: /\/src\/server\/(admission-app|admission-server|status-answer|review-slots|connections|edge)\.js$/,
  },
  { line: 'pipeline: answer cache (SHA-256 key, lookup, offer)', url: /\/src\/admission\/answers\.js$/ },
  { line: 'pipeline: answer cache (SHA-256 key, lookup, offer)', url: /\/src\/admission\/codec\.js$/, fn: /^apiserverEnvelope$/ },
  { line: 'pipeline: body limits scan (checkBody)', url: /\/src\/admission\/codec\.js$/, fn: /^(checkBody|closingQuote|skip\w*|scan\w*)$/ },
  { line: 'JSON.parse of the body', url: /\/src\/admission\/codec\.js$/, fn: /^parseJson$/ },
  { line: 'answer JSON (encodeAnswer)', url: /\/src\/admission\/codec\.js$/, fn: /^encodeAnswer$/ },
  { line: 'pipeline: envelope check, verdict, record', url: /\/src\/admission\/(codec|pipeline|record|verdict|audit)\.js$/ },
  {
    line: 'handler: mutate (select, render, inject, diff, patch)',
    url: /\/src\/(admission\/(handlers|pod)|inject|templates|patch|kube)\b|node_modules\/fast-json-patch\//,
  },
  {
    line: 'Koa (context, compose, respond)',
    url: /node_modules\/(koa|koa-compose|delegates|on-finished|ee-first|statuses|http-errors|vary|cookies|encodeurl|escape-html|content-type|type-is|mime-types|accepts|only|destroy|fresh|depd|http-assert|koa-convert)\//,
  },
  { line: "the floor's handler (floor.mjs: JSON.parse, answer)", url: /\/bench\/floor(-koa)?\.mjs$/ },
  { line: 'other JavaScript of the product', url: /\/dist\/src\// },
];

interface ProfileNode {
  readonly id: number;
  readonly callFrame: { readonly functionName: string; readonly url: string };
  readonly children?: readonly number[];
}

interface Profile {
  readonly nodes: readonly ProfileNode[];
  readonly startTime: number;
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

/** The one .cpuprofile a server wrote into `dir`. */
export function readProfile(dir: string): Profile {
  const files = readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'));
  if (files.length !== 1) throw new Error(`${dir} holds ${files.length} profiles; expected one`);
  return JSON.parse(readFileSync(join(dir, files[0]!), 'utf8')) as Profile;
}

/** µs of busy samples within `window`, by line (main thread only), and their total. */
export function splitSamples(profile: Profile, window: Window): { readonly byLine: Map<Line, number>; readonly busy: number } {
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const owner = new Map<number, Line>();
  const ownerOf = (id: number): Line => {
    const known = owner.get(id);
    if (known !== undefined) return known;
    const frame = nodes.get(id)!.callFrame;
    let line: Line | undefined;
    if (frame.functionName === '(garbage collector)') line = 'GC on the main thread ("(garbage collector)")';
    else {
      const url = frame.url.replace(/^file:\/\//, '');
      line = Rules.find((r) => r.url.test(url) && (r.fn === undefined || r.fn.test(frame.functionName)))?.line;
    }
    const up = parent.get(id);
    // Innermost wins: a frame's own rule, else its caller's owner.
    const resolved = line ?? (up === undefined ? Lines[0] : ownerOf(up));
    owner.set(id, resolved);
    return resolved;
  };
  const byLine = new Map<Line, number>();
  let busy = 0;
  let at = profile.startTime;
  profile.samples.forEach((id, i) => {
    at += profile.timeDeltas[i] ?? 0;
    if (at < window.start || at > window.end) return;
    // A sample's delta is the time since the one before: the time this stack was seen for.
    const micros = profile.timeDeltas[i] ?? 0;
    if (nodes.get(id)!.callFrame.functionName === '(idle)') return;
    busy += micros;
    const line = ownerOf(id);
    byLine.set(line, (byLine.get(line) ?? 0) + micros);
  });
  return { byLine, busy };
}

/** CPU time of each thread of a process, in µs (schedstat: time on a CPU), with the thread's name. */
export function threadCpu(pid: number): Map<number, { readonly name: string; readonly micros: number }> {
  const out = new Map<number, { name: string; micros: number }>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const ns = Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
      out.set(Number(tid), { name: readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim(), micros: ns / 1000 });
    } catch {
      // The thread ended meanwhile.
    }
  }
  return out;
}

/** What each thread spent between two readings: the main thread, the others (the profiler's own thread left out). */
export function threadDelta(
  pid: number,
  before: ReturnType<typeof threadCpu>,
  after: ReturnType<typeof threadCpu>,
): { readonly main: number; readonly others: number; readonly profiler: number } {
  let main = 0;
  let others = 0;
  let profiler = 0;
  for (const [tid, t] of after) {
    const spent = t.micros - (before.get(tid)?.micros ?? 0);
    if (tid === pid) main += spent;
    else if (/prof/i.test(t.name)) profiler += spent;
    else others += spent;
  }
  return { main, others, profiler };
}

/** GC over a window, from perf_hooks (bench/gc-observer.mjs). */
export interface GcCounts {
  readonly minor: number;
  readonly major: number;
  readonly pauseMs: number;
}

/** A budget: µs per review of each line, and what it was computed from. */
export interface Budget {
  readonly reviews: number;
  readonly perReview: ReadonlyMap<Line, number>;
  /** Main thread CPU per review, as the kernel counted it, and the busy samples' wall time per review. */
  readonly mainCpu: number;
  readonly busyWall: number;
  /** The profiler's own thread, per review (not part of the sum). */
  readonly profiler: number;
  readonly gc: GcCounts;
  /** CPU per review of the same server without the profiler, measured in rounds alternating with these windows. */
  readonly unprofiled: number;
}

/** One measured window of a profiled server. */
export interface Measured {
  readonly window: Window;
  readonly reviews: number;
  readonly threads: ReturnType<typeof threadDelta>;
  readonly gc: GcCounts;
}

/** The budget of one server over its windows; `unprofiled` is the same load's CPU per review without the profiler. */
export function budgetOf(profile: Profile, windows: readonly Measured[], unprofiled: number): Budget {
  const byLine = new Map<Line, number>();
  let busy = 0;
  let main = 0;
  let others = 0;
  let profiler = 0;
  let reviews = 0;
  const gc = { minor: 0, major: 0, pauseMs: 0 };
  for (const w of windows) {
    // Each window's shares scale that window's main thread CPU.
    const split = splitSamples(profile, w.window);
    for (const [line, micros] of split.byLine) byLine.set(line, (byLine.get(line) ?? 0) + (split.busy > 0 ? (micros / split.busy) * w.threads.main : 0));
    busy += split.busy;
    main += w.threads.main;
    others += w.threads.others;
    profiler += w.threads.profiler;
    reviews += w.reviews;
    gc.minor += w.gc.minor;
    gc.major += w.gc.major;
    gc.pauseMs += w.gc.pauseMs;
  }
  const perReview = new Map<Line, number>(Lines.map((line) => [line, (byLine.get(line) ?? 0) / reviews]));
  perReview.set('other threads (V8 GC helpers and compiler, libuv pool)', others / reviews);
  return { reviews, perReview, mainCpu: main / reviews, busyWall: busy / reviews, profiler: profiler / reviews, gc, unprofiled };
}

/** The sum of a budget's lines, µs per review. */
export function budgetSum(b: Budget): number {
  let sum = 0;
  for (const v of b.perReview.values()) sum += v;
  return sum;
}
