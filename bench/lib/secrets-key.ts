// A secrets key file for the benchmarks' secret env values (ctrl's --secrets-key-file, made as
// `generateKeyFile` makes it), in a temporary directory removed by cleanup(); the ring seals
// the values seedRegion writes.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { generateKeyFile, SecretKeyRing } from "@flotilla/store";

export interface BenchSecretsKey {
  file: string;
  ring: SecretKeyRing;
  cleanup(): void;
}

export function benchSecretsKey(): BenchSecretsKey {
  const dir = mkdtempSync(join(tmpdir(), "flotilla-bench-secrets-"));
  const file = join(dir, "secrets-key.json");
  const text = generateKeyFile("bench");
  writeFileSync(file, text, { mode: 0o600 });
  return { file, ring: SecretKeyRing.parse(text, file), cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** The key ring of a file benchSecretsKey() wrote (in another process). */
export function readSecretsKey(file: string): SecretKeyRing {
  return SecretKeyRing.parse(readFileSync(file, "utf8"), file);
}
