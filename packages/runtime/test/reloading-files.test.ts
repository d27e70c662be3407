import assert from "node:assert/strict";
import { mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { ReloadingFiles } from "@flotilla/runtime";

const dir = mkdtempSync(join(tmpdir(), "flotilla-reloading-"));
after(() => rmSync(dir, { recursive: true, force: true }));

/** Loads "a" and "b" as text; a file starting with "bad" does not load. */
function watch(a: string, b: string) {
  const events: string[] = [];
  let loads = 0;
  const files = new ReloadingFiles({
    paths: [a, b],
    load: (contents) => {
      loads++;
      const text = contents.map(String);
      if (text.some((t) => t.startsWith("bad"))) throw new Error(`cannot load ${text.join("+")}`);
      return text.join("+");
    },
    onReloaded: (paths) => events.push(`reloaded ${paths.length}`),
    onRejected: (_, error) => events.push(`rejected: ${(error as Error).message}`),
  });
  return { files, events, loads: () => loads };
}

test("ReloadingFiles loads at construction, keeps the value while the contents stay, and loads a rotation once", () => {
  const a = join(dir, "a1");
  const b = join(dir, "b1");
  writeFileSync(a, "cert-1");
  writeFileSync(b, "key-1");
  const { files, events, loads } = watch(a, b);
  assert.equal(files.current(), "cert-1+key-1");
  assert.equal(files.current(), "cert-1+key-1");
  assert.equal(loads(), 1, "unchanged contents are not loaded again");
  // Replaced by rename, as cert-manager and kubelet do: seen by contents, not by mtime.
  writeFileSync(`${a}.new`, "cert-2");
  renameSync(`${a}.new`, a);
  assert.equal(files.current(), "cert-2+key-1");
  assert.equal(files.current(), "cert-2+key-1");
  assert.deepEqual(events, ["reloaded 2"]);
  assert.equal(loads(), 2);
});

test("ReloadingFiles keeps the previous value while a file is missing or the new contents do not load", () => {
  const a = join(dir, "a2");
  const b = join(dir, "b2");
  writeFileSync(a, "cert-1");
  writeFileSync(b, "key-1");
  const { files, events, loads } = watch(a, b);
  rmSync(b);
  assert.equal(files.current(), "cert-1+key-1", "mid-rotation: a missing file keeps the loaded value");
  writeFileSync(b, "bad-key");
  assert.equal(files.current(), "cert-1+key-1");
  assert.equal(files.current(), "cert-1+key-1");
  assert.deepEqual(events, ["rejected: cannot load cert-1+bad-key"], "rejected once for the same contents");
  assert.equal(loads(), 2);
  writeFileSync(b, "key-2");
  assert.equal(files.current(), "cert-1+key-2");
  assert.deepEqual(events, ["rejected: cannot load cert-1+bad-key", "reloaded 2"]);
});

test("ReloadingFiles refuses to start on files that do not load or do not exist", () => {
  const a = join(dir, "a3");
  const b = join(dir, "b3");
  writeFileSync(a, "bad-cert");
  writeFileSync(b, "key");
  assert.throws(() => watch(a, b), /cannot load bad-cert\+key/);
  assert.throws(() => watch(a, join(dir, "absent")), /ENOENT/);
});

test("with recheckMs, the files are read again at most that often", async () => {
  const a = join(dir, "a9");
  const b = join(dir, "b9");
  writeFileSync(a, "cert-1");
  writeFileSync(b, "key-1");
  const files = new ReloadingFiles({
    paths: [a, b],
    load: (contents) => contents.map(String).join("+"),
    onReloaded: () => {},
    onRejected: () => {},
    recheckMs: 300,
  });
  writeFileSync(a, "cert-2");
  assert.equal(files.current(), "cert-1+key-1", "within the interval: the loaded value, no read");
  await new Promise((resolve) => setTimeout(resolve, 350));
  assert.equal(files.current(), "cert-2+key-1", "after it: read again");
});
