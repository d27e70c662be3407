// The console's sign-in (authorization code flow with PKCE, ctrl the confidential client) and
// what the CLI needs to sign in itself (/auth/config), served by ctrl under /auth/:
//
//   GET  /auth/config    public: the issuer and the CLI's client id (device authorization grant)
//   GET  /auth/login     redirects to the issuer (state, nonce and PKCE verifier in a sealed cookie)
//   GET  /auth/callback  exchanges the code (client secret), verifies the ID token, sets the session
//   GET  /auth/session   the signed-in subject, groups and CSRF token, or 401
//   POST /auth/logout    ends the session (needs the CSRF token)
import { createHash, randomBytes } from "node:crypto";
import type http from "node:http";
import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";
import type { Logger } from "@flotilla/runtime";
import { CSRF_HEADER, cookieValue, LOGIN_COOKIE, newCsrfToken, SESSION_COOKIE, type Session, type SessionCodec, setCookie } from "./session.ts";
import type { OidcVerifier } from "./verifier.ts";

type Request = http.IncomingMessage | Http2ServerRequest;
type Response = http.ServerResponse | Http2ServerResponse;

function head(res: Response, status: number, headers: http.OutgoingHttpHeaders): Response {
  (res as http.ServerResponse).writeHead(status, headers);
  return res;
}

export interface LoginOptions {
  verifier: OidcVerifier;
  sessions: SessionCodec;
  clientId: string;
  clientSecret: string;
  /** The CLI's client id (public, device authorization grant), told by /auth/config. */
  cliClientId: string;
  /** ctrl's own /auth/callback URL; default: from the request's Host. */
  redirectUrl?: string;
  sessionMaxAgeMs: number;
  secure: boolean;
  log: Logger;
}

const LOGIN_MAX_AGE_S = 600;
const SCOPES = "openid profile groups";

interface PendingLogin {
  state: string;
  nonce: string;
  verifier: string;
  redirectUri: string;
  expireTime: number;
}

/** Returns a handler that answers /auth/* (true) or leaves the request alone (false). */
export function loginHandler(options: LoginOptions): (req: Request, res: Response) => Promise<boolean> | false {
  const { verifier, sessions } = options;
  const redirectUri = (req: Request) =>
    options.redirectUrl || `${options.secure ? "https" : "http"}://${req.headers.host ?? req.headers[":authority"] ?? "127.0.0.1"}/auth/callback`;
  return (req, res) => {
    const url = new URL(req.url ?? "/", "http://ctrl");
    if (!url.pathname.startsWith("/auth/")) return false;
    return (async () => {
      try {
        switch (`${req.method} ${url.pathname}`) {
          case "GET /auth/config":
            return json(res, 200, { issuer: verifier.issuer, cliClientId: options.cliClientId, scopes: `${SCOPES} offline_access` });
          case "GET /auth/login": {
            let discovery;
            try {
              discovery = await verifier.discovery(true);
            } catch (error) {
              return page(res, 503, `Sign-in is not possible now: ${message(error)}. Try again when the identity provider is back.`);
            }
            const pending: PendingLogin = {
              state: random(),
              nonce: random(),
              verifier: random(),
              redirectUri: redirectUri(req),
              expireTime: Date.now() + LOGIN_MAX_AGE_S * 1000,
            };
            const target = new URL(discovery.authorization_endpoint);
            target.search = new URLSearchParams({
              response_type: "code",
              client_id: options.clientId,
              redirect_uri: pending.redirectUri,
              scope: SCOPES,
              state: pending.state,
              nonce: pending.nonce,
              code_challenge: createHash("sha256").update(pending.verifier).digest("base64url"),
              code_challenge_method: "S256",
            }).toString();
            // Lax: the issuer's redirect back is a cross-site navigation, which must carry it.
            head(res, 302, {
              location: target.toString(),
              "set-cookie": setCookie(LOGIN_COOKIE, sessions.seal(pending), { maxAgeS: LOGIN_MAX_AGE_S, sameSite: "Lax", path: "/auth/callback" }),
              "cache-control": "no-store",
            });
            res.end();
            return true;
          }
          case "GET /auth/callback":
            return await callback(req, res, url);
          case "GET /auth/session": {
            const sealed = cookieValue(req.headers.cookie, SESSION_COOKIE);
            const session = sealed === undefined ? undefined : sessions.open<Session>(sealed);
            if (!session || session.expireTime <= Date.now()) return json(res, 401, { signedIn: false, login: "/auth/login" });
            return json(res, 200, { signedIn: true, subject: session.subject, groups: session.groups, csrf: session.csrf, expireTime: session.expireTime });
          }
          case "POST /auth/logout": {
            const check = sessions.check(req.headers.cookie, header(req, CSRF_HEADER));
            if (!check || "refusal" in check) return json(res, 403, { error: "the CSRF token is missing or wrong" });
            head(res, 204, { "set-cookie": setCookie(SESSION_COOKIE, "", { maxAgeS: 0, sameSite: "Strict" }), "cache-control": "no-store" });
            res.end();
            return true;
          }
          default:
            return json(res, 404, { error: "not found" });
        }
      } catch (error) {
        options.log.error(`sign-in: ${message(error)}`);
        return page(res, 502, `Sign-in failed: ${message(error)}`);
      }
    })();
  };

  async function callback(req: Request, res: Response, url: URL): Promise<boolean> {
    const sealed = cookieValue(req.headers.cookie, LOGIN_COOKIE);
    const pending = sealed === undefined ? undefined : sessions.open<PendingLogin>(sealed);
    if (!pending || pending.expireTime <= Date.now()) return page(res, 400, "This sign-in has expired or was not started here: sign in again.");
    if (url.searchParams.get("state") !== pending.state) return page(res, 400, "The sign-in's state does not match: sign in again.");
    const failure = url.searchParams.get("error");
    if (failure) return page(res, 401, `The identity provider refused the sign-in: ${failure}`);
    const code = url.searchParams.get("code");
    if (!code) return page(res, 400, "The identity provider sent no code: sign in again.");
    const discovery = await verifier.discovery();
    const response = await fetch(discovery.token_endpoint, {
      method: "POST",
      signal: AbortSignal.timeout(verifier.fetchTimeoutMs),
      headers: {
        authorization: `Basic ${Buffer.from(`${encodeURIComponent(options.clientId)}:${encodeURIComponent(options.clientSecret)}`).toString("base64")}`,
        "content-type": "application/x-www-form-urlencoded",
      },
      body: new URLSearchParams({ grant_type: "authorization_code", code, redirect_uri: pending.redirectUri, code_verifier: pending.verifier }),
    });
    const tokens = (await response.json()) as { id_token?: string; error?: string };
    if (!response.ok || !tokens.id_token) return page(res, 401, `The identity provider refused the code: ${tokens.error ?? response.status}`);
    const identity = await verifier.verify(tokens.id_token).catch((error: unknown) => error as Error);
    if (identity instanceof Error) return page(res, 401, `The ID token is not accepted: ${identity.message}`);
    const claims = JSON.parse(Buffer.from(tokens.id_token.split(".")[1]!, "base64url").toString("utf8")) as { nonce?: string };
    if (claims.nonce !== pending.nonce) return page(res, 401, "The ID token's nonce does not match: sign in again.");
    const expireTime = Math.min(identity.expireTime, Date.now() + options.sessionMaxAgeMs);
    const session: Session = { subject: identity.subject, groups: identity.groups, expireTime, csrf: newCsrfToken() };
    head(res, 303, {
      location: "/",
      "set-cookie": [
        setCookie(SESSION_COOKIE, sessions.seal(session), { maxAgeS: (expireTime - Date.now()) / 1000, sameSite: "Strict" }),
        setCookie(LOGIN_COOKIE, "", { maxAgeS: 0, sameSite: "Lax", path: "/auth/callback" }),
      ],
      "cache-control": "no-store",
    });
    res.end();
    return true;
  }
}

function header(req: Request, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

function random(): string {
  return randomBytes(32).toString("base64url");
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function json(res: Response, status: number, body: unknown): true {
  head(res, status, { "content-type": "application/json", "cache-control": "no-store" });
  res.end(JSON.stringify(body));
  return true;
}

function page(res: Response, status: number, text: string): true {
  const escaped = text.replace(/[<>&"]/g, (c) => `&#${c.charCodeAt(0)};`);
  head(res, status, { "content-type": "text/html; charset=utf-8", "cache-control": "no-store" });
  res.end(`<!doctype html><title>Flotilla sign-in</title><p role="alert">${escaped}</p><p><a href="/auth/login">Sign in again</a></p>\n`);
  return true;
}
