// Loaded into a benchmarked server with `node --import ./bench/gc-observer.mjs` (bench/budget.ts):
// counts the garbage collections perf_hooks reports and their pauses, and on SIGUSR2 writes the
// totals so far to gc-<pid>.json in the folder BENCH_GC_DIR, so the bench reads them around a window.
import { writeFileSync } from 'node:fs';
import { constants, PerformanceObserver } from 'node:perf_hooks';

const totals = { minor: 0, major: 0, pauseMs: 0 };
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    if (entry.detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR) totals.major++;
    else totals.minor++;
    totals.pauseMs += entry.duration;
  }
}).observe({ entryTypes: ['gc'] });
process.on('SIGUSR2', () => writeFileSync(`${process.env.BENCH_GC_DIR}/gc-${process.pid}.json`, JSON.stringify(totals)));
