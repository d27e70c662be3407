// `flotilla login`: single sign-on with the device authorization grant (RFC 8628). ctrl says
// which issuer and client id (/auth/config); the CLI asks the issuer for a code, prints where
// to enter it, and polls until the person has signed in, the code expires or --timeout. The
// tokens go into the context in the config file (mode 0600), never on the command line; the
// ID token is the bearer token, refreshed with the refresh token when it is about to expire.
import { request as httpsRequest } from "node:https";
import { type Context, readConfig, configPath, writeConfig, type OidcTokens } from "./config.ts";
import { TimeoutError, UsageError } from "./errors.ts";

/** How long `flotilla login` waits for the person to sign in, by default. */
export const DEFAULT_LOGIN_TIMEOUT_MS = 10 * 60_000;
/** An ID token this close to its expiry is refreshed before a call. */
const REFRESH_MARGIN_MS = 30_000;

interface Discovery {
  issuer: string;
  token_endpoint: string;
  device_authorization_endpoint?: string;
}

interface TokenResponse {
  id_token?: string;
  refresh_token?: string;
  error?: string;
  error_description?: string;
  interval?: number;
}

type Fetch = (url: string, init?: RequestInit) => Promise<Response>;

/** fetch, trusting `ca` (the context's --ca-cert) for ctrl's own URL: what /auth/config needs when ctrl serves TLS with a private CA. */
export function fetchTrusting(server: string, ca: Buffer | undefined): Fetch {
  if (!ca || !server.startsWith("https:")) return fetch;
  return (url, init) => {
    if (!url.startsWith(server)) return fetch(url, init);
    return new Promise<Response>((resolve, reject) => {
      const request = httpsRequest(url, { method: init?.method ?? "GET", ca, signal: init?.signal ?? undefined }, (response) => {
        const chunks: Buffer[] = [];
        response.on("data", (chunk: Buffer) => chunks.push(chunk));
        response.on("end", () => resolve(new Response(Buffer.concat(chunks), { status: response.statusCode ?? 502 })));
        response.on("error", reject);
      });
      request.on("error", reject);
      request.end();
    });
  };
}

async function getJson<T>(fetchFn: Fetch, url: string, what: string, init?: RequestInit): Promise<{ status: number; body: T }> {
  let response: Response;
  try {
    response = await fetchFn(url, { ...init, signal: AbortSignal.timeout(10_000) });
  } catch (error) {
    throw new UsageError(
      `${what} at ${new URL(url).origin} is unreachable (${(error as Error).cause ? String((error as { cause: Error }).cause.message) : (error as Error).message}): try again later`,
    );
  }
  let body: T;
  try {
    body = (await response.json()) as T;
  } catch {
    throw new UsageError(`${what} at ${new URL(url).origin} answered ${response.status} without JSON`);
  }
  return { status: response.status, body };
}

export interface LoginOptions {
  server: string;
  context: Context;
  timeoutMs: number;
  fetch: Fetch;
  out(text: string): void;
  /** For tests: waits (default setTimeout). */
  sleep?(ms: number): Promise<void>;
}

/** Signs in; saves the tokens into the context (and the context into the config) only on success. */
export async function login(options: LoginOptions): Promise<OidcTokens> {
  const { fetch: fetchFn, out } = options;
  const { status, body: sso } = await getJson<{ issuer?: string; cliClientId?: string; scopes?: string }>(fetchFn, `${options.server}/auth/config`, "ctrl");
  if (status === 404 || !sso.issuer || !sso.cliClientId)
    throw new UsageError(`${options.server} has no single sign-on (ctrl runs without --oidc-issuer): use a token file`);
  const discovery = await discover(fetchFn, sso.issuer);
  if (!discovery.device_authorization_endpoint) throw new UsageError(`the identity provider ${sso.issuer} offers no device authorization grant`);
  const started = await getJson<{
    device_code?: string;
    user_code?: string;
    verification_uri?: string;
    verification_uri_complete?: string;
    interval?: number;
    expires_in?: number;
    error?: string;
  }>(fetchFn, discovery.device_authorization_endpoint, "the identity provider", {
    method: "POST",
    body: new URLSearchParams({ client_id: sso.cliClientId, scope: sso.scopes ?? "openid profile groups offline_access" }),
  });
  const code = started.body;
  if (started.status !== 200 || !code.device_code || !code.user_code || !code.verification_uri) {
    throw new UsageError(`the identity provider refused to start a sign-in: ${code.error ?? started.status}`);
  }
  out(`To sign in, open ${code.verification_uri} and enter the code ${code.user_code}`);
  if (code.verification_uri_complete) out(`(or open ${code.verification_uri_complete})`);
  out("Waiting…");
  const sleep = options.sleep ?? ((ms: number) => new Promise((resolve) => setTimeout(resolve, ms)));
  let intervalMs = Math.max(1, code.interval ?? 5) * 1000;
  const deadline = Date.now() + Math.min(options.timeoutMs, (code.expires_in ?? Infinity) * 1000);
  for (;;) {
    if (Date.now() + intervalMs > deadline) {
      throw new TimeoutError(`nobody signed in with code ${code.user_code} within ${Math.round(options.timeoutMs / 1000)} s (--timeout): nothing saved`);
    }
    await sleep(intervalMs);
    const polled = await getJson<TokenResponse>(fetchFn, discovery.token_endpoint, "the identity provider", {
      method: "POST",
      body: new URLSearchParams({ grant_type: "urn:ietf:params:oauth:grant-type:device_code", device_code: code.device_code, client_id: sso.cliClientId }),
    });
    const tokens = polled.body;
    if (polled.status === 200 && tokens.id_token) {
      const saved: OidcTokens = { issuer: sso.issuer, clientId: sso.cliClientId, idToken: tokens.id_token, refreshToken: tokens.refresh_token };
      saveTokens(options.context, saved);
      return saved;
    }
    if (tokens.error === "authorization_pending") continue;
    if (tokens.error === "slow_down") {
      intervalMs += 5000;
      continue;
    }
    if (tokens.error === "access_denied") throw new UsageError("the sign-in was refused at the identity provider: nothing saved");
    if (tokens.error === "expired_token") throw new UsageError("the code expired before anyone signed in: run flotilla login again");
    throw new UsageError(`the identity provider refused the sign-in: ${tokens.error_description ?? tokens.error ?? polled.status}`);
  }
}

async function discover(fetchFn: Fetch, issuer: string): Promise<Discovery> {
  const { status, body } = await getJson<Discovery>(fetchFn, `${issuer.replace(/\/$/, "")}/.well-known/openid-configuration`, "the identity provider");
  if (status !== 200 || body.issuer !== issuer) throw new UsageError(`the identity provider ${issuer} has no valid discovery document (status ${status})`);
  return body;
}

function saveTokens(context: Context, tokens: OidcTokens | undefined): void {
  const config = readConfig();
  const i = config.contexts.findIndex((c) => c.name === context.name);
  const updated = { ...context, oidc: tokens };
  if (i >= 0) config.contexts[i] = { ...config.contexts[i]!, oidc: tokens };
  else config.contexts.push(updated);
  config.currentContext ??= context.name;
  writeConfig(config, configPath());
}

/** Forgets the context's tokens. */
export function logout(context: Context): void {
  saveTokens(context, undefined);
}

/** When the ID token expires (ms since the epoch; 0 if it cannot be read). */
export function expiryOf(idToken: string): number {
  try {
    const claims = JSON.parse(Buffer.from(idToken.split(".")[1] ?? "", "base64url").toString("utf8")) as { exp?: number };
    return (claims.exp ?? 0) * 1000;
  } catch {
    return 0;
  }
}

/** The context's ID token, refreshed first (and saved) when it is about to expire. */
export async function currentIdToken(context: Context, fetchFn: Fetch = fetch): Promise<string> {
  const tokens = context.oidc!;
  if (expiryOf(tokens.idToken) - Date.now() > REFRESH_MARGIN_MS) return tokens.idToken;
  if (!tokens.refreshToken) throw new UsageError(`the sign-in of context ${context.name} has expired: run flotilla login`);
  const discovery = await discover(fetchFn, tokens.issuer);
  const { status, body } = await getJson<TokenResponse>(fetchFn, discovery.token_endpoint, "the identity provider", {
    method: "POST",
    body: new URLSearchParams({ grant_type: "refresh_token", refresh_token: tokens.refreshToken, client_id: tokens.clientId }),
  });
  if (status !== 200 || !body.id_token)
    throw new UsageError(`the sign-in of context ${context.name} could not be renewed (${body.error ?? status}): run flotilla login`);
  const renewed: OidcTokens = { ...tokens, idToken: body.id_token, refreshToken: body.refresh_token ?? tokens.refreshToken };
  context.oidc = renewed;
  saveTokens(context, renewed);
  return renewed.idToken;
}
