// The burst suite (burst.ts) on SQLite.
import { burstSuite } from "./burst.ts";

await burstSuite("sqlite");
