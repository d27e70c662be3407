// Fails when `buf generate` would change the committed generated code.
import { execFileSync } from "node:child_process";

const GENERATED = "packages/proto/gen";
execFileSync("buf", ["generate"], { stdio: "inherit" });
const changed = execFileSync("git", ["status", "--porcelain", "--", GENERATED], { encoding: "utf8" });
if (changed.trim() !== "") {
  console.error(`generated code is out of date; run \`pnpm generate\` and commit:\n${changed}`);
  process.exit(1);
}
console.log("generated code is up to date");
