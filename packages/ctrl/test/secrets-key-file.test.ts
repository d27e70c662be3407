// The secrets key file is kept as a private key: made owner-only with an exclusive create,
// replaced whole when a key is added (a process that dies in the middle leaves the old file),
// and refused by ctrl and `pnpm secrets` when its group or others may read it. A database
// password on the command line earns the warning --admin-token earns.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, watch, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { SecretKeyRing } from "@flotilla/store";

const PKI_CLI = fileURLToPath(new URL("../src/pki-cli.ts", import.meta.url));
const SECRETS_CLI = fileURLToPath(new URL("../src/secrets-cli.ts", import.meta.url));
const MAIN = fileURLToPath(new URL("../src/main.ts", import.meta.url));

function run(script: string, args: string[], cwd?: string) {
  return spawnSync(process.execPath, [script, ...args], { encoding: "utf8", cwd });
}

/** A key file of `count` keys (a large one takes a while to write), owner-only. */
function bigKeyFile(file: string, count: number): string {
  const keys = Array.from({ length: count }, (_, i) => ({ id: `k${i}`, key: Buffer.alloc(32, i % 251).toString("base64") }));
  const text = `${JSON.stringify({ keys }, null, 2)}\n`;
  writeFileSync(file, text, { mode: 0o600 });
  return text;
}

function withDir(body: (dir: string) => Promise<void> | void) {
  return async () => {
    const dir = mkdtempSync(join(tmpdir(), "flotilla-key-file-"));
    try {
      await body(dir);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };
}

test(
  "secrets-key makes the file with an exclusive create, mode 0600, and never over an existing one",
  withDir((dir) => {
    const file = join(dir, "key.json");
    assert.equal(run(PKI_CLI, ["secrets-key", "--file", file]).status, 0);
    assert.equal(statSync(file).mode & 0o777, 0o600);
    const made = readFileSync(file, "utf8");
    const again = run(PKI_CLI, ["secrets-key", "--file", file]);
    assert.equal(again.status, 1);
    assert.match(again.stderr, /exists: --add appends a new key to it/);
    assert.equal(readFileSync(file, "utf8"), made, "the file is left as it was");
    assert.equal(run(PKI_CLI, ["secrets-key", "--file", file, "--add"]).status, 0);
    assert.equal(statSync(file).mode & 0o777, 0o600, "replaced owner-only");
    assert.equal((JSON.parse(readFileSync(file, "utf8")) as { keys: unknown[] }).keys.length, 2);
    assert.deepEqual(readdirSync(dir), ["key.json"], "no temporary file left");
  }),
);

test(
  "--add that dies while it writes (a file size limit; a kill as the new file appears) leaves the old key file whole",
  withDir(async (dir) => {
    const file = join(dir, "key.json");
    const old = bigKeyFile(file, 10_000);
    // Writes past 64 KiB fail (EFBIG): the process ends in the middle of its write.
    const limited = spawnSync("sh", ["-c", `ulimit -f 64; exec "$0" "$@"`, process.execPath, PKI_CLI, "secrets-key", "--file", file, "--add"], {
      encoding: "utf8",
    });
    assert.notEqual(limited.status, 0, "the write failed");
    assert.equal(readFileSync(file, "utf8"), old, "the old file is whole after a failed write");
    for (let attempt = 0; attempt < 3; attempt++) {
      const child = spawn(process.execPath, [PKI_CLI, "secrets-key", "--file", file, "--add"], { stdio: "ignore" });
      // SIGKILL at the first change in the directory: the new content is being written.
      const watcher = watch(dir, () => child.kill("SIGKILL"));
      await new Promise((resolve) => child.once("exit", resolve));
      watcher.close();
      const text = readFileSync(file, "utf8");
      const keys = (JSON.parse(text) as { keys: unknown[] }).keys.length;
      assert.ok(keys === 10_000 + attempt || keys === 10_001 + attempt, `a whole key file (${keys} keys)`);
      SecretKeyRing.parse(text, file);
      if (keys === 10_000 + attempt) assert.equal(text, readFileSync(file, "utf8"));
      // Start the next attempt from what is there.
      for (const name of readdirSync(dir)) if (name !== "key.json") rmSync(join(dir, name));
      if (keys === 10_000 + attempt) bigKeyFile(file, 10_001 + attempt);
    }
  }),
);

test(
  "ctrl, pnpm secrets and --add refuse a key file its group or others can read, naming the mode",
  withDir(async (dir) => {
    const file = join(dir, "key.json");
    assert.equal(run(PKI_CLI, ["secrets-key", "--file", file]).status, 0);
    chmodSync(file, 0o644);
    const rotate = run(SECRETS_CLI, ["rotate", "--secrets-key-file", file, "--database-url", `sqlite:${join(dir, "db")}`]);
    assert.equal(rotate.status, 1);
    assert.match(rotate.stderr, /--secrets-key-file .*key\.json: mode 0644 lets its group or others read it; a key file must be owner-only: chmod 600/);
    const add = run(PKI_CLI, ["secrets-key", "--file", file, "--add"]);
    assert.equal(add.status, 1);
    assert.match(add.stderr, /mode 0644 lets its group or others read it/);
    chmodSync(file, 0o640);
    const ctrl = spawnSync(process.execPath, [MAIN, "--database-url", `sqlite:${join(dir, "db")}`, "--listen", "127.0.0.1:0", "--secrets-key-file", file], {
      encoding: "utf8",
      cwd: dir,
      timeout: 60_000,
    });
    assert.equal(ctrl.status, 1);
    assert.match(ctrl.stdout + ctrl.stderr, /mode 0640 lets its group or others read it/);
  }),
);

test(
  "a database password in --database-url on the command line is warned about, as --admin-token is; --database-url-file is read",
  withDir(async (dir) => {
    const url = "mysql://flotilla:pw-on-the-command-line@127.0.0.1:1/none";
    const rotate = run(SECRETS_CLI, ["rotate", "--secrets-key-file", join(dir, "missing.json"), "--database-url", url]);
    assert.match(
      rotate.stderr,
      /warning: --database-url shows the database password to every user of this host \(process list\); use --database-url-file or FLOTILLA_CTRL_DATABASE_URL/,
    );
    assert.ok(!rotate.stderr.includes("pw-on-the-command-line"));
    const ctrl = spawnSync(process.execPath, [MAIN, "--database-url", url, "--listen", "127.0.0.1:0"], { encoding: "utf8", cwd: dir, timeout: 60_000 });
    const log = ctrl.stdout + ctrl.stderr;
    assert.match(log, / WARN --database-url shows the database password/);
    assert.ok(!log.includes("pw-on-the-command-line"), log);
    // From a file: no warning, and the URL is the one used.
    writeFileSync(join(dir, "url"), `sqlite:${join(dir, "from-file.db")}\n`, { mode: 0o600 });
    const child = spawn(process.execPath, [MAIN, "--database-url-file", join(dir, "url"), "--listen", "127.0.0.1:0"], {
      cwd: dir,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    for (const stream of [child.stdout, child.stderr]) {
      stream.on("data", (chunk) => {
        out += chunk;
        if (/serving on/.test(out)) child.kill("SIGTERM");
      });
    }
    await new Promise((resolve) => child.once("exit", resolve));
    assert.match(out, /serving on/);
    assert.ok(!/WARN --database-url/.test(out));
    assert.ok(statSync(join(dir, "from-file.db")).size > 0, "the file's URL is the database opened");
  }),
);
