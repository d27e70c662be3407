// Writes every generated reference page into docs/reference/ from the code: the processes'
// flags, the CLI's commands, the protocol, the manifest kinds and the metrics. With --check it
// writes nothing and fails when a page differs from what it would write (part of `pnpm lint`).
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { cliPage } from "./reference/cli.ts";
import { agentPage, ctrlPage, emulatorPage } from "./reference/flags.ts";
import { indexPage, type ReferencePage } from "./reference/index-page.ts";
import { manifestsPage } from "./reference/manifests-page.ts";
import { metricsPage } from "./reference/metrics-page.ts";
import { protocolPage } from "./reference/protocol-page.ts";
import { readProtocol } from "./reference/proto.ts";

const ROOT = resolve(import.meta.dirname, "..");
const DIR = join(ROOT, "docs/reference");
process.chdir(ROOT);

const protocol = readProtocol(ROOT);
const PAGES: (ReferencePage & { render: () => string | Promise<string> })[] = [
  { file: "ctrl.md", title: "ctrl", summary: "its flags and environment variables, and its tools (migrate, pki, secrets)", render: ctrlPage },
  { file: "agent.md", title: "The agent", summary: "its flags and environment variables", render: agentPage },
  { file: "emulator.md", title: "The Kubernetes emulator", summary: "its flags and environment variables", render: emulatorPage },
  { file: "cli.md", title: "The flotilla CLI", summary: "every command with its arguments, flags and examples", render: cliPage },
  {
    file: "manifests.md",
    title: "Manifests",
    summary: "the kinds, their fields, rules and limits, and the examples",
    render: () => manifestsPage(protocol, ROOT),
  },
  { file: "protocol.md", title: "The protocol", summary: "every service, method, message, field and enum", render: () => protocolPage(protocol) },
  { file: "metrics.md", title: "Metrics", summary: "ctrl's and the agent's metrics: name, type, labels, meaning", render: metricsPage },
];

const pages = new Map<string, string>([["index.md", indexPage(PAGES)]]);
for (const page of PAGES) pages.set(page.file, `${(await page.render()).trimEnd()}\n`);

const check = process.argv.includes("--check");
const stale: string[] = [];
if (!check) mkdirSync(DIR, { recursive: true });
for (const [file, text] of pages) {
  const path = join(DIR, file);
  const current = existsSync(path) ? readFileSync(path, "utf8") : undefined;
  if (current === text) continue;
  stale.push(file);
  if (!check) writeFileSync(path, text);
}
// A page no longer generated would stay behind, looking current.
const strays = readdirSync(DIR).filter((file) => file.endsWith(".md") && !pages.has(file));
if (check) {
  if (stale.length > 0 || strays.length > 0) {
    console.error(
      `docs/reference is out of date (${[...stale, ...strays.map((f) => `${f}, not generated`)].join(", ")}); run \`pnpm docs:reference\` and commit`,
    );
    process.exit(1);
  }
  console.log(`docs/reference: ${pages.size} pages up to date`);
} else {
  if (strays.length > 0) console.error(`docs/reference: not generated, remove them: ${strays.join(", ")}`);
  console.log(stale.length > 0 ? `docs/reference: wrote ${stale.join(", ")}` : "docs/reference: up to date");
}
// The metric classes' default collectors keep timers of their own.
process.exit(strays.length > 0 && check ? 1 : 0);
