// `pnpm docs:build` (and so `pnpm lint`): the built documentation site loads nothing from
// another origin — no font, script, style sheet, image or frame from elsewhere. Links a reader
// follows are fine; what a page fetches by itself is not.
import { readdirSync, readFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";

const ROOT = resolve(import.meta.dirname, "..");
const DIST = join(ROOT, "docs/.vitepress/dist");

/** An element that fetches its src/href when the page loads (anchors are not among them). */
const FETCHING_ELEMENT = /<(?:script|link|img|iframe|source|video|audio|embed|object)\b[^>]*?\b(?:src|href|srcset|data)=["']?((?:https?:)?\/\/[^"' >]+)/gi;
/** CSS that fetches: url(...) or @import of another origin. */
const FETCHING_CSS = /(?:url\(\s*["']?|@import\s+["'])((?:https?:)?\/\/[^"')\s]+)/gi;

function* files(dir: string): Generator<string> {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* files(path);
    else yield path;
  }
}

const problems: string[] = [];
let pages = 0;
for (const path of files(DIST)) {
  const pattern = path.endsWith(".html") ? FETCHING_ELEMENT : path.endsWith(".css") ? FETCHING_CSS : undefined;
  if (!pattern) continue;
  if (path.endsWith(".html")) pages++;
  const text = readFileSync(path, "utf8");
  for (const match of text.matchAll(pattern)) {
    // SVG's namespace is an identifier, never fetched.
    if (!match[1]!.startsWith("http://www.w3.org/")) problems.push(`${relative(ROOT, path)}: loads ${match[1]}`);
  }
}
if (pages === 0) problems.push(`${relative(ROOT, DIST)} holds no page: run \`vitepress build docs\` first`);
if (problems.length > 0) {
  console.error(`check-docs-site: ${problems.length} problem(s):\n${problems.map((p) => `  ${p}`).join("\n")}`);
  process.exit(1);
}
console.log(`check-docs-site: ${pages} pages load nothing from another origin`);
