// What the tests share: the live server run.sh started, and two small
// helpers. Everything comes from the environment run.sh sets; the tests
// never start or stop the server themselves.
import { execFile } from 'node:child_process';
import https from 'node:https';
import { promisify } from 'node:util';

function need(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run these tests through .ci/realclients/run.sh`);
  return v;
}

export const env = {
  base: need('KILN_BASE'), // https://127.0.0.1:PORT, the issuer
  get fhir() { return this.base + '/fhir'; },
  token: need('KILN_TOKEN'), // the admin's bearer token from POST /auth/login
  bin: need('KILN_BIN'),
  data: need('KILN_DATA'),
  log: need('KILN_LOG'), // the server's log file
  clientId: need('KILN_CLIENT_ID'),
  clientSecret: need('KILN_CLIENT_SECRET'),
  otherId: need('KILN_OTHER_CLIENT_ID'),
  otherSecret: need('KILN_OTHER_CLIENT_SECRET'),
  allowedOrigin: need('KILN_ALLOWED_ORIGIN'), // in --cors-origins
  otherOrigin: need('KILN_OTHER_ORIGIN'), // not in it
};

// raw sends one HTTPS request with Node's own client and returns the status,
// the headers and the body bytes exactly as sent: no decompression, no
// redirects, so gzip and HEAD can be checked as they are on the wire. The
// server's self-signed certificate is trusted through NODE_EXTRA_CA_CERTS.
export function raw(method, path, { headers = {}, body } = {}) {
  const url = new URL(path, env.base);
  return new Promise((resolve, reject) => {
    const req = https.request(url, { method, headers, timeout: 30_000 }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`${method} ${path}: no answer in 30 s`)));
    req.on('error', reject);
    if (body !== undefined) req.write(body);
    req.end();
  });
}

// kilnAdmin runs `kiln admin ARGS… --data DIR` beside the running server,
// as an operator would, and returns its output.
export async function kilnAdmin(...args) {
  const { stdout, stderr } = await promisify(execFile)(env.bin, ['admin', ...args, '--data', env.data], { timeout: 60_000 });
  return { stdout, stderr };
}

// A short description of an HTTP answer for assertion messages (never the
// Authorization header or a token).
export function show(res, what = '') {
  const b = Buffer.isBuffer(res.body) ? res.body.toString('utf8') : String(res.body ?? '');
  return `${what} → ${res.status} ${b.slice(0, 300)}`;
}
