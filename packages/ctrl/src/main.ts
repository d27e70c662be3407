// `pnpm ctrl`: runs the ctrl server until SIGINT/SIGTERM.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { Store } from "@flotilla/store";
import { parseListen } from "@flotilla/runtime";
import { CTRL_OPTIONS, nonNegativeInt, parseConfig, positiveInt, systemNamespaceList, usage } from "./config.ts";
import { startCtrl } from "./server.ts";

const ADMIN_TOKEN_FILE = ".flotilla/admin-token";

try {
  const config = parseConfig(CTRL_OPTIONS, process.argv.slice(2));
  if (config === "help") {
    process.stdout.write(usage("pnpm ctrl", CTRL_OPTIONS));
    process.exit(0);
  }
  const { host, port } = parseListen(config.listen);
  const options = {
    readMaxBytes: positiveInt("read-max-bytes", config["read-max-bytes"]),
    pollIntervalMs: positiveInt("poll-interval-ms", config["poll-interval-ms"]),
    stream: {
      bookmarkIntervalMs: positiveInt("bookmark-interval-ms", config["bookmark-interval-ms"]),
      watchBufferLimit: positiveInt("watch-buffer-events", config["watch-buffer-events"]),
    },
    status: { staleAfterMs: positiveInt("status-stale-after-ms", config["status-stale-after-ms"]) },
    allowedSystemNamespaces: systemNamespaceList("allowed-system-namespaces", config["allowed-system-namespaces"]),
    retention: {
      maxAgeMs: nonNegativeInt("retention-max-age-s", config["retention-max-age-s"]) * 1000,
      maxRows: nonNegativeInt("retention-max-rows", config["retention-max-rows"]),
    },
  };
  const adminToken = config["admin-token"] || localAdminToken();
  const store = await Store.open(config["database-url"]);
  const ctrl = await startCtrl({ store, adminToken, host, port, ...options });
  console.error(`ctrl: serving on ${ctrl.url} (database ${store.database.dialect.name})`);
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    console.error(`ctrl: ${signal}, draining`);
    await ctrl.shutdown();
    await store.close();
    console.error("ctrl: stopped");
    process.exit(0);
  };
  process.on("SIGINT", () => void stop("SIGINT"));
  process.on("SIGTERM", () => void stop("SIGTERM"));
} catch (error) {
  console.error(`ctrl: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
}

/** The local admin token: reused from .flotilla/admin-token, or generated there once. */
function localAdminToken(): string {
  if (existsSync(ADMIN_TOKEN_FILE)) {
    const token = readFileSync(ADMIN_TOKEN_FILE, "utf8").trim();
    if (token) {
      console.error(`ctrl: admin token from ${ADMIN_TOKEN_FILE}`);
      return token;
    }
  }
  const token = "flt_admin_" + randomBytes(24).toString("base64url");
  mkdirSync(".flotilla", { recursive: true });
  writeFileSync(ADMIN_TOKEN_FILE, token + "\n", { mode: 0o600 });
  console.error(`ctrl: generated an admin token (kept in ${ADMIN_TOKEN_FILE}):\n  export ADMIN_TOKEN=${token}`);
  return token;
}
