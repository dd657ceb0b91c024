import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createMetrics } from '../../src/metrics/metrics.js';

type Obj = Record<string, any>;

const dashboard = JSON.parse(readFileSync('dashboards/sidecar-injector.json', 'utf8')) as Obj;
const panels = (dashboard.panels as Obj[]).filter((p) => p.type !== 'row');

/**
 * The kube-apiserver's admission webhook metrics (k8s.io/apiserver pkg/admission/metrics/metrics.go,
 * shared/notes/webhook-facts.md §3.5): the dashboard's "API server side" row reads them.
 */
const APISERVER_METRICS = ['apiserver_admission_webhook_fail_open_count', 'apiserver_admission_webhook_admission_duration_seconds_bucket', 'apiserver_admission_webhook_rejection_count', 'apiserver_admission_webhook_request_total'];

/** Every series name the injector exports (a histogram as its _bucket, _sum and _count series). */
async function exportedNames(): Promise<Set<string>> {
  const metrics = await createMetrics().registry.getMetricsAsJSON();
  return new Set(metrics.flatMap((m) => (String(m.type) === 'histogram' ? ['_bucket', '_sum', '_count'].map((s) => m.name + s) : [m.name])));
}

const KEYWORDS = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'offset', 'bool', 'and', 'or', 'unless']);

/**
 * The metric names a PromQL expression reads: what is left once strings, label matchers, ranges,
 * grouping clauses, function calls, keywords and numbers are taken out.
 */
function metricNames(expr: string): string[] {
  const stripped = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const names: string[] = [];
  for (const m of stripped.matchAll(/[A-Za-z_:][A-Za-z0-9_:]*/g)) {
    const after = stripped.slice(m.index + m[0].length).trimStart();
    if (after.startsWith('(') || KEYWORDS.has(m[0])) continue;
    names.push(m[0]);
  }
  return names;
}

describe('Grafana dashboard', () => {
  it('finds metric names in PromQL the way the test relies on', () => {
    assert.deepEqual(metricNames('histogram_quantile(0.99, sum by (le, endpoint) (rate(a_bucket{x=~"y|z"}[$__rate_interval])))'), ['a_bucket']);
    assert.deepEqual(metricNames('min(b{namespace=~"$namespace"}) - time()'), ['b']);
    assert.deepEqual(metricNames('sum(rate(c[5m])) / sum without (pod) (rate(d{e="f"}[5m]))'), ['c', 'd']);
  });

  it('reads only metrics the injector exports (or the apiserver metrics it names), in every panel and variable', async () => {
    const known = new Set([...(await exportedNames()), ...APISERVER_METRICS]);
    const exprs = panels.flatMap((p) => (p.targets as Obj[]).map((t) => ({ panel: p.title as string, expr: t.expr as string })));
    for (const v of dashboard.templating.list as Obj[]) if (v.type === 'query') exprs.push({ panel: `variable ${v.name}`, expr: /label_values\(([^,]+),/.exec(v.query.query)![1]! });
    assert.ok(exprs.length >= 15);
    for (const { panel, expr } of exprs) {
      const names = metricNames(expr);
      assert.ok(names.length > 0, `${panel}: ${expr} reads no metric`);
      for (const name of names) assert.ok(known.has(name), `${panel}: ${name} is not a metric the injector exports`);
    }
  });

  it('shows reviews by decision, latency, validator rejections, reloads and certificate expiry', () => {
    const reads = (metric: string) => panels.filter((p) => (p.targets as Obj[]).some((t) => metricNames(t.expr).includes(metric))).map((p) => p.title);
    assert.ok(panels.some((p) => p.targets.some((t: Obj) => /sum by \(decision\) \(rate\(sidecar_injector_reviews_total/.test(t.expr))), 'reviews by decision');
    for (const metric of ['sidecar_injector_review_duration_seconds_bucket', 'sidecar_injector_validation_rejections_total', 'sidecar_injector_template_reloads_total', 'sidecar_injector_certificate_expiry_timestamp_seconds']) {
      assert.ok(reads(metric).length > 0, `a panel reads ${metric}`);
    }
  });

  it('is a dashboard Grafana imports: unique panel ids, a Prometheus data source variable, panels inside the 24-column grid without overlap', () => {
    assert.equal(dashboard.uid, 'sidecar-injector');
    const ids = (dashboard.panels as Obj[]).map((p) => p.id);
    assert.equal(new Set(ids).size, ids.length);
    assert.ok((dashboard.templating.list as Obj[]).some((v) => v.type === 'datasource' && v.query === 'prometheus' && v.name === 'datasource'));
    const cells = new Set<string>();
    for (const p of dashboard.panels as Obj[]) {
      const { x, y, w, h } = p.gridPos;
      assert.ok(x >= 0 && w > 0 && x + w <= 24, `${p.title} fits the grid`);
      for (let i = x; i < x + w; i++) {
        for (let j = y; j < y + h; j++) {
          assert.ok(!cells.has(`${i},${j}`), `${p.title} overlaps another panel`);
          cells.add(`${i},${j}`);
        }
      }
      if (p.type !== 'row') for (const t of p.targets) assert.deepEqual(t.datasource, { type: 'prometheus', uid: '${datasource}' }, p.title);
    }
  });
});
