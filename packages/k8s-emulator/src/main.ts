// CLI: runs the emulator as a standalone server for the local dev stack.
//   node packages/k8s-emulator/src/main.ts --listen 127.0.0.1:7072 [--kubeconfig-out path]
//     [--rollout-delay-ms N] [--progress-deadline-second-ms N] [--namespace-deletion-delay-ms N]
//     [--failing-image-pattern re] [--erroring-image-pattern re] [--event-limit N] [--watch-history N] [--bookmark-interval-ms N] [--rbac]
//     [--tls-cert-file path --tls-private-key-file path [--client-ca-file path]]
// Every flag can also be given as an environment variable: FLOTILLA_EMULATOR_<FLAG>,
// e.g. FLOTILLA_EMULATOR_LISTEN, FLOTILLA_EMULATOR_KUBECONFIG_OUT.
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { KubernetesEmulator } from "./emulator.ts";

const FLAGS = [
  "listen",
  "kubeconfig-out",
  "rollout-delay-ms",
  "progress-deadline-second-ms",
  "namespace-deletion-delay-ms",
  "failing-image-pattern",
  "erroring-image-pattern",
  "event-limit",
  "watch-history",
  "bookmark-interval-ms",
  "rbac",
  "tls-cert-file",
  "tls-private-key-file",
  "client-ca-file",
] as const;

const USAGE = `Usage: node packages/k8s-emulator/src/main.ts [options]

A Kubernetes API server emulator (plain HTTP, or HTTPS with --tls-*) for tests and the local stack.

Options (each also settable as FLOTILLA_EMULATOR_<NAME>, e.g. FLOTILLA_EMULATOR_LISTEN):
  --listen host:port             address to listen on (default 127.0.0.1:7072)
  --kubeconfig-out path          write a kubeconfig for the emulator to this file
  --rollout-delay-ms N           time a new pod takes to become ready (default 300)
  --progress-deadline-second-ms N
                                 length of one second of progressDeadlineSeconds
                                 (default rollout-delay-ms / 100)
  --namespace-deletion-delay-ms N
                                 time a Terminating namespace takes to go away (default 300)
  --failing-image-pattern re     images matching this regexp never become ready (default "fail")
  --erroring-image-pattern re    pods of images matching this regexp become ready but answer
                                 20% of requests with 500 in /_emulator/metrics (default "err")
  --event-limit N                Event objects kept, the oldest removed first (default 1000)
  --watch-history N              watch events kept per resource type for resuming
                                 watches (default 1000)
  --bookmark-interval-ms N       interval of watch BOOKMARK events (default 1000)
  --rbac                         authenticate requests and authorize them with RBAC
                                 (the written kubeconfig stays admin; default off)
  --tls-cert-file path           serve HTTPS with this certificate (PEM; kubectl sends
  --tls-private-key-file path    credentials only over TLS) and key
  --client-ca-file path          client certificates this CA signed authenticate (CN, O)
  --help                         show this help

Emulator endpoints: /_emulator/faults (GET, PUT replaces, POST adds, DELETE clears),
/_emulator/requests (GET, DELETE), /_emulator/reset (POST), /_emulator/objects (GET),
/_emulator/metrics (GET: the pods' http_requests_total, Prometheus text).`;

function fail(message: string): never {
  process.stderr.write(`k8s-emulator: ${message}\n\n${USAGE}\n`);
  process.exit(2);
}

function intFlag(name: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value)) fail(`--${name} must be a non-negative integer, got ${JSON.stringify(value)}`);
  return Number(value);
}

async function main(): Promise<void> {
  let parsed;
  try {
    parsed = parseArgs({
      options: {
        listen: { type: "string" },
        "kubeconfig-out": { type: "string" },
        "rollout-delay-ms": { type: "string" },
        "progress-deadline-second-ms": { type: "string" },
        "namespace-deletion-delay-ms": { type: "string" },
        "failing-image-pattern": { type: "string" },
        "erroring-image-pattern": { type: "string" },
        "event-limit": { type: "string" },
        "watch-history": { type: "string" },
        "bookmark-interval-ms": { type: "string" },
        rbac: { type: "boolean" },
        "tls-cert-file": { type: "string" },
        "tls-private-key-file": { type: "string" },
        "client-ca-file": { type: "string" },
        help: { type: "boolean" },
      },
      strict: true,
    });
  } catch (err) {
    fail((err as Error).message);
  }
  if (parsed.values.help) {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  const flag = (name: (typeof FLAGS)[number]): string | undefined => {
    const value = parsed.values[name];
    return typeof value === "boolean" ? String(value) : (value ?? process.env[`FLOTILLA_EMULATOR_${name.toUpperCase().replaceAll("-", "_")}`]);
  };
  const rbac = flag("rbac");
  if (rbac !== undefined && rbac !== "true" && rbac !== "false") fail(`--rbac (FLOTILLA_EMULATOR_RBAC) must be true or false, got ${JSON.stringify(rbac)}`);

  const listen = flag("listen") ?? "127.0.0.1:7072";
  const m = /^(.*):(\d+)$/.exec(listen);
  if (!m) fail(`--listen must be host:port, got ${JSON.stringify(listen)}`);
  const host = m[1].replace(/^\[(.*)\]$/, "$1") || "127.0.0.1";
  const regexpFlag = (name: "failing-image-pattern" | "erroring-image-pattern"): RegExp | undefined => {
    const pattern = flag(name);
    if (pattern === undefined) return undefined;
    try {
      return new RegExp(pattern);
    } catch (err) {
      fail(`--${name}: ${(err as Error).message}`);
    }
  };
  const failingImagePattern = regexpFlag("failing-image-pattern");
  const erroringImagePattern = regexpFlag("erroring-image-pattern");

  const [certFile, keyFile, clientCaFile] = (["tls-cert-file", "tls-private-key-file", "client-ca-file"] as const).map(flag);
  if (!certFile !== !keyFile) fail("--tls-cert-file and --tls-private-key-file go together");
  if (clientCaFile && !certFile) fail("--client-ca-file needs --tls-cert-file and --tls-private-key-file");
  const read = (path: string) => {
    try {
      return readFileSync(path);
    } catch (err) {
      fail((err as Error).message);
    }
  };
  const tls = certFile && keyFile ? { cert: read(certFile), key: read(keyFile), ...(clientCaFile ? { clientCa: read(clientCaFile) } : {}) } : undefined;

  const emulator = await KubernetesEmulator.start({
    ...(tls ? { tls } : {}),
    host,
    port: Number(m[2]),
    rolloutDelayMs: intFlag("rollout-delay-ms", flag("rollout-delay-ms")),
    progressDeadlineSecondMs: intFlag("progress-deadline-second-ms", flag("progress-deadline-second-ms")),
    namespaceDeletionDelayMs: intFlag("namespace-deletion-delay-ms", flag("namespace-deletion-delay-ms")),
    failingImagePattern,
    erroringImagePattern,
    eventLimit: intFlag("event-limit", flag("event-limit")),
    watchHistory: intFlag("watch-history", flag("watch-history")),
    bookmarkIntervalMs: intFlag("bookmark-interval-ms", flag("bookmark-interval-ms")),
    rbac: rbac === "true",
  });
  const kubeconfigOut = flag("kubeconfig-out");
  if (kubeconfigOut) await emulator.writeKubeconfig(kubeconfigOut);

  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    process.stdout.write(`k8s-emulator: ${signal}, shutting down\n`);
    emulator.stop().then(
      () => process.exit(0),
      (err: unknown) => {
        process.stderr.write(`k8s-emulator: error while stopping: ${String(err)}\n`);
        process.exit(1);
      },
    );
  };
  process.on("SIGINT", () => shutdown("SIGINT"));
  process.on("SIGTERM", () => shutdown("SIGTERM"));
  // Announced only once the signal handlers are in place: whoever waits for this line may stop us at once.
  process.stdout.write(
    `k8s-emulator listening on ${emulator.url}${kubeconfigOut ? ` (kubeconfig: ${kubeconfigOut})` : ""}${emulator.options.rbac ? ", RBAC on" : ""}\n`,
  );
}

main().catch((err: unknown) => {
  process.stderr.write(`k8s-emulator: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
