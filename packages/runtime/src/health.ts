// The health and metrics endpoints of ctrl and the agent: GET /livez and /healthz (alive; the
// Kubernetes API server's pair), /readyz (ready to serve) and /metrics (Prometheus text), plus a listener for a process that has no other
// HTTP server to put them on (the agent).
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/** The part of a prom-client Registry the endpoints use. */
export interface MetricsRegistry {
  readonly contentType: string;
  metrics(): Promise<string>;
}

export interface HealthChecks {
  /** Absent: no /metrics here (ctrl with --metrics-listen serves it on another address). */
  registry?: MetricsRegistry;
  /** Why the process is not healthy (/livez and /healthz answer 503 with it), or undefined when it is. */
  unhealthy?: () => string | undefined;
  /** Why the process is not ready (/readyz answers 503 with it), or undefined when it is; may ask a database. Default: ready when healthy. */
  notReady?: () => string | undefined | Promise<string | undefined>;
}

/** What the endpoints read of a request and write to a response (node:http and node:http2 alike). */
export interface HealthRequest {
  readonly method?: string;
  readonly url?: string;
}
export interface HealthResponse {
  writeHead(status: number, headers: Record<string, string>): { end(body: string): unknown };
}

/**
 * A request handler for /livez, /healthz, /readyz and /metrics (GET, query ignored). Returns whether it
 * answered the request; other requests are left to the caller.
 */
export function healthEndpoints(checks: HealthChecks): (req: HealthRequest, res: HealthResponse) => Promise<boolean> {
  const unhealthy = checks.unhealthy ?? (() => undefined);
  const notReady = checks.notReady ?? unhealthy;
  return async (req, res) => {
    if (req.method !== "GET") return false;
    const path = (req.url ?? "/").split("?")[0];
    if (path === "/livez" || path === "/healthz" || path === "/readyz") {
      const problem = path === "/readyz" ? await notReady() : unhealthy();
      res.writeHead(problem === undefined ? 200 : 503, { "content-type": "text/plain" }).end(`${problem ?? "ok"}\n`);
    } else if (path === "/metrics" && checks.registry) {
      res.writeHead(200, { "content-type": checks.registry.contentType }).end(await checks.registry.metrics());
    } else {
      return false;
    }
    return true;
  };
}

/** "host:port" → parts; a bare port means loopback; port 0 picks one. */
export function parseListen(listen: string, flag = "listen"): { host: string; port: number } {
  const match = /^(?:\[?([^\]]*)\]?:)?(\d+)$/.exec(listen);
  const port = Number(match?.[2]);
  if (!match || port > 65535) throw new Error(`--${flag} ${JSON.stringify(listen)}: expected host:port`);
  return { host: match[1] || "127.0.0.1", port };
}

export interface HealthServer {
  /** Base URL, e.g. http://127.0.0.1:7071. */
  readonly url: string;
  /** Stops listening and closes open connections. */
  close(): Promise<void>;
}

/** Serves the health endpoints (404 for anything else) on `listen` (host:port). */
export async function serveHealth(listen: string, checks: HealthChecks): Promise<HealthServer> {
  const { host, port } = parseListen(listen);
  const endpoints = healthEndpoints(checks);
  const server: Server = createServer(async (req, res) => {
    if (!(await endpoints(req, res))) res.writeHead(404, { "content-type": "text/plain" }).end("not found\n");
  });
  await new Promise<void>((resolve, reject) => {
    // One clear line for the usual case (the port is taken), not a system error's dump.
    const failed = (error: NodeJS.ErrnoException) =>
      reject(new Error(`--listen ${listen}: ${error.code === "EADDRINUSE" ? "address already in use" : error.message}`));
    server.once("error", failed);
    server.listen(port, host, () => {
      server.off("error", failed);
      resolve();
    });
  });
  const { address, port: bound } = server.address() as AddressInfo;
  return {
    url: `http://${address.includes(":") ? `[${address}]` : address}:${bound}`,
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await closed;
    },
  };
}
