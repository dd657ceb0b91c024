import { request, type Agent } from 'node:https';

export interface HttpResult {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly text: string;
  json<T = any>(): T;
}

export interface PostOptions {
  readonly ca: string;
  readonly method?: string;
  readonly contentType?: string | null;
  readonly agent?: Agent;
  readonly headers?: Record<string, string>;
}

/** One HTTPS request that verifies the server against `ca`, as the apiserver does with caBundle. */
export function httpsRequest(url: string, body: string | Buffer | undefined, opts: PostOptions): Promise<HttpResult> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { ...opts.headers };
    if (opts.contentType !== null) headers['content-type'] = opts.contentType ?? 'application/json';
    const req = request(url, { method: opts.method ?? 'POST', ca: opts.ca, headers, ...(opts.agent && { agent: opts.agent }) }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json: () => JSON.parse(text) });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}
