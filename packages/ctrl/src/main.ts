// `pnpm ctrl`: runs the ctrl server until SIGINT/SIGTERM.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { fromJsonString } from "@bufbuild/protobuf";
import { RolloutStrategySchema, type RolloutStrategy } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { Store } from "@flotilla/store";
import { createLogger, logOptions, parseDuration, parseListen, type Logger } from "@flotilla/runtime";
import { connectionBounds } from "./bounds-config.ts";
import { ctrlUsage, flagReader, parseConfig, systemNamespaceList } from "./config.ts";
import { databaseUrl, databaseUrlWarning } from "./database-url.ts";
import { secretKeyRing } from "./secrets-key-file.ts";
import { startCtrl } from "./server.ts";
import { ssoOptions } from "./oidc/config.ts";
import type { TlsFiles } from "./tls.ts";
import { storeDecisions } from "./rollouts/gate.ts";
import { rolloutStrategy } from "./validate.ts";

const ADMIN_TOKEN_FILE = ".flotilla/admin-token";

// Until the flags are read, text at info.
let log: Logger = createLogger({ fields: { process: "ctrl" } });
try {
  const parsed = parseConfig(process.argv.slice(2));
  if (parsed === "help") {
    process.stdout.write(ctrlUsage());
    process.exit(0);
  }
  const { config, deprecations } = parsed;
  log = createLogger({ ...logOptions(config["log-format"], config["log-level"]), fields: { process: "ctrl" } });
  for (const deprecation of deprecations) log.warn(deprecation);
  const { host, port } = parseListen(config.listen);
  const read = flagReader(config);
  const options = {
    readMaxBytes: read.positiveInt("read-max-bytes"),
    decoding: {
      writeMaxBytes: read.positiveInt("write-max-bytes"),
      queryMaxBytes: read.positiveInt("query-max-bytes"),
      maxDepth: read.positiveInt("max-nesting-depth"),
      maxElements: read.positiveInt("max-repeated-elements"),
      budgetBytes: read.positiveInt("decode-budget-bytes"),
      waitMs: read.positiveDuration("decode-wait"),
      collectAfterBytes: read.nonNegativeInt("collect-after-request-bytes"),
      memoryHeadroomBytes: read.nonNegativeInt("decode-memory-headroom-bytes"),
    },
    pollIntervalMs: read.positiveDuration("poll-interval"),
    stream: {
      bookmarkIntervalMs: read.positiveDuration("bookmark-interval"),
      watchBufferLimit: read.positiveInt("watch-buffer-events"),
      snapshotConcurrency: read.positiveInt("snapshot-concurrency"),
      snapshotReadAheadBytes: read.positiveInt("snapshot-read-ahead-bytes"),
      secretSealsMax: read.positiveInt("secret-seals-max"),
    },
    streamSendTimeoutMs: read.positiveDuration("stream-send-timeout"),
    sendBudgetBytes: read.positiveInt("send-budget-bytes"),
    sendBudgetStallMs: read.positiveDuration("send-budget-stall"),
    tokenLookupConcurrency: read.positiveInt("token-lookup-concurrency"),
    bounds: connectionBounds(config),
    status: { staleAfterMs: read.positiveDuration("status-stale-after") },
    allowedSystemNamespaces: systemNamespaceList("allowed-system-namespaces", config["allowed-system-namespaces"]),
    retention: {
      maxAgeMs: parseDuration(config["retention-max-age"], "retention-max-age"),
      maxRows: read.nonNegativeInt("retention-max-rows"),
    },
    auditMaxAgeMs: read.positiveDuration("audit-max-age"),
    console: consoleFlag(config.console),
    statusEventsMaxAgeMs: read.positiveDuration("status-events-max-age"),
    rolloutLeaseMs: read.positiveDuration("rollout-lease-duration"),
    rolloutBatchSize: read.positiveInt("rollout-batch-size"),
    notifications: {
      timeoutMs: read.positiveDuration("notifier-timeout"),
      maxAttempts: read.positiveInt("notifier-max-attempts"),
      backoffMinMs: read.positiveDuration("notifier-backoff-min"),
      backoffMaxMs: read.positiveDuration("notifier-backoff-max"),
      batchSize: read.positiveInt("notifier-batch-size"),
      concurrency: read.positiveInt("notifier-concurrency"),
      perNotifierConcurrency: read.positiveInt("notifier-per-receiver-concurrency"),
      pollIntervalMs: read.positiveDuration("notifier-poll-interval"),
      allowPrivate: config["notifier-allow-private-addresses"] === "true",
    },
    memoryReleaseGrowthBytes: read.nonNegativeInt("memory-release-growth-bytes"),
    memoryReleaseIntervalMs: read.positiveDuration("memory-release-interval"),
  };
  // Checked here so that a mistake names its flag.
  if (config["metrics-listen"]) parseListen(config["metrics-listen"], "metrics-listen");
  const tls = tlsFiles(config["tls-cert"], config["tls-key"], config["client-ca"]);
  const security = {
    tls,
    trustDomain: config["trust-domain"],
    insecure: config.insecure === "true",
    tokenCacheSize: read.positiveInt("token-cache-size"),
    tokenRecheckMs: read.positiveDuration("token-recheck-interval"),
    metricsListen: config["metrics-listen"] || undefined,
    readinessTimeoutMs: read.positiveDuration("readiness-timeout"),
    sso: ssoOptions(config),
  };
  if (process.argv.slice(2).some((arg) => arg === "--admin-token" || arg.startsWith("--admin-token="))) {
    log.warn("--admin-token shows the token to every user of this host (process list); use --admin-token-file or FLOTILLA_CTRL_ADMIN_TOKEN");
  }
  const databaseWarning = databaseUrlWarning(process.argv.slice(2));
  if (databaseWarning) log.warn(databaseWarning);
  const adminToken = config["admin-token"] || tokenFromFile(config["admin-token-file"]) || localAdminToken();
  const store = await Store.open(databaseUrl(config["database-url"], config["database-url-file"]), {
    revisionHistoryLimit: read.positiveInt("revision-history-limit"),
    pageBytes: read.positiveInt("list-page-bytes"),
    defaultStrategy: defaultRolloutStrategy(config["default-rollout-strategy"]),
    secrets: secretKeyRing(config["secrets-key-file"]),
    rollouts: storeDecisions,
  });
  const ctrl = await startCtrl({ store, adminToken, host, port, ...options, ...security, log });
  const mtls = tls?.clientCaFile ? ", agents need client certificates" : "";
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info(`${signal}, draining`);
    await ctrl.shutdown();
    await store.close();
    log.info("stopped");
    process.exit(0);
  };
  process.on("SIGINT", () => void stop("SIGINT"));
  process.on("SIGTERM", () => void stop("SIGTERM"));
  // Announced only once the signal handlers are in place: whoever waits for this line may stop us at once.
  log.info(`serving on ${ctrl.url} (database ${store.database.dialect.name}${mtls})${ctrl.metricsUrl ? `, metrics on ${ctrl.metricsUrl}/metrics` : ""}`);
  if (options.console) log.info(`web console on ${ctrl.url}/`);
} catch (error) {
  log.error(error instanceof Error ? error.message : String(error));
  process.exit(1);
}

/** --default-rollout-strategy: proto3 JSON of a RolloutStrategy, checked as a deployment's would be. */
function defaultRolloutStrategy(json: string): RolloutStrategy | undefined {
  if (json === "") return undefined;
  try {
    const strategy = fromJsonString(RolloutStrategySchema, json);
    rolloutStrategy("strategy", strategy);
    return strategy;
  } catch (error) {
    throw new Error(`--default-rollout-strategy: ${error instanceof Error ? error.message : String(error)}`);
  }
}

/** The local admin token: reused from .flotilla/admin-token, or generated there once. */
function localAdminToken(): string {
  if (existsSync(ADMIN_TOKEN_FILE)) {
    const token = readFileSync(ADMIN_TOKEN_FILE, "utf8").trim();
    if (token) {
      log.info(`admin token from ${ADMIN_TOKEN_FILE}`);
      return token;
    }
  }
  const token = `flt_admin_${randomBytes(24).toString("base64url")}`;
  mkdirSync(".flotilla", { recursive: true });
  writeFileSync(ADMIN_TOKEN_FILE, `${token}\n`, { mode: 0o600 });
  // Never the token itself: logs are collected and kept; the file is readable by its owner only.
  log.info(`generated an admin token, kept in ${ADMIN_TOKEN_FILE}:\n  export ADMIN_TOKEN=$(cat ${ADMIN_TOKEN_FILE})`);
  return token;
}

function tokenFromFile(file: string): string {
  if (!file) return "";
  const token = readFileSync(file, "utf8").trim();
  if (!token) throw new Error(`--admin-token-file ${file} is empty`);
  return token;
}

function consoleFlag(value: string): boolean {
  if (value === "true" || value === "false") return value === "true";
  throw new Error(`--console ${JSON.stringify(value)}: expected true or false`);
}

function tlsFiles(certFile: string, keyFile: string, clientCaFile: string): TlsFiles | undefined {
  if (!certFile !== !keyFile) throw new Error("--tls-cert and --tls-key go together");
  if (!certFile) {
    if (clientCaFile) throw new Error("--client-ca needs TLS: give --tls-cert and --tls-key too");
    return undefined;
  }
  return { certFile, keyFile, clientCaFile: clientCaFile || undefined };
}
