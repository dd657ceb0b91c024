import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/**
 * process.memoryUsage() after full garbage collections, so a test can tell what is still held.
 * `gc` is exposed at run time (the test runner starts node without --expose-gc); each collection
 * is followed by a turn of the event loop, so what a finished callback dropped is collected too.
 */
export async function memoryAfterGc(): Promise<NodeJS.MemoryUsage> {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  for (let i = 0; i < 3; i++) {
    gc();
    await new Promise((r) => setImmediate(r));
  }
  return process.memoryUsage();
}
