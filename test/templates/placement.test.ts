import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { insertPlaced, placementFault, type Placement } from '../../src/templates/placement.js';

const named = (...names: string[]) => names.map((name) => ({ name }));
const names = (list: readonly { name: string }[] | undefined) => (list ?? []).map((c) => c.name);

describe('placement', () => {
  const cases: [string, string[], [string, Placement][], string[]][] = [
    ['last appends', ['app'], [['s', 'last']], ['app', 's']],
    ['first goes ahead of everything', ['a', 'b'], [['s', 'first']], ['s', 'a', 'b']],
    ['several first keep template order', ['app'], [['s1', 'first'], ['s2', 'first']], ['s1', 's2', 'app']],
    ['before a named container', ['istio-proxy', 'app'], [['s', { before: 'app' }]], ['istio-proxy', 's', 'app']],
    ['after a named container', ['istio-proxy', 'app'], [['s', { after: 'istio-proxy' }]], ['istio-proxy', 's', 'app']],
    ['after a sidecar added just before', ['app'], [['s1', 'last'], ['s2', { after: 's1' }]], ['app', 's1', 's2']],
    ['a missing anchor falls back to last', ['app'], [['s', { before: 'linkerd-proxy' }]], ['app', 's']],
    ['before a first sidecar keeps later firsts behind it', ['app'], [['s1', 'first'], ['s2', { before: 's1' }], ['s3', 'first']], ['s2', 's1', 's3', 'app']],
  ];
  for (const [title, own, added, want] of cases) {
    it(title, () => {
      assert.deepEqual(names(insertPlaced(named(...own), added.map(([n, p]) => [{ name: n }, p] as const))), want);
    });
  }

  it('returns the very same list when nothing is added, so the patch is empty', () => {
    const own = named('app');
    assert.equal(insertPlaced(own, []), own);
    assert.equal(insertPlaced(undefined, []), undefined);
  });

  it('never reorders the pod\'s own containers', () => {
    const own = named('a', 'b', 'c');
    const out = names(insertPlaced(own, [[{ name: 'x' }, { before: 'c' }], [{ name: 'y' }, 'first'], [{ name: 'z' }, { after: 'a' }]]));
    assert.deepEqual(out.filter((n) => ['a', 'b', 'c'].includes(n)), ['a', 'b', 'c']);
  });

  it('accepts the four forms and explains anything else', () => {
    for (const ok of [undefined, 'first', 'last', { before: 'app' }, { after: 'istio-proxy' }]) assert.equal(placementFault(ok), undefined);
    assert.match(placementFault('middle') ?? '', /got "middle"/);
    assert.match(placementFault({ before: 'a', after: 'b' }) ?? '', /got keys "before", "after"/);
    assert.match(placementFault({ after: 'Not_A_Name' }) ?? '', /placement.after must be a container name/);
    assert.match(placementFault(3) ?? '', /placement must be/);
  });
});
