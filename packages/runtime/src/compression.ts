// zstd for the agent streams' messages, beside gzip. A snapshot batch is mostly text that
// compresses well, but secret values arrive sealed (ciphertext, which does not compress), and
// gzip's fastest level spends about ten times as long on such bytes as zstd's level 1 does
// (docs/benchmarks.md, B1). ctrl and the agent both offer it; a client that does not (grpc-js,
// curl) negotiates gzip or nothing, as before.
import { constants, zstdCompressSync, zstdDecompress } from "node:zlib";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Compression } from "@connectrpc/connect/protocol";

/** zstd at level 1; compressing runs synchronously, as ctrl's gzip does (a thread-pool round trip costs more than a batch). */
export const compressionZstd: Compression = {
  name: "zstd",
  async compress(bytes) {
    const compressed = zstdCompressSync(bytes, { params: { [constants.ZSTD_c_compressionLevel]: 1 } });
    return new Uint8Array(compressed.buffer as ArrayBuffer, compressed.byteOffset, compressed.byteLength);
  },
  decompress(bytes, readMaxBytes) {
    if (bytes.length === 0) return Promise.resolve(new Uint8Array(0));
    return new Promise((resolve, reject) => {
      zstdDecompress(bytes, { maxOutputLength: readMaxBytes }, (error, out) => {
        if (!error) return resolve(new Uint8Array(out.buffer as ArrayBuffer, out.byteOffset, out.byteLength));
        const tooLarge = (error as NodeJS.ErrnoException).code === "ERR_BUFFER_TOO_LARGE";
        reject(
          tooLarge
            ? new ConnectError(`message is larger than configured readMaxBytes ${readMaxBytes} after decompression`, Code.ResourceExhausted)
            : new ConnectError(`zstd: ${error.message}`, Code.InvalidArgument),
        );
      });
    });
  },
};
