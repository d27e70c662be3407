// Debian's chromium, headless, driven by playwright-core: nothing downloads a browser build.
import { chromium, type Browser } from "playwright-core";

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
