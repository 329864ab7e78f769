// Runs last: by now `kiln admin client add` has written beside the running
// server three times (run.sh twice, 20-oauth.test.mjs once), and the server
// has audited every request since. Both must share the audit hash chain
// without a conflict (issue 21, item 13).
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { describe, test } from 'node:test';
import { env, kilnAdmin } from './lib.mjs';

describe('kiln admin beside a running server', () => {
  test('the server logged no audit write conflict', async () => {
    const lines = (await readFile(env.log, 'utf8')).split('\n');
    const bad = lines.filter((l) => /audit: write failed|tail moved|version conflict/.test(l));
    assert.deepEqual(bad, [], `the server's log has ${bad.length} audit warnings`);
  });

  test('kiln admin audit verify: the chain is intact', async () => {
    let out;
    try {
      out = await kilnAdmin('audit', 'verify');
    } catch (err) {
      assert.fail(`kiln admin audit verify failed: ${err.stdout ?? ''}${err.stderr ?? ''}`);
    }
    assert.match(out.stdout, / is intact/, out.stdout + out.stderr);
    assert.doesNotMatch(out.stdout + out.stderr, /WARN|broken/i, out.stdout + out.stderr);
  });
});
