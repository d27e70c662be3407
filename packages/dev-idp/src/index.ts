// A local OpenID provider for development and tests (`pnpm start --sso`): oidc-provider with
// demo users (a real login form, a password each), groups in a `groups` claim, the
// authorization code flow with PKCE for the console (ctrl is the client) and the device
// authorization grant for the CLI. Keys can be rotated and the provider stopped and started
// again on the same port, so that tests can see what ctrl does then. Never used in production.
import { generateKeyPairSync, randomBytes } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import Provider, { type Configuration, type JWK } from "oidc-provider";

export interface DemoUser {
  name: string;
  password: string;
  groups: string[];
}

/** alice (group team-a) and bob (group team-b), each with their name as password. */
export const DEMO_USERS: readonly DemoUser[] = [
  { name: "alice", password: "alice", groups: ["team-a"] },
  { name: "bob", password: "bob", groups: ["team-b"] },
];

export const DEFAULT_IDP_PORT = 7075;
export const CONSOLE_CLIENT_ID = "flotilla-console";
export const CLI_CLIENT_ID = "flotilla-cli";

export interface DevIdpOptions {
  host?: string;
  /** Default 7075; 0 picks a free port. */
  port?: number;
  users?: readonly DemoUser[];
  /** The console client's secret (ctrl reads it from a file). */
  consoleSecret: string;
  /** Where the console client may be sent back to (ctrl's /auth/callback). */
  redirectUris?: string[];
  /** Lifetime of ID tokens, in seconds. Default 3600. */
  idTokenTtlSeconds?: number;
}

export class DevIdp {
  readonly #options: DevIdpOptions;
  readonly #users: Map<string, DemoUser>;
  readonly #cookieKeys = [randomBytes(32).toString("hex")];
  #keys: JWK[] = [newSigningKey()];
  #redirectUris: string[];
  #provider: Provider | undefined;
  #server: http.Server | undefined;
  #port: number;

  constructor(options: DevIdpOptions) {
    this.#options = options;
    this.#users = new Map((options.users ?? DEMO_USERS).map((u) => [u.name, { ...u, groups: [...u.groups] }]));
    this.#redirectUris = [...(options.redirectUris ?? [])];
    this.#port = options.port ?? DEFAULT_IDP_PORT;
  }

  get host(): string {
    return this.#options.host ?? "127.0.0.1";
  }

  /** The issuer URL (known once started, or when the port was given). */
  get issuer(): string {
    return `http://${this.host}:${this.#port}`;
  }

  /** The private signing keys (newest first): tests sign tokens of their own with them. */
  get signingKeys(): readonly JWK[] {
    return this.#keys;
  }

  async start(): Promise<this> {
    const server = http.createServer((req, res) => this.#handle(req, res));
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(this.#port, this.host, () => resolve());
    });
    this.#port = (server.address() as AddressInfo).port;
    this.#server = server;
    this.#provider = this.#build();
    return this;
  }

  /** Stops listening (tokens already issued stay valid; the provider is "down"). */
  async stop(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** Signs with a new key from now on; the old one stays published (for tokens it signed) unless `dropOld`. */
  rotateKey(dropOld = false): void {
    this.#keys = dropOld ? [newSigningKey()] : [newSigningKey(), ...this.#keys];
    this.#provider = this.#build();
  }

  /** Allows one more redirect URI for the console client. */
  allowRedirectUri(uri: string): void {
    if (!this.#redirectUris.includes(uri)) this.#redirectUris.push(uri);
    if (this.#server) this.#provider = this.#build();
  }

  /** Changes a user's groups: tokens issued from now on carry the new ones. */
  setGroups(user: string, groups: string[]): void {
    const found = this.#users.get(user);
    if (!found) throw new Error(`no user ${user}`);
    found.groups = [...groups];
  }

  #build(): Provider {
    const users = this.#users;
    const config: Configuration = {
      clients: [
        {
          client_id: CONSOLE_CLIENT_ID,
          client_secret: this.#options.consoleSecret,
          redirect_uris: this.#redirectUris,
          grant_types: ["authorization_code", "refresh_token"],
          response_types: ["code"],
          token_endpoint_auth_method: "client_secret_basic",
          id_token_signed_response_alg: "ES256",
        },
        {
          client_id: CLI_CLIENT_ID,
          grant_types: ["urn:ietf:params:oauth:grant-type:device_code", "refresh_token"],
          response_types: [],
          redirect_uris: [],
          token_endpoint_auth_method: "none",
          application_type: "native",
          id_token_signed_response_alg: "ES256",
        },
      ],
      jwks: { keys: this.#keys },
      cookies: { keys: this.#cookieKeys },
      claims: { openid: ["sub"], profile: ["name", "preferred_username"], groups: ["groups"] },
      scopes: ["openid", "profile", "groups", "offline_access"],
      conformIdTokenClaims: false,
      features: {
        devInteractions: { enabled: false },
        deviceFlow: { enabled: true },
        revocation: { enabled: true },
      },
      pkce: { required: () => true },
      ttl: {
        IdToken: this.#options.idTokenTtlSeconds ?? 3600,
        AccessToken: this.#options.idTokenTtlSeconds ?? 3600,
        RefreshToken: 24 * 3600,
        DeviceCode: 600,
        Interaction: 600,
        Session: 24 * 3600,
        Grant: 24 * 3600,
      },
      interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
      issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed("refresh_token"),
      // First-party clients: no consent screen, every scope granted.
      loadExistingGrant: async (ctx) => {
        const session = ctx.oidc.session!;
        const client = ctx.oidc.client!;
        const grantId = ctx.oidc.result?.consent?.grantId ?? session.grantIdFor(client.clientId);
        if (grantId) {
          const existing = await ctx.oidc.provider.Grant.find(grantId);
          if (existing) return existing;
        }
        const grant = new ctx.oidc.provider.Grant({ clientId: client.clientId, accountId: session.accountId! });
        grant.addOIDCScope("openid profile groups offline_access");
        await grant.save();
        return grant;
      },
      findAccount: (_ctx, id) => {
        const user = users.get(id);
        if (!user) return undefined;
        return { accountId: id, claims: () => ({ sub: id, name: id, preferred_username: id, groups: [...user.groups] }) };
      },
    };
    const provider = new Provider(this.issuer, config);
    provider.on("server_error", (_ctx, error) => console.error(`dev-idp: ${error.message}`));
    return provider;
  }

  async #handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const provider = this.#provider;
    if (!provider) {
      res.writeHead(503).end();
      return;
    }
    const match = /^\/interaction\/([\w-]+)(\/login)?$/.exec(new URL(req.url ?? "/", this.issuer).pathname);
    if (!match) return provider.callback()(req, res);
    try {
      const details = await provider.interactionDetails(req, res);
      if (details.prompt.name !== "login") {
        // Consent is granted by loadExistingGrant: nothing to ask.
        await provider.interactionFinished(req, res, { consent: {} }, { mergeWithLastSubmission: true });
        return;
      }
      if (req.method === "POST" && match[2]) {
        const form = new URLSearchParams(await readBody(req));
        const user = this.#users.get(form.get("username") ?? "");
        if (!user || user.password !== form.get("password")) {
          loginPage(res, details.uid, "Wrong user name or password.");
          return;
        }
        await provider.interactionFinished(req, res, { login: { accountId: user.name } }, { mergeWithLastSubmission: false });
        return;
      }
      loginPage(res, details.uid, "");
    } catch (error) {
      res.writeHead(400, { "content-type": "text/plain" }).end(`${error instanceof Error ? error.message : String(error)}\n`);
    }
  }
}

function newSigningKey(): JWK {
  const { privateKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  const jwk = privateKey.export({ format: "jwk" }) as JWK;
  return { ...jwk, kid: randomBytes(8).toString("hex"), alg: "ES256", use: "sig" };
}

function readBody(req: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (chunk: string) => {
      body += chunk;
      if (body.length > 10_000) req.destroy(new Error("form too large"));
    });
    req.on("end", () => resolve(body));
    req.on("error", reject);
  });
}

function loginPage(res: http.ServerResponse, uid: string, error: string): void {
  const escaped = error.replace(/[<>&"]/g, (c) => `&#${c.charCodeAt(0)};`);
  res.writeHead(error ? 401 : 200, { "content-type": "text/html; charset=utf-8", "cache-control": "no-store" });
  res.end(`<!doctype html><html><head><title>Sign in: dev identity provider</title></head><body>
<h1>Sign in</h1><p>Local development identity provider (demo users alice and bob).</p>
${escaped ? `<p role="alert">${escaped}</p>` : ""}
<form method="post" action="/interaction/${uid}/login" autocomplete="off">
<label>User name <input name="username" autofocus required></label>
<label>Password <input name="password" type="password" required></label>
<button type="submit">Sign in</button>
</form></body></html>`);
}
