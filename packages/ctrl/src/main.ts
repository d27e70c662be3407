// `pnpm ctrl`: runs the ctrl server until SIGINT/SIGTERM.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { Store } from "@flotilla/store";
import { parseListen } from "@flotilla/runtime";
import { connectionBounds } from "./bounds-config.ts";
import { CTRL_OPTIONS, nonNegativeInt, parseConfig, positiveInt, systemNamespaceList, usage } from "./config.ts";
import { startCtrl } from "./server.ts";
import type { TlsFiles } from "./tls.ts";

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
      snapshotConcurrency: positiveInt("snapshot-concurrency", config["snapshot-concurrency"]),
      snapshotReadAheadBytes: positiveInt("snapshot-read-ahead-bytes", config["snapshot-read-ahead-bytes"]),
    },
    streamSendTimeoutMs: positiveInt("stream-send-timeout-ms", config["stream-send-timeout-ms"]),
    tokenLookupConcurrency: positiveInt("token-lookup-concurrency", config["token-lookup-concurrency"]),
    bounds: connectionBounds(config),
    status: { staleAfterMs: positiveInt("status-stale-after-ms", config["status-stale-after-ms"]) },
    allowedSystemNamespaces: systemNamespaceList("allowed-system-namespaces", config["allowed-system-namespaces"]),
    retention: {
      maxAgeMs: nonNegativeInt("retention-max-age-s", config["retention-max-age-s"]) * 1000,
      maxRows: nonNegativeInt("retention-max-rows", config["retention-max-rows"]),
    },
  };
  // Checked here so that a mistake names its flag.
  if (config["metrics-listen"]) parseListen(config["metrics-listen"], "metrics-listen");
  const tls = tlsFiles(config["tls-cert"], config["tls-key"], config["client-ca"]);
  const security = {
    tls,
    trustDomain: config["trust-domain"],
    insecure: config.insecure === "true",
    tokenCacheSize: positiveInt("token-cache-size", config["token-cache-size"]),
    tokenRecheckMs: positiveInt("token-recheck-ms", config["token-recheck-ms"]),
    metricsListen: config["metrics-listen"] || undefined,
  };
  if (process.argv.slice(2).some((arg) => arg === "--admin-token" || arg.startsWith("--admin-token="))) {
    console.error("ctrl: warning: --admin-token shows the token to every user of this host (process list); use --admin-token-file or FLOTILLA_ADMIN_TOKEN");
  }
  const adminToken = config["admin-token"] || tokenFromFile(config["admin-token-file"]) || localAdminToken();
  const store = await Store.open(config["database-url"]);
  const ctrl = await startCtrl({ store, adminToken, host, port, ...options, ...security });
  const mtls = tls?.clientCaFile ? ", agents need client certificates" : "";
  console.error(`ctrl: serving on ${ctrl.url} (database ${store.database.dialect.name}${mtls})${ctrl.metricsUrl ? `, metrics on ${ctrl.metricsUrl}/metrics` : ""}`);
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
  const token = `flt_admin_${randomBytes(24).toString("base64url")}`;
  mkdirSync(".flotilla", { recursive: true });
  writeFileSync(ADMIN_TOKEN_FILE, `${token}\n`, { mode: 0o600 });
  // Never the token itself: logs are collected and kept; the file is readable by its owner only.
  console.error(`ctrl: generated an admin token, kept in ${ADMIN_TOKEN_FILE}:\n  export ADMIN_TOKEN=$(cat ${ADMIN_TOKEN_FILE})`);
  return token;
}

function tokenFromFile(file: string): string {
  if (!file) return "";
  const token = readFileSync(file, "utf8").trim();
  if (!token) throw new Error(`--admin-token-file ${file} is empty`);
  return token;
}

function tlsFiles(certFile: string, keyFile: string, clientCaFile: string): TlsFiles | undefined {
  if (!certFile !== !keyFile) throw new Error("--tls-cert and --tls-key go together");
  if (!certFile) {
    if (clientCaFile) throw new Error("--client-ca needs TLS: give --tls-cert and --tls-key too");
    return undefined;
  }
  return { certFile, keyFile, clientCaFile: clientCaFile || undefined };
}
