// Debian's chromium, headless, driven by playwright-core: nothing downloads a browser build.
import { chromium, type Browser, type Page } from "playwright-core";

/** Where the browser is; FLOTILLA_TEST_CHROMIUM overrides. */
export const CHROMIUM = process.env.FLOTILLA_TEST_CHROMIUM ?? "/usr/bin/chromium";

/** Launches it without what would reach another host (sync, component updates, background requests). */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
}

/**
 * Signs `user` in to the console at `consoleUrl` as a person does: its "Sign in with single
 * sign-on" link, then the login form of the provider at `issuer` (DevIdp's). Returns once the
 * form is sent: a right password lands back on the console, a wrong one stays on the form.
 */
export async function signInWithSso(page: Page, consoleUrl: string, issuer: string, user: string, password: string): Promise<void> {
  await page.goto(consoleUrl);
  await page.getByRole("link", { name: "Sign in with single sign-on" }).click();
  await page.waitForURL(`${issuer}/**`);
  await page.getByLabel("User name").fill(user);
  await page.getByLabel("Password").fill(password);
  await page.getByRole("button", { name: "Sign in" }).click();
}
