// `pnpm secrets rotate`: re-seals every stored secret value under the newest key of the key
// file, after which the older keys may leave it.
import { parseArgs } from "node:util";
import { Store } from "@flotilla/store";
import { databaseUrl, databaseUrlWarning } from "./database-url.ts";
import { secretKeyRing } from "./secrets-key-file.ts";
import { storeDecisions } from "./rollouts/gate.ts";

const USAGE = `usage: pnpm secrets rotate --secrets-key-file <file> [--database-url-file <file> | --database-url <url>]

The database URL may also come from FLOTILLA_CTRL_DATABASE_URL (a password given with
--database-url shows in the process list).

Rotating the data key of secret values:
  1. pnpm pki secrets-key --file <file> --add     a new newest key, the old ones kept
  2. restart every ctrl with the file (new values are sealed under the new key)
  3. pnpm secrets rotate --secrets-key-file <file>  re-seals every stored value under it, then
     scans every table: it says the older keys may go only when none holds a value under them
  4. remove the old keys from the file and restart ctrl (it refuses to start if one is still used)
`;

try {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      "secrets-key-file": { type: "string" },
      "database-url": { type: "string" },
      "database-url-file": { type: "string" },
      help: { type: "boolean" },
    },
  });
  if (values.help || positionals[0] !== "rotate") {
    process.stdout.write(USAGE);
    process.exit(values.help ? 0 : 2);
  }
  const warning = databaseUrlWarning(process.argv.slice(2));
  if (warning) console.error(`secrets: warning: ${warning}`);
  const secrets = secretKeyRing(values["secrets-key-file"] ?? process.env.FLOTILLA_CTRL_SECRETS_KEY_FILE ?? "");
  if (!secrets) throw new Error("--secrets-key-file is required");
  const store = await Store.open(databaseUrl(values["database-url"] ?? process.env.FLOTILLA_CTRL_DATABASE_URL, values["database-url-file"]), {
    secrets,
    rollouts: storeDecisions,
  });
  try {
    const { moved, stillUsed } = await store.rotateSecrets();
    console.log(`${moved} sealed values moved to key ${JSON.stringify(secrets.newestKeyId)}`);
    if (stillUsed.size > 0) {
      const where = [...stillUsed].map(([id, tables]) => `${JSON.stringify(id)} (${[...tables].join(", ")})`).join("; ");
      // A ctrl still running without the new key keeps sealing under the old one.
      throw new Error(`values are still sealed under ${where}: keep those keys, restart every ctrl with the new file and run rotate again`);
    }
    console.log("a scan of every table found no value under an older key: older keys may now leave the file");
  } finally {
    await store.close();
  }
} catch (error) {
  console.error(`secrets: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
}
