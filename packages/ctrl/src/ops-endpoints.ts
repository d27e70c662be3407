// /healthz and /metrics over plain HTTP: on the public port, or with --metrics-listen on an
// address of their own so the public port need not expose them.
import http from "node:http";
import type net from "node:net";
import type { CtrlMetrics } from "./metrics.ts";

/** What HTTP/1.1 and HTTP/2 requests and responses have in common here. */
type Request = { method?: string; url?: string };
type Response = { writeHead(status: number, headers: Record<string, string>): unknown; end(body: string): unknown };

export interface OpsEndpoints {
  metrics: CtrlMetrics;
  draining: AbortSignal;
}

/** Answers GET /healthz (503 while draining) and, if `withMetrics`, GET /metrics; false for anything else. */
export async function serveOps(req: Request, res: Response, ops: OpsEndpoints, withMetrics: boolean): Promise<boolean> {
  if (req.method === "GET" && req.url === "/healthz") {
    res.writeHead(ops.draining.aborted ? 503 : 200, { "content-type": "text/plain" });
    res.end(ops.draining.aborted ? "draining\n" : "ok\n");
  } else if (withMetrics && req.method === "GET" && req.url === "/metrics") {
    res.writeHead(200, { "content-type": ops.metrics.registry.contentType });
    res.end(await ops.metrics.registry.metrics());
  } else {
    return false;
  }
  return true;
}

/** A plain HTTP/1.1 listener of /healthz and /metrics alone. */
export async function listenOps(host: string, port: number, ops: OpsEndpoints): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer(async (req, res) => {
    if (!(await serveOps(req, res, ops, true))) res.writeHead(404, { "content-type": "text/plain" }).end("not found\n");
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const address = server.address() as net.AddressInfo;
  return {
    url: `http://${address.address.includes(":") ? `[${address.address}]` : address.address}:${address.port}`,
    close: () => {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      return closed;
    },
  };
}
