// A headless "person" for tests without a browser: follows redirects with a cookie jar and
// submits each HTML form it meets (the provider's auto-submitted pages, its device-code
// confirmation and the login form, filled with a user name and password) until it lands on a
// page without a form, or is sent to a URL outside the provider (returned unfetched).

export interface HeadlessResult {
  /** The URL it stopped at. */
  url: string;
  status: number;
  body: string;
  /** Whether it stopped because the next URL was outside the provider. */
  left: boolean;
}

export async function signInHeadless(start: string, user: string, password: string, options: { stopOutside?: string } = {}): Promise<HeadlessResult> {
  const jar = new Map<string, string>();
  const origin = new URL(start).origin;
  let request: { url: string; method: string; body?: URLSearchParams } = { url: start, method: "GET" };
  for (let step = 0; step < 25; step++) {
    if (new URL(request.url).origin !== origin || (options.stopOutside && request.url.startsWith(options.stopOutside))) {
      return { url: request.url, status: 0, body: "", left: true };
    }
    const response = await fetch(request.url, {
      method: request.method,
      body: request.body,
      redirect: "manual",
      headers: { cookie: [...jar].map(([k, v]) => `${k}=${v}`).join("; ") },
    });
    for (const line of response.headers.getSetCookie()) {
      const [pair] = line.split(";", 1);
      const eq = pair!.indexOf("=");
      jar.set(pair!.slice(0, eq), pair!.slice(eq + 1));
    }
    const location = response.headers.get("location");
    if (response.status >= 300 && response.status < 400 && location) {
      request = { url: new URL(location, request.url).toString(), method: "GET" };
      continue;
    }
    const body = await response.text();
    const form =
      /<form[^>]*method="post"[^>]*action="([^"]*)"[^>]*>([\s\S]*?)<\/form>/i.exec(body) ??
      /<form[^>]*action="([^"]*)"[^>]*method="post"[^>]*>([\s\S]*?)<\/form>/i.exec(body);
    if (!form || response.status >= 400) return { url: request.url, status: response.status, body, left: false };
    const fields = new URLSearchParams();
    for (const input of form[2]!.matchAll(/<input([^>]*)>/gi)) {
      const name = /name="([^"]*)"/.exec(input[1]!)?.[1];
      if (!name) continue;
      const value = /value="([^"]*)"/.exec(input[1]!)?.[1] ?? "";
      fields.set(name, name === "username" ? user : name === "password" ? password : value);
    }
    // The device flow's confirmation page: its button says which way to go.
    const button = /<button[^>]*name="([^"]*)"[^>]*value="([^"]*)"/i.exec(form[2]!);
    if (button && !/abort|cancel/i.test(button[2]!)) fields.set(button[1]!, button[2]!);
    request = { url: new URL(form[1]!.replace(/&amp;/g, "&"), request.url).toString(), method: "POST", body: fields };
  }
  throw new Error("headless sign-in: more than 25 steps");
}

/** The device authorization grant, as the CLI does it, with the person's part done headless: the tokens. */
export async function deviceFlowTokens(
  issuer: string,
  clientId: string,
  user: string,
  password: string,
): Promise<{ id_token: string; refresh_token?: string; expires_in: number }> {
  const discovery = (await (await fetch(`${issuer}/.well-known/openid-configuration`)).json()) as {
    device_authorization_endpoint: string;
    token_endpoint: string;
  };
  const started = (await (
    await fetch(discovery.device_authorization_endpoint, {
      method: "POST",
      body: new URLSearchParams({ client_id: clientId, scope: "openid profile groups offline_access" }),
    })
  ).json()) as { device_code: string; verification_uri_complete: string };
  const done = await signInHeadless(started.verification_uri_complete, user, password);
  if (done.status >= 400) throw new Error(`device sign-in failed: ${done.status} ${done.body.slice(0, 300)}`);
  const response = await fetch(discovery.token_endpoint, {
    method: "POST",
    body: new URLSearchParams({ grant_type: "urn:ietf:params:oauth:grant-type:device_code", device_code: started.device_code, client_id: clientId }),
  });
  const tokens = (await response.json()) as { id_token: string; refresh_token?: string; expires_in: number; error?: string };
  if (!response.ok) throw new Error(`device token: ${tokens.error}`);
  return tokens;
}
