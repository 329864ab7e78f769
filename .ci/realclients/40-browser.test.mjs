// A real browser: Debian's Chromium, headless, loads a small app from a
// second loopback origin and calls Kiln's FHIR API from it with a bearer
// token, as a SMART or clinic web app does. The browser, not this script,
// decides whether the CORS answers let the app read the responses.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';
import { chromium } from 'playwright-core';
import { env } from './lib.mjs';

const page = await readFile(new URL('./browser/app.html', import.meta.url));

// serveApp serves the app page on the origin's loopback port.
function serveApp(origin) {
  const { hostname, port } = new URL(origin);
  const srv = http.createServer((req, res) => {
    if (req.url === '/app.html') {
      res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8', 'Cache-Control': 'no-store' });
      res.end(page);
    } else {
      res.writeHead(204).end(); // favicon.ico: no noise in the console
    }
  });
  return new Promise((resolve, reject) => {
    srv.once('error', reject);
    srv.listen(Number(port), hostname, () => resolve(srv));
  });
}

const servers = [];
let browser;
const results = {}; // origin → { result, console }

async function runApp(origin) {
  const ctx = await browser.newContext();
  try {
    // The app's configuration, as a deployed app would have it, set before
    // its script runs; kept out of the URL so no error message can show it.
    await ctx.addInitScript((cfg) => { window.kilnConfig = cfg; }, { base: env.base, token: env.token });
    const p = await ctx.newPage();
    const consoleLines = [];
    p.on('console', (m) => consoleLines.push(m.text()));
    await p.goto(`${origin}/app.html`, { timeout: 30_000 });
    await p.waitForFunction(() => window.kilnResult !== undefined, null, { timeout: 30_000 });
    return { result: await p.evaluate(() => window.kilnResult), console: consoleLines };
  } finally {
    await ctx.close();
  }
}

before(async () => {
  servers.push(await serveApp(env.allowedOrigin), await serveApp(env.otherOrigin));
  browser = await chromium.launch({
    executablePath: process.env.KILN_CHROMIUM || '/usr/bin/chromium',
    headless: true,
    timeout: 60_000,
    // Playwright gives each launch a fresh, temporary --user-data-dir.
    args: [
      '--no-sandbox', // CI runs as root, where Chromium's sandbox cannot start
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      // Kiln serves its generated self-signed certificate. This browser only
      // ever talks to 127.0.0.1 in this test, so it skips certificate checks
      // rather than trusting a throwaway CA in a system store.
      '--ignore-certificate-errors',
    ],
  });
  results.allowed = await runApp(env.allowedOrigin);
  results.other = await runApp(env.otherOrigin);
});

after(async () => {
  await browser?.close();
  for (const s of servers) await new Promise((r) => s.close(r));
});

const explain = (r) => JSON.stringify(r.result) + (r.console.length ? '\nbrowser console: ' + r.console.join('\n  ') : '');

describe('chromium', () => {
  test('an app on an allowed origin searches /fhir/Patient?_count=1 with a bearer token', () => {
    const s = results.allowed.result.search;
    assert.equal(s.status, 200, explain(results.allowed));
    assert.equal(s.resourceType, 'Bundle');
    assert.equal(s.type, 'searchset');
  });

  test('an app on an allowed origin POSTs application/fhir+json and reads Location and ETag', () => {
    const c = results.allowed.result.create;
    assert.equal(c.status, 201, explain(results.allowed));
    assert.match(String(c.location), /\/fhir\/Patient\/[^/]+/, 'Location is not exposed to the app');
    assert.ok(c.etag, 'ETag is not exposed to the app');
  });

  test('an app on an origin not in --cors-origins is blocked by the browser', () => {
    const r = results.other;
    for (const call of ['search', 'create']) {
      assert.ok(r.result[call].error, `${call} was readable from ${env.otherOrigin}: ` + explain(r));
    }
    assert.ok(r.console.some((l) => /CORS policy/.test(l)), 'the browser reported no CORS refusal: ' + explain(r));
  });
});
