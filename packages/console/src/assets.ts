// Serves the console's static assets (dist/, built by build.ts) from memory, with the
// headers that make it safe to expose: a strict Content-Security-Policy (no inline script,
// nothing from another origin), no sniffing, no referrer, no framing.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";

export const CONSOLE_HEADERS: Readonly<Record<string, string>> = {
  "content-security-policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
  "cross-origin-opener-policy": "same-origin",
  "cross-origin-resource-policy": "same-origin",
};

interface Asset {
  body: Buffer;
  type: string;
  etag: string;
}

const FILES: Record<string, [file: string, type: string]> = {
  "/": ["index.html", "text/html; charset=utf-8"],
  "/index.html": ["index.html", "text/html; charset=utf-8"],
  "/assets/app.js": ["app.js", "text/javascript; charset=utf-8"],
  "/assets/app.css": ["app.css", "text/css; charset=utf-8"],
};

/** A request handler for the console's paths: true when it answered. */
export type ConsoleHandler = (req: IncomingMessage | Http2ServerRequest, res: ServerResponse | Http2ServerResponse) => boolean;

export function consoleHandler(): ConsoleHandler {
  const assets = new Map<string, Asset>();
  for (const [path, [file, type]] of Object.entries(FILES)) {
    // Through the package's exports, not this module's location: a bundle of ctrl inlines this
    // module and reads the assets from the package in its node_modules.
    const body = readFileSync(new URL(import.meta.resolve(`@flotilla/console/dist/${file}`)));
    assets.set(path, { body, type, etag: `"${createHash("sha256").update(body).digest("base64url").slice(0, 22)}"` });
  }
  return (req, response) => {
    // The two response types share these calls but not their overloads' types.
    const res = response as ServerResponse;
    const path = (req.url ?? "/").split("?")[0]!;
    const asset = assets.get(path);
    if (!asset || (req.method !== "GET" && req.method !== "HEAD")) return false;
    const headers = { ...CONSOLE_HEADERS, "content-type": asset.type, etag: asset.etag, "cache-control": "no-cache" };
    if (req.headers["if-none-match"] === asset.etag) {
      res.writeHead(304, headers);
      res.end();
      return true;
    }
    res.writeHead(200, { ...headers, "content-length": String(asset.body.length) });
    if (req.method === "HEAD") res.end();
    else res.end(asset.body);
    return true;
  };
}
