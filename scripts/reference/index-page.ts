// The reference's overview page: what each generated page holds.
import { generatedHeader } from "./markdown.ts";

export interface ReferencePage {
  file: string;
  title: string;
  summary: string;
}

export function indexPage(pages: readonly ReferencePage[]): string {
  return [
    generatedHeader("Reference", "the list of pages in scripts/docs-reference.ts"),
    "Every page here is generated from the code by `pnpm docs:reference`; `pnpm lint` fails when one differs from what the code says.",
    "",
    ...pages.map((p) => `* [${p.title}](./${p.file}): ${p.summary}`),
    "",
    "Measured figures are in [Benchmarks](../benchmarks.md).",
    "",
  ].join("\n");
}
