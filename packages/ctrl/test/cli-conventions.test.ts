// ctrl's flags follow the shared conventions: --help lists every flag with its FLOTILLA_CTRL_*
// variable; a former name still works and says, in the log, that it is deprecated.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { testDatabases } from "@flotilla/testkit/databases";
import { ADMIN_TOKEN } from "@flotilla/testkit/ctrl";
import { spawnCtrl } from "@flotilla/testkit/ctrl-process";
import { CTRL_OPTIONS } from "../src/config.ts";

const MAIN = fileURLToPath(new URL("../src/main.ts", import.meta.url));
const [{ db: sqlite }] = await testDatabases();

test("--help lists every flag, its variable and its default", () => {
  const { stdout, status } = spawnSync(process.execPath, [MAIN, "--help"], { encoding: "utf8" });
  assert.equal(status, 0);
  for (const { flag, default: fallback } of CTRL_OPTIONS) {
    const env = `FLOTILLA_CTRL_${flag.toUpperCase().replaceAll("-", "_")}`;
    assert.ok(stdout.includes(`  --${flag}`) && stdout.includes(`env ${env}${fallback ? `, default ${fallback}` : ""}\n`), `--${flag} in --help`);
  }
});

test("former names (FLOTILLA_<FLAG>, --poll-interval-ms) work, each with a deprecation warning; a bare number is no duration", async () => {
  const { url, drop } = await sqlite.create();
  try {
    const child = await spawnCtrl(url, ADMIN_TOKEN, ["--poll-interval-ms", "150"]);
    const exited = child.kill("SIGTERM");
    assert.equal(await exited, 0, child.log());
    assert.match(child.log(), / WARN flag --poll-interval-ms is deprecated and will be removed; use --poll-interval /);
    const wrong = spawnSync(process.execPath, [MAIN, "--database-url", url, "--poll-interval", "150"], {
      encoding: "utf8",
      env: { ...process.env, FLOTILLA_CTRL_ADMIN_TOKEN: ADMIN_TOKEN },
    });
    assert.equal(wrong.status, 1);
    assert.match(wrong.stderr, /--poll-interval "150": expected a duration such as 250ms, 30s, 10m, 1h/);
    const old = spawnSync(process.execPath, [MAIN, "--poll-interval", "soon"], { encoding: "utf8", env: { ...process.env, FLOTILLA_TRUST_DOMAIN: "x" } });
    assert.match(old.stderr, /environment variable FLOTILLA_TRUST_DOMAIN is deprecated and will be removed; use FLOTILLA_CTRL_TRUST_DOMAIN/);
  } finally {
    await drop();
  }
});
