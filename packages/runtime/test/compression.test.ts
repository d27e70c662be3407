// zstd as the agent streams use it: what it compresses comes back whole; a message that
// inflates past the reader's limit is RESOURCE_EXHAUSTED (a small frame of zeros can claim
// megabytes), bytes that are not zstd are INVALID_ARGUMENT.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { test } from "node:test";
import { zstdCompressSync } from "node:zlib";
import { Code, ConnectError } from "@connectrpc/connect";
import { compressionZstd } from "@flotilla/runtime/compression";

test("a batch with ciphertext in it comes back whole, and smaller", async () => {
  const batch = Buffer.concat([Buffer.from("name: api, image: nginx:1.27, port: 80; ".repeat(2000)), randomBytes(4096)]);
  const compressed = await compressionZstd.compress(batch);
  assert.ok(compressed.byteLength < batch.byteLength / 4, `${compressed.byteLength} of ${batch.byteLength}`);
  assert.deepEqual(Buffer.from(await compressionZstd.decompress(compressed, batch.byteLength)), batch);
  assert.equal((await compressionZstd.decompress(new Uint8Array(0), 0)).byteLength, 0);
});

test("inflating past readMaxBytes is RESOURCE_EXHAUSTED; at it, the message is read", async () => {
  const bomb = zstdCompressSync(Buffer.alloc(1024 * 1024));
  assert.ok(bomb.byteLength < 1024);
  const refused = await compressionZstd.decompress(bomb, 1024 * 1024 - 1).then(
    () => undefined,
    (error: unknown) => error,
  );
  assert.ok(refused instanceof ConnectError);
  assert.equal(refused.code, Code.ResourceExhausted);
  assert.match(refused.message, /larger than configured readMaxBytes 1048575 after decompression/);
  assert.equal((await compressionZstd.decompress(bomb, 1024 * 1024)).byteLength, 1024 * 1024);
});

test("bytes that are not zstd are INVALID_ARGUMENT", async () => {
  const refused = await compressionZstd.decompress(Buffer.from("not a zstd frame"), 1024).then(
    () => undefined,
    (error: unknown) => error,
  );
  assert.ok(refused instanceof ConnectError);
  assert.equal(refused.code, Code.InvalidArgument);
  assert.match(refused.message, /zstd/);
});
