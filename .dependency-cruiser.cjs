// The layers of src/ (docs/development.md, "Module map"). A module may import its own
// folder and any folder of a lower layer, never one of its own layer's other folders unless listed
// under `sideways`, never one above; and no import cycle anywhere. `npm run lint` runs it
// (`depcruise src`).
// scripts/layers.json: `layers`, lowest first; `sideways`, the pairs of folders of one layer that may
// import each other (the generated shipped webhooks are typed by kube/types.ts while
// kube/injector-webhooks.ts reads them; patch/diff.ts walks kube/types.ts's JSON; config's validator
// is generated); `knownUp`, imports up the layers still to remove: the SidecarTemplate store belongs
// beside the templates it keeps (src/templates/), not in src/kube/.
const { layers: LAYERS, sideways: SIDEWAYS, knownUp: KNOWN_UP } = require('./scripts/layers.json');

const escapeRegExp = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const pattern = (paths) => `^(${paths.map((p) => (p.endsWith('.ts') ? `${escapeRegExp(p)}$` : `${escapeRegExp(p)}/`)).join('|')})`;

const forbidden = [
  {
    name: 'no-cycle',
    comment: 'An import cycle means a shared piece lives in the wrong file: move it down a layer.',
    severity: 'error',
    from: {},
    to: { circular: true },
  },
  {
    name: 'server-transport-only',
    comment: 'The server knows reviews only through src/admission/: the answer cache generation is an opaque token (docs/development.md).',
    severity: 'error',
    from: { path: '^src/server/' },
    to: { path: '^src/(inject|templates)/' },
  },
];
LAYERS.forEach((layer, i) => {
  const above = LAYERS.slice(i + 1).flatMap((l) => l.paths);
  if (above.length > 0) {
    forbidden.push({
      name: `no-up-from-${layer.name}`,
      comment: `${layer.name} (${layer.paths.join(', ')}) imports only its own layer and those below`,
      severity: 'error',
      from: { path: pattern(layer.paths), pathNot: KNOWN_UP },
      to: { path: pattern(above) },
    });
  }
  for (const own of layer.paths.filter((p) => !p.endsWith('.ts'))) {
    const others = layer.paths.filter((p) => p !== own && !SIDEWAYS.some(([from, to]) => from === own && to === p));
    if (others.length === 0) continue;
    forbidden.push({
      name: `no-sideways-from-${own.replace('src/', '')}`,
      comment: `${own} does not import the other folders of its layer (${layer.name})`,
      severity: 'error',
      from: { path: `^${escapeRegExp(own)}/` },
      to: { path: pattern(others) },
    });
  }
});

module.exports = {
  forbidden,
  options: {
    doNotFollow: { path: 'node_modules' },
    // Type-only imports count: a cycle of types is still a cycle a reader follows.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
  },
};
