/**
 * The parts of core/v1 pod validation that a wrong injection breaks (what the apiserver checks after
 * the patch, in pkg/apis/core/validation): unique container names across all container lists,
 * unique volume names, every mount naming a volume, no mountPath twice in a container, unique port
 * names within a container, restartPolicy only on init containers (native sidecars).
 */
export function podProblems(pod: any): string[] {
  const problems: string[] = [];
  const spec = pod?.spec ?? {};
  const containers: any[] = spec.containers ?? [];
  const inits: any[] = spec.initContainers ?? [];
  const volumes = new Set<string>();
  for (const v of spec.volumes ?? []) {
    if (volumes.has(v.name)) problems.push(`duplicate volume ${v.name}`);
    volumes.add(v.name);
  }
  const names = new Set<string>();
  for (const c of [...inits, ...containers]) {
    if (typeof c.name !== 'string' || c.name === '') problems.push('container without a name');
    if (names.has(c.name)) problems.push(`duplicate container name ${c.name}`);
    names.add(c.name);
    const paths = new Set<string>();
    for (const m of c.volumeMounts ?? []) {
      if (!volumes.has(m.name)) problems.push(`container ${c.name} mounts unknown volume ${m.name}`);
      if (paths.has(m.mountPath)) problems.push(`container ${c.name} mounts ${m.mountPath} twice`);
      paths.add(m.mountPath);
    }
    const ports = new Set<string>();
    for (const p of c.ports ?? []) {
      if (p.name === undefined) continue;
      if (ports.has(p.name)) problems.push(`container ${c.name} has port name ${p.name} twice`);
      ports.add(p.name);
    }
  }
  for (const c of containers) if (c.restartPolicy !== undefined) problems.push(`container ${c.name} sets restartPolicy`);
  if (containers.length === 0) problems.push('pod has no containers');
  return problems;
}
