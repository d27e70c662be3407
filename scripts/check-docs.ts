// `pnpm lint` (and so `pnpm test`): the documentation stands alone and describes the system
// as it is. Fails on
// * a missing docs/architecture.md;
// * a Markdown link in a tracked .md file that leaves the repository or names a file that
//   does not exist (the README links only inside the repository: no http(s) links at all);
// * work-log wording: references to work items or work periods, first-person narrative, or
//   "today" in a .md file; references to work items or work periods in any tracked file.
//   What was done when, and by whom, is what git history is for;
// * a README of more than 250 lines (the rest belongs in docs/);
// * a page of docs/ that the site's navigation (docs/.vitepress/config.ts) does not list, or a
//   navigation entry without its page;
// * a code block with more than its language after the fence that is not `sh runnable
//   stack=<stack>` (the tests would silently skip it), and an include of a file or region that
//   does not exist;
// * a link to a section of a docs page (page.md#section, or #section) that the page, with what
//   it includes, does not have, by the anchors the site gives headings;
// * a citation of a section of the architecture (`ARCHITECTURE §N`, or docs/architecture.md
//   followed by §N) in any tracked file that docs/architecture.md has no numbered heading for;
// * a metric of ctrl or the agent (flotilla_ctrl_…, flotilla_agent_…) named in a .md file that
//   the generated metrics reference does not list: renamed or never there.
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { headingAnchors, runnableFence } from "@flotilla/testkit/docs";

const ROOT = resolve(import.meta.dirname, "..");
const problems: string[] = [];

if (!existsSync(join(ROOT, "docs/architecture.md"))) problems.push("docs/architecture.md is missing");

const tracked = execFileSync("git", ["ls-files", "-z", "--cached", "--others", "--exclude-standard"], { cwd: ROOT, encoding: "utf8" })
  .split("\0")
  .filter((path) => path !== "" && existsSync(join(ROOT, path)));

/** Wording that makes a file read as a diary of how it was built, in any text file. */
const WORK_LOG_ANYWHERE: [RegExp, string][] = [
  [/\b(?:issue|task|ticket)s? #?\d+/i, "a reference to a work item"],
  [/\b(?:this session|sessions? \d+|work periods?)\b/i, "a reference to a work period"],
];
/** Further wording a document must not carry. */
const WORK_LOG_IN_DOCS: [RegExp, string][] = [
  [/(?:^|[^\p{L}/-])I(?:'m|'ve|'d|’m|’ve|’d)?(?= )/u, "first-person narrative"],
  [/\b(?:today|yesterday|tonight|this morning)\b/i, "a date of work"],
];
const README_MAX_LINES = 250;
// VitePress's include of a file or of a region of it: <!--@include: ../README.md#quick-starts-->
const INCLUDE = /<!--@include:\s*([^#\s]+?)(?:#([\w-]+))?\s*-->/g;

// The metrics the code registers, as the generated reference lists them.
const METRIC = /\bflotilla_(?:ctrl|agent)_[a-z_]+\b/g;
const KNOWN_METRICS = new Set(readFileSync(join(ROOT, "docs/reference/metrics.md"), "utf8").match(METRIC));

// Code and documents cite the architecture's numbered sections: `ARCHITECTURE §9`, `docs/architecture.md §3`,
// `[architecture](architecture.md) §5`; each of §2/§3 and §3, §4 is a citation too.
const CITATION = /(?:ARCHITECTURE|architecture\.md\)?)((?:[ ,/and]*§ ?\d+)+)/g;
const ARCHITECTURE_SECTIONS = new Set([...readFileSync(join(ROOT, "docs/architecture.md"), "utf8").matchAll(/^## (\d+)\. /gm)].map(([, n]) => n!));

const TEXT = /\.(?:md|ts|tsx|js|mjs|css|html|json|ya?ml|proto|sh)$|(?:^|\/)(?:Dockerfile|run)$/;
// Markdown links and images: [text](target) — the target up to a space or the closing parenthesis.
const LINK = /!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g;

/** The text of a docs page as the site renders it: its includes (a file or a region of one) in place. */
function withIncludes(path: string): string {
  return readFileSync(path, "utf8").replace(INCLUDE, (include, target: string, region?: string) => {
    const included = resolve(dirname(path), target);
    if (!existsSync(included)) return include;
    const text = readFileSync(included, "utf8");
    if (!region) return text;
    const from = text.indexOf(`<!-- #region ${region} -->`);
    const to = text.indexOf(`<!-- #endregion ${region} -->`);
    return from >= 0 && to > from ? text.slice(from, to) : include;
  });
}
const anchorsOf = new Map<string, Set<string>>();
/** Whether the docs page at `file` has a section `anchor` (pages outside docs/ are not checked: forges make other anchors). */
function hasSection(file: string, anchor: string): boolean {
  if (!relative(ROOT, file).startsWith("docs/") || !file.endsWith(".md")) return true;
  if (!anchorsOf.has(file)) anchorsOf.set(file, headingAnchors(withIncludes(file)));
  return anchorsOf.get(file)!.has(anchor);
}

for (const path of tracked) {
  if (!TEXT.test(path) || path === "pnpm-lock.yaml" || path.startsWith("packages/proto/gen/") || path === "scripts/check-docs.ts") continue;
  const lines = readFileSync(join(ROOT, path), "utf8").split("\n");
  const isDoc = path.endsWith(".md");
  let fenced = false;
  lines.forEach((line, index) => {
    const where = `${path}:${index + 1}`;
    for (const [pattern, what] of WORK_LOG_ANYWHERE) if (pattern.test(line)) problems.push(`${where}: ${what}: ${line.trim()}`);
    for (const [, sections] of line.matchAll(CITATION))
      for (const [, n] of sections!.matchAll(/§ ?(\d+)/g))
        if (!ARCHITECTURE_SECTIONS.has(n!)) problems.push(`${where}: docs/architecture.md has no section §${n}: ${line.trim()}`);
    if (!isDoc) return;
    if (isDoc && !fenced && line.trimStart().startsWith("```")) {
      try {
        runnableFence(line);
      } catch (error) {
        problems.push(`${where}: ${(error as Error).message}`);
      }
    }
    if (line.trimStart().startsWith("```")) fenced = !fenced;
    if (fenced) return;
    for (const [metric] of line.matchAll(METRIC))
      if (!KNOWN_METRICS.has(metric)) problems.push(`${where}: a metric neither ctrl nor the agent registers: ${metric}`);
    for (const [pattern, what] of WORK_LOG_IN_DOCS) if (pattern.test(line.replace(/`[^`]*`/g, ""))) problems.push(`${where}: ${what}: ${line.trim()}`);
    for (const [, target, region] of line.matchAll(INCLUDE)) {
      const included = resolve(dirname(join(ROOT, path)), target!);
      if (!existsSync(included)) problems.push(`${where}: an include of a file that does not exist: ${target}`);
      else if (region && !readFileSync(included, "utf8").includes(`<!-- #region ${region} -->`)) problems.push(`${where}: ${target} has no region ${region}`);
    }
    for (const match of line.matchAll(LINK)) {
      const target = match[1]!;
      if (/^https?:/i.test(target)) {
        if (path === "README.md") problems.push(`${where}: the README links outside the repository: ${target}`);
        continue;
      }
      if (target.startsWith("mailto:")) continue;
      const [page, section] = target.split("#");
      const file = page ? resolve(dirname(join(ROOT, path)), decodeURIComponent(page)) : join(ROOT, path);
      if (relative(ROOT, file).startsWith("..")) problems.push(`${where}: a link leaves the repository: ${target}`);
      else if (!existsSync(file)) problems.push(`${where}: a link to a file that does not exist: ${target}`);
      else if (section && !hasSection(file, section)) problems.push(`${where}: a link to a section that ${relative(ROOT, file)} does not have: ${target}`);
    }
  });
}

const readmeLines = readFileSync(join(ROOT, "README.md"), "utf8").trimEnd().split("\n").length;
if (readmeLines > README_MAX_LINES) problems.push(`README.md: ${readmeLines} lines, more than ${README_MAX_LINES}: move the rest into docs/`);

// Every page is in the site's navigation, and every navigation entry has its page.
const siteConfig = readFileSync(join(ROOT, "docs/.vitepress/config.ts"), "utf8");
const linked = new Set([...siteConfig.matchAll(/link: "\/([^"#]*)"/g)].map(([, link]) => (link === "" || link!.endsWith("/") ? `${link}index` : link!)));
const pages = tracked.filter((path) => /^docs\/(?!\.vitepress\/).*\.md$/.test(path)).map((path) => path.slice("docs/".length, -".md".length));
for (const page of pages) if (!linked.has(page)) problems.push(`docs/${page}.md: not in the navigation of docs/.vitepress/config.ts`);
for (const link of linked) if (!pages.includes(link)) problems.push(`docs/.vitepress/config.ts: /${link} has no page docs/${link}.md`);

if (problems.length > 0) {
  console.error(`check-docs: ${problems.length} problem(s):\n${problems.map((p) => `  ${p}`).join("\n")}`);
  process.exit(1);
}
console.log(`check-docs: ${tracked.length} files, docs stand alone`);
