import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { SETS_KEPT, SetHistory, VERSIONS_KEPT } from '../../src/templates/history.js';
import type { TemplateSet } from '../../src/templates/load.js';
import type { CompiledTemplate } from '../../src/templates/template.js';

/** A set holding templates of the given name@version; only what the history reads is real. */
function set(digest: string, ...templates: string[]): TemplateSet {
  const map = new Map(templates.map((t) => {
    const [name = '', version = ''] = t.split('@');
    return [name, { name, version } as CompiledTemplate];
  }));
  return Object.freeze({ templates: map, defaults: [], digest, source: 'test' });
}

function clock(): { now: () => number; advance: (ms: number) => void } {
  let t = 1_000_000;
  return { now: () => t, advance: (ms) => void (t += ms) };
}

const WINDOW = 60_000;

describe('SetHistory', () => {
  it('hands out the same object for every review until a verdict could change', () => {
    const c = clock();
    const h = new SetHistory(set('s1', 'a@1'), { windowMs: WINDOW, now: c.now });
    const first = h.current();
    c.advance(WINDOW - 1);
    assert.equal(h.current(), first, 'the answer cache keys its entries by this object');
    assert.equal(first.history?.acceptsUnversioned, true);
    c.advance(1);
    const after = h.current();
    assert.notEqual(after, first, 'the end of the unversioned window is a new view');
    assert.equal(after.history?.acceptsUnversioned, false);
    assert.equal(h.current(), after);
  });

  it('remembers a replaced set for the window, newest first, then forgets it', () => {
    const c = clock();
    const s1 = set('s1', 'a@1');
    const s2 = set('s2', 'a@2');
    const h = new SetHistory(s1, { windowMs: WINDOW, now: c.now });
    c.advance(10_000);
    h.replace(s2);
    c.advance(10_000);
    h.replace(set('s3', 'a@3'));
    assert.deepEqual(h.current().history?.earlier.map((s) => s.digest), ['s2', 's1']);
    assert.equal(h.current().digest, 's3');
    c.advance(WINDOW - 10_000);
    assert.deepEqual(h.current().history?.earlier.map((s) => s.digest), ['s2'], 's1 was replaced a window ago');
    c.advance(10_000);
    assert.deepEqual(h.current().history?.earlier, []);
  });

  it('keeps at most SETS_KEPT earlier sets, and a set that comes back is current, not also earlier', () => {
    const c = clock();
    const h = new SetHistory(set('s0', 'a@0'), { windowMs: WINDOW, now: c.now });
    for (let i = 1; i <= SETS_KEPT + 3; i++) h.replace(set(`s${i}`, `a@${i}`));
    assert.equal(h.current().history?.earlier.length, SETS_KEPT);
    h.replace(set(`s${SETS_KEPT + 2}`, 'a@again'));
    assert.ok(!h.current().history?.earlier.some((s) => s.digest === `s${SETS_KEPT + 2}`));
  });

  it('knows every template version it served, past the window, up to VERSIONS_KEPT', () => {
    const c = clock();
    const h = new SetHistory(set('s0', 'a@0', 'b@0'), { windowMs: WINDOW, now: c.now });
    h.replace(set('s1', 'a@1', 'b@0'));
    c.advance(10 * WINDOW);
    const history = h.current().history!;
    assert.equal(history.knows('a', '0'), true);
    assert.equal(history.knows('a', '1'), true);
    assert.equal(history.knows('b', '1'), false);
    assert.equal(history.knows('a', '2'), false);
    for (let i = 2; i < VERSIONS_KEPT + 10; i++) h.replace(set(`s${i}`, `a@${i}`));
    assert.equal(h.current().history?.knows('b', '0'), false, 'the oldest versions go first');
    assert.equal(h.current().history?.knows('a', String(VERSIONS_KEPT + 9)), true);
  });

  it("knows a team's template version for that team's namespace only (issue 23)", () => {
    const log = { name: 'log', version: 'v1', namespace: 'team-a' } as CompiledTemplate;
    const teamA = Object.freeze({ templates: new Map([['log', log]]), defaults: [], digest: 'a', source: 'test' });
    const h = new SetHistory(Object.freeze({ ...set('s0'), namespaces: new Map([['team-a', teamA]]) }), { windowMs: WINDOW });
    const history = h.current().history!;
    assert.equal(history.knows('log', 'v1', 'team-a'), true);
    assert.equal(history.knows('log', 'v1', 'team-b'), false, "another team's template of the same name and content is another template");
    assert.equal(history.knows('log', 'v1'), false, 'nor is a file of that name');
  });

  it('passes a sighting of an unknown version on', () => {
    let calls = 0;
    const h = new SetHistory(set('s0', 'a@0'), { windowMs: WINDOW, onUnknownVersion: () => calls++ });
    h.current().history?.sawUnknownVersion();
    assert.equal(calls, 1);
  });

  it("keeps each namespace's history apart: another namespace's churn ages out none of it, and leaves its view's history the same object", () => {
    const c = clock();
    const view = (ns: string, digest: string, ...templates: string[]): TemplateSet => {
      const own = set(digest, ...templates);
      return Object.freeze({ ...own, templates: new Map([...own.templates].map(([n, t]) => [n, { ...t, namespace: ns }])) });
    };
    const whole = (quiet: string, busy: number): TemplateSet =>
      Object.freeze({ ...set(`${quiet}/${busy}`, 'wide@1'), namespaces: new Map([['quiet', view('quiet', quiet, `q@${quiet}`)], ['busy', view('busy', `b${busy}`, `b@${busy}`)]]) });
    const h = new SetHistory(whole('q1', 0), { windowMs: WINDOW, now: c.now });
    h.replace(whole('q2', 0));
    const quietHistory = h.current().namespaces?.get('quiet')?.history;
    assert.deepEqual(quietHistory?.earlier.map((s) => s.digest), ['q1']);
    const clusterHistory = h.current().history;
    for (let i = 1; i <= SETS_KEPT * 3; i++) h.replace(whole('q2', i));
    assert.deepEqual(h.current().namespaces?.get('quiet')?.history?.earlier.map((s) => s.digest), ['q1'], "the quiet namespace's earlier view is still there");
    assert.equal(h.current().namespaces?.get('quiet')?.history, quietHistory, 'the same history object: its answers stay cached');
    assert.equal(h.current().history, clusterHistory, 'nor did the cluster-wide view change, for namespaces without templates of their own');
    assert.equal(h.current().namespaces?.get('busy')?.history?.earlier.length, SETS_KEPT, 'the busy namespace keeps its own SETS_KEPT');
    for (let i = 0; i < VERSIONS_KEPT; i++) h.replace(whole('q2', 100 + i));
    assert.equal(h.current().history?.knows('q', 'q1', 'quiet'), true, "the busy namespace's versions never push out the quiet one's");
  });

  it('with a window of 0 remembers no set and trusts no unversioned status', () => {
    const h = new SetHistory(set('s0', 'a@0'), { windowMs: 0 });
    h.replace(set('s1', 'a@1'));
    assert.deepEqual(h.current().history?.earlier, []);
    assert.equal(h.current().history?.acceptsUnversioned, false);
  });
});
